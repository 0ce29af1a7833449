//! Probe: check the function, record its reset state, bring the NIC up.

use super::state::*;
use super::*;

impl Kgni {
    /// Take over a probed Gemini function: check it, record its reset state, enable MSI-X,
    /// program the MRT page size, partition and enable the BTE channels, and set up the
    /// kernel's datagram rings. `mem` is the node's host memory.
    pub fn probe(
        function: &Arc<PciFunction>,
        mem: Arc<dyn HostMem>,
        config: KgniConfig,
    ) -> Result<Arc<Kgni>, KgniProbeError> {
        let unsupported = |s: String| KgniProbeError::Unsupported(s);
        if function.class_code() != gpci::CLASS_CODE {
            return Err(unsupported(format!(
                "class code {:06x}, expected {:06x}",
                function.class_code(),
                gpci::CLASS_CODE
            )));
        }
        let bar0 = function
            .bar(gpci::BAR0.index)
            .ok_or_else(|| unsupported("no BAR 0".into()))?;
        let bar0_size = bar0.size();
        let hw = Ghal::new(bar0).map_err(|e| unsupported(e.to_string()))?;
        if function.bar(gpci::BAR2.index).is_none() {
            return Err(unsupported("no BAR 2 (MSI-X)".into()));
        }
        let vectors = function.msix_vectors();
        if vectors < u32::from(gpci::MSIX_VECTORS) {
            return Err(unsupported(format!(
                "{vectors} MSI-X vectors, need {}",
                gpci::MSIX_VECTORS
            )));
        }
        let total_tx: u32 = config.tx_ring.iter().map(|c| u32::from(*c)).sum();
        if total_tx > limits::BTE_TX_DESCRIPTORS as u32
            || USER_CHANNELS.iter().all(|c| config.tx_ring[*c] < 2)
            || config.tx_ring[DGRAM_CHANNEL] < 2
            || config.rx_ring < 2
            || u64::from(config.rx_ring) > limits::BTE_RX_DESCRIPTORS
            || usize::from(config.mrt_page_code) >= MRT_PAGE_SIZES.len()
        {
            return Err(unsupported("invalid KgniConfig ring sizes".into()));
        }

        let reset = Self::read_reset(function, &hw, bar0_size)?;
        let pe = reset.node_id;
        let irqs = function.enable_msix(u32::from(gpci::MSIX_VECTORS))?;
        Self::msix_setup(function)?;

        hw.set_mrt_page_code(config.mrt_page_code)?;

        // BTE TX: contiguous partition from slot 0.
        let mut base = [0u16; 4];
        let mut next = 0u16;
        for (c, b) in base.iter_mut().enumerate() {
            *b = next;
            next += config.tx_ring[c];
        }
        hw.bte_set_tx_rings(base, config.tx_ring)?;
        let mut tx = Vec::new();
        for c in 0..limits::BTE_CHANNELS as u32 {
            let count = config.tx_ring[c as usize];
            let cpu = PageBlock::alloc(&mem, u64::from(count.max(1)) * map::BTE_TX_PITCH)?;
            hw.bte_tx_channel_enable(
                c,
                bte::txvc_flag::ENABLE,
                gpci::irq_index(c, gpci::IRQ_TX),
                cpu.bus_address(0),
            )?;
            tx.push(TxRing {
                base: base[c as usize],
                count,
                write: 0,
                tail: 0,
                recs: vec![None; usize::from(count)],
                cpu,
            });
        }

        let mut cq_alloc = IdAllocator::new(1, limits::CQ_DESCRIPTORS as u32);
        let kcq = cq_alloc
            .alloc()
            .ok_or_else(|| unsupported("no CQ for the kernel".into()))?;
        let kcq_ring = PageBlock::alloc(&mem, u64::from(KERNEL_CQ_ENTRIES + 1) * 8)?;
        hw.cq_enable(
            kcq,
            &CqDescriptor {
                base_addr: kcq_ring.bus_address(0),
                max_index: u64::from(KERNEL_CQ_ENTRIES),
                irq_req_index: u64::from(gpci::irq_cq_index(0)),
                irq_thresh_index: 1,
                ..CqDescriptor::default()
            },
        )?;

        // Datagram path: TX staging per channel-0 position, RX buffers and CPU ring.
        let rx = config.rx_ring;
        let tx_stage =
            PageBlock::alloc(&mem, u64::from(config.tx_ring[DGRAM_CHANNEL]) * DGRAM_BUF)?;
        let rx_buffers = PageBlock::alloc(&mem, u64::from(rx) * DGRAM_BUF)?;
        let rx_cpu_ring = PageBlock::alloc(&mem, u64::from(rx) * hw::CPU_RX_PITCH)?;
        hw.bte_set_rx_rings([0, 0, 0, 0], [0, 0, 0, rx])?;
        for r in 0..rx - 1 {
            hw.bte_write_rxd(
                u32::from(r),
                &RxDescriptor {
                    base_addr: rx_buffers.bus_address(u64::from(r) * DGRAM_BUF),
                    mode1: 0,
                },
            )?;
        }
        hw.bte_rx_channel_enable(
            DGRAM_CHANNEL as u32,
            DGRAM_BUF as u32,
            rx_cpu_ring.bus_address(0),
            bte::rxvc_flag::ENABLE | bte::rxvc_flag::IRQ_ENABLE,
            RX_VECTOR,
            rx - 1,
        )?;

        let state = State {
            clients: std::collections::BTreeSet::new(),
            jobs: BTreeMap::new(),
            job_generation: 0,
            cdm_alloc: IdAllocator::new(1, config.max_cdms.saturating_add(1)),
            cdms: BTreeMap::new(),
            fma_alloc: IdAllocator::new(0, limits::FMA_DESCRIPTORS as u32),
            fma_os_alloc: IdAllocator::new(
                limits::FMA_DESCRIPTORS as u32,
                limits::FMA_TOTAL_DESCRIPTORS as u32,
            ),
            fmas: BTreeMap::new(),
            cq_alloc,
            cqs: BTreeMap::new(),
            mdd_alloc: IdAllocator::new(0, limits::MDD_ENTRIES as u32),
            mrt_alloc: IdAllocator::new(0, limits::MRT_ENTRIES as u32),
            regs: BTreeMap::new(),
            ntt_alloc: IdAllocator::new(0, limits::NTT_ENTRIES as u32),
            ep_alloc: IdAllocator::new(1, config.max_endpoints.saturating_add(1)),
            eps: BTreeMap::new(),
            tx,
            rr: 0,
            matcher: Matcher::new(pe, config.dgram_unexpected_limit),
            backlog: VecDeque::new(),
            responses: VecDeque::new(),
            next_response: 0,
            kernel: KernelRes {
                cq: kcq,
                cq_ring: kcq_ring,
                cq_entries: KERNEL_CQ_ENTRIES + 1,
                cq_rd: 0,
                tx_stage,
                rx_buffers,
                rx_cpu_ring,
                rx_pos: 0,
                rx_write: rx - 1,
            },
            entropy: 0,
            held: Vec::new(),
            faults: config.faults.instance(pe),
        };
        tracing::debug!(address = %function.address(), pe, "kgni: Gemini up");
        Ok(Arc::new(Kgni {
            function: Arc::clone(function),
            hw,
            mem,
            irqs,
            config,
            pe,
            reset,
            state: Mutex::new(state),
            waiter: Mutex::new(Waiter::Interrupts),
            next_client: AtomicU64::new(1),
            refused: AtomicU64::new(0),
        }))
    }

    /// `pci_enable_device` + `pci_set_master`, then MSI-X: every table entry in BAR 2 gets an
    /// address and its vector number as data and is unmasked, and the capability's enable bit
    /// is set (function mask clear). The device delivers a vector only when all of that holds.
    fn msix_setup(function: &PciFunction) -> Result<(), KgniProbeError> {
        // The x86 interrupt address window; the emulated platform delivers by vector.
        const MSI_ADDR: u32 = 0xFEE0_0000;
        function.enable_device()?;
        let bar2 = function
            .bar(gpci::BAR2.index)
            .ok_or_else(|| KgniProbeError::Unsupported("no BAR 2 (MSI-X)".into()))?;
        let mmio = |off: u64, v: u32| {
            bar2.write_u32(off, v).map_err(|source| HwError::Mmio {
                what: "msix_table",
                offset: off,
                source,
            })
        };
        for v in 0..u32::from(gpci::MSIX_VECTORS) {
            let e = gpci::MSIX_TABLE_OFFSET + 16 * u64::from(v);
            mmio(e, MSI_ADDR)?;
            mmio(e + 4, 0)?;
            mmio(e + 8, v)?;
            mmio(e + 12, 0)?;
        }
        if function.set_msix_enable(true)? {
            Ok(())
        } else {
            Err(KgniProbeError::Unsupported("no MSI-X capability".into()))
        }
    }

    fn read_reset(
        function: &PciFunction,
        hw: &Ghal,
        bar0_size: u64,
    ) -> Result<ResetReport, HwError> {
        let mut fma_masks_not_default = Vec::new();
        let mut fma_enabled = Vec::new();
        for id in 0..limits::FMA_TOTAL_DESCRIPTORS as u32 {
            if hw.fma_prvmask(id)? != PrivMask::DEFAULT.bits() {
                fma_masks_not_default.push(id);
            }
            if hw.fma_enabled(id)? {
                fma_enabled.push(id);
            }
        }
        let mut cqs_enabled = Vec::new();
        for i in 0..limits::CQ_DESCRIPTORS as u32 {
            if hw.cq_is_enabled(i)? {
                cqs_enabled.push(i);
            }
        }
        let mut mdds_valid = Vec::new();
        for i in 0..limits::MDD_ENTRIES as u32 {
            if hw.mdd_is_valid(i)? {
                mdds_valid.push(i);
            }
        }
        Ok(ResetReport {
            node_id: hw.node_id()?,
            revision: function.revision(),
            class_code: function.class_code(),
            bar0_size,
            msix_vectors: function.msix_vectors(),
            mrt_page_code: hw.mrt_page_code()?,
            fma_masks_not_default,
            fma_enabled,
            cqs_enabled,
            mdds_valid,
            tx_rings: hw.bte_tx_rings()?,
        })
    }
}
