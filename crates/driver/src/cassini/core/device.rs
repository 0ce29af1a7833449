//! One Cassini device bound to this driver ([`CxiDevice`]): probe (identity, defaults, MSI-X,
//! the default service, TLE pools), clients opening and closing, reset, and the idle state
//! saved and restored around a device's life.

use super::*;

/// One Cassini device bound to this driver: `struct cxi_dev` + `struct cass_dev`.
pub struct CxiDevice {
    pub(super) function: Arc<PciFunction>,
    pub(super) hw: CassHw,
    pub(super) mem: Arc<dyn HostMem>,
    pub(super) config: DriverConfig,
    pub(super) info: DevInfo,
    pub(super) irqs: Option<Interrupts>,
    pub(super) initial: FreeCounts,
    pub(super) state: Mutex<DevState>,
    pub(super) resets: AtomicU64,
    /// uAPI requests (writes and mmaps) answered with an error.
    pub(super) refused: AtomicU64,
    pub(super) progress: OnceLock<Arc<dyn emu_core::engine::Progress>>,
    /// This device's draws of the fault sites.
    pub(super) faults: Mutex<crate::faults::FaultDraws>,
}

impl std::fmt::Debug for CxiDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CxiDevice")
            .field("address", &self.info.address)
            .field("nid", &format_args!("{:#x}", self.info.nid))
            .field("version", &self.info.version)
            .finish_non_exhaustive()
    }
}

/// The driver's state of an idle device, from [`CxiDevice::save_idle_state`].
#[derive(Debug)]
pub struct CxiIdleState {
    device: usize,
    state: DevState,
    resets: u64,
    refused: u64,
    vectors: Vec<(u64, u64)>,
    faults: Option<crate::faults::FaultDraws>,
}

/// Why a device could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// BAR0 is missing.
    #[error("the function has no BAR0")]
    NoBar0,
    /// Identification or programming failed.
    #[error(transparent)]
    Init(#[from] hw::InitError),
    /// Bad driver configuration.
    #[error("bad driver configuration: {0}")]
    Config(String),
    /// The PCI layer refused something.
    #[error(transparent)]
    Pci(#[from] crate::pci::PciError),
    /// Host memory for the driver failed.
    #[error(transparent)]
    Memory(#[from] MemError),
}

impl CxiDevice {
    /// Bring up the device behind `function` (the probe): identify it, enable memory and bus
    /// mastering, enable MSI-X, program the device-wide defaults, create the default service.
    pub fn probe(
        function: Arc<PciFunction>,
        mem: Arc<dyn HostMem>,
        config: DriverConfig,
    ) -> Result<Arc<CxiDevice>, DeviceError> {
        let pid_bits = PidBits::new(config.pid_bits).map_err(|_| {
            DeviceError::Config(format!("pid_bits {} not in 6..=9", config.pid_bits))
        })?;
        if config.iova_base == 0
            || !config.iova_base.is_multiple_of(PAGE_SIZE)
            || !config.iova_size.is_multiple_of(PAGE_SIZE)
            || config.iova_size == 0
            || config
                .iova_base
                .checked_add(config.iova_size)
                .is_none_or(|e| e > 1 << super::super::atu::IOVA_BITS)
        {
            return Err(DeviceError::Config("bad IOVA window".into()));
        }
        if config.default_vnis.len() > lim::CXI_SVC_MAX_VNIS {
            return Err(DeviceError::Config("more than 4 default VNIs".into()));
        }
        let bar0 = function.bar(0).ok_or(DeviceError::NoBar0)?;
        let bar0_size = bar0.size();
        let generation =
            firmware_spec::cassini::pci::identify(firmware_spec::cassini::pci::PciId {
                vendor: function.vendor_id(),
                device: function.device_id(),
            })
            .map(|(g, _)| g)
            .unwrap_or(Generation::Cassini1);
        let hw = CassHw::new(bar0, generation);
        let ident = hw.identify(function.vendor_id(), function.device_id())?;

        function.enable_device()?;

        let want = config.msix_vectors.min(function.msix_vectors());
        let irqs = if want > 0 {
            let irqs = function.enable_msix(want)?;
            hw.msix_program(want).map_err(hw::InitError::from)?;
            function.set_msix_enable(true)?;
            Some(irqs)
        } else {
            None
        };
        let msix_vectors = irqs.as_ref().map_or(0, |i| i.len());

        let granule = pid_bits.pid_granule();
        let info = DevInfo {
            address: function.address(),
            id: function.id(),
            version: ident.version,
            platform: ident.platform,
            rev: ident.sts_rev.rev,
            proto: ident.sts_rev.proto,
            nid: ident.nid,
            pid_bits,
            pid_count: (1u32 << pid_bits.get()) - 1,
            pid_granule: granule,
            rdzv_get_idx: granule - 1,
            is_vf: firmware_spec::cassini::pci::function_from_bar0_size(bar0_size)
                == firmware_spec::cassini::pci::Function::Vf,
            msix_vectors,
        };
        let phys_pages = mem.passthrough_pages();
        hw.init_defaults(info.nid, pid_bits, info.rdzv_get_idx, PHYS_ACID, phys_pages)
            .map_err(hw::InitError::from)?;

        let mut st = DevState::new(msix_vectors);
        if !config.disable_default_svc {
            create_default_service(&mut st, &config);
        }
        program_tle_pools(&hw, &st).map_err(hw::InitError::from)?;
        let initial = st.free_counts();
        tracing::info!(address = %info.address, nid = info.nid, version = ?info.version, platform = ?info.platform, "cassini device up");
        let faults = Mutex::new(config.faults.instance(info.nid));
        Ok(Arc::new(CxiDevice {
            function,
            hw,
            mem,
            config,
            info,
            irqs,
            initial,
            state: Mutex::new(st),
            resets: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            progress: OnceLock::new(),
            faults,
        }))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, DevState> {
        // Handlers leave the state consistent at every early return; a panic in one would
        // not leave it half-updated in a way later calls rely on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What probing learned.
    pub fn info(&self) -> &DevInfo {
        &self.info
    }

    /// The driver configuration in force.
    pub fn config(&self) -> &DriverConfig {
        &self.config
    }

    /// The PCI function.
    pub fn function(&self) -> &Arc<PciFunction> {
        &self.function
    }

    /// Hardware access (for diagnostics and tests: CSR reads through BAR0).
    pub fn hw(&self) -> &CassHw {
        &self.hw
    }

    /// The host memory the driver and its clients use.
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        &self.mem
    }

    /// Free entries of every allocator now.
    pub fn free_counts(&self) -> FreeCounts {
        self.lock().free_counts()
    }

    /// Free entries right after probe (with the default service and no client).
    pub fn initial_free_counts(&self) -> FreeCounts {
        self.initial
    }

    /// Number of open clients.
    pub fn client_count(&self) -> usize {
        self.lock().clients.values().filter(|c| !c.dead).count()
    }

    /// Attach the engine's progress handle (emulated devices; set once by the cluster).
    pub fn set_progress(&self, p: Arc<dyn emu_core::engine::Progress>) {
        let _ = self.progress.set(p);
    }

    /// Let the device make progress (the deterministic engine runs its next event; the
    /// threaded engine yields; a real device needs nothing). True if any device work was done.
    /// Code that polls rings in host memory calls this while it waits.
    pub fn progress(&self) -> bool {
        self.progress.get().is_some_and(|p| p.progress())
    }

    /// Whether a thread that has nothing to do may block until the device interrupts it
    /// (see [`emu_core::engine::Progress::before_sleep`]); a real device (no progress
    /// handle) progresses by itself.
    pub fn before_sleep(&self) -> bool {
        self.progress.get().is_none_or(|p| p.before_sleep())
    }

    /// Whether [`CxiDevice::before_sleep`] can ever say yes (no side effect; see
    /// [`emu_core::engine::Progress::can_sleep`]).
    pub fn can_sleep(&self) -> bool {
        self.progress.get().is_none_or(|p| p.can_sleep())
    }

    /// How many times the device was reset.
    pub fn reset_count(&self) -> u64 {
        self.resets.load(Ordering::Relaxed)
    }

    /// How many uAPI requests (command writes and mmaps) of any client this device answered
    /// with an error: a driver statistic (the kernel driver logs these with `dev_dbg`; here
    /// they are counted so that refusals are visible without a log).
    pub fn refused_requests(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Count one refused uAPI request.
    pub(crate) fn note_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Record the driver's state of an idle device (no client, so no queue, EQ, MD, PtlTE
    /// or other per-client object): the allocators, services, communication profiles and
    /// VNIs, the statistics and the interrupt vectors' counts. `None` while any client or
    /// per-client object exists. With the device model and host memory snapshotted at the
    /// same moment, [`CxiDevice::restore_idle_state`] puts the whole machine back (the fuzz
    /// targets rerun a fixture this way instead of probing afresh for every input).
    pub fn save_idle_state(&self) -> Option<CxiIdleState> {
        let st = self.lock();
        let idle = st.clients.is_empty()
            && st.pids.is_empty()
            && st.lnis.is_empty()
            && st.cp_handles.is_empty()
            && st.domains.is_empty()
            && st.cqs.is_empty()
            && st.eqs.is_empty()
            && st.ptes.is_empty()
            && st.pte_maps.is_empty()
            && st.cts.is_empty()
            && st.mds.is_empty()
            && st.acs.is_empty()
            && st.waits.is_empty();
        if !idle {
            return None;
        }
        let state = st.idle_copy();
        drop(st);
        Some(CxiIdleState {
            device: self as *const CxiDevice as usize,
            state,
            resets: self.resets.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            faults: self.faults.lock().ok().map(|f| f.clone()),
            vectors: self
                .irqs
                .iter()
                .flat_map(|i| i.iter())
                .map(|w| w.counts())
                .collect(),
        })
    }

    /// Put back the state [`CxiDevice::save_idle_state`] recorded on this device. Every
    /// object created since is forgotten (its host pages go back to the allocator, which
    /// the caller then restores with the host memory); the hardware is not touched (the
    /// caller restores the device model). `EBUSY` while a client is open, `EINVAL` for a
    /// state of another device.
    pub fn restore_idle_state(&self, saved: &CxiIdleState) -> Result<(), Errno> {
        if saved.device != self as *const CxiDevice as usize {
            return Err(Errno::Einval);
        }
        let copy = saved.state.idle_copy();
        let old = {
            let mut st = self.lock();
            if st.clients.values().any(|c| !c.dead) {
                return Err(Errno::Ebusy);
            }
            std::mem::replace(&mut *st, copy)
        };
        // Dropped outside the lock: pages of objects an input left behind are freed.
        drop(old);
        self.resets.store(saved.resets, Ordering::Relaxed);
        self.refused.store(saved.refused, Ordering::Relaxed);
        if let (Some(f), Ok(mut now)) = (&saved.faults, self.faults.lock()) {
            *now = f.clone();
        }
        for (w, &(pending, total)) in self.irqs.iter().flat_map(|i| i.iter()).zip(&saved.vectors) {
            w.set_counts(pending, total);
        }
        Ok(())
    }

    /// The wait object of MSI-X vector `v`.
    pub(crate) fn vector(&self, v: u32) -> Option<Arc<WaitObject>> {
        self.irqs.as_ref()?.vector(v).cloned()
    }

    /// Register a new client (the `open()` of `/dev/cxiN`).
    pub(crate) fn add_client(&self, creds: Credentials, space: UserSpace) -> ClientId {
        let mut st = self.lock();
        let id = st.next_client;
        st.next_client = st.next_client.wrapping_add(1).max(1);
        st.clients.insert(
            id,
            ClientState {
                creds,
                space,
                mmaps: BTreeMap::new(),
                next_mmap: PAGE_SIZE,
                dead: false,
                csrs_mapped: false,
            },
        );
        id
    }

    /// Release everything `client` holds and forget it (the `release()` of the file).
    pub(crate) fn close_client(&self, client: ClientId) {
        let mut st = self.lock();
        self.release_all(&mut st, client);
        if let Some(c) = st.clients.remove(&client) {
            for m in c.mmaps.values() {
                m.shared.revoke();
            }
        }
    }

    /// Reset the device: every client loses every object (their later requests fail with
    /// `EIO`), the device-wide configuration is programmed again and every allocator is back
    /// to its initial state.
    pub fn reset(&self) -> Result<(), Errno> {
        let mut st = self.lock();
        let ids: Vec<ClientId> = st.clients.keys().copied().collect();
        for id in ids {
            self.release_all(&mut st, id);
            if let Some(c) = st.clients.get_mut(&id) {
                c.dead = true;
                for m in c.mmaps.values() {
                    m.shared.revoke();
                }
                c.mmaps.clear();
            }
        }
        let svcs: Vec<u32> = st.services.keys().copied().collect();
        for s in svcs {
            st.services.remove(&s);
            st.svc_id.free(s);
        }
        let mut fresh = DevState::new(self.info.msix_vectors);
        fresh.clients = std::mem::take(&mut st.clients);
        fresh.next_client = st.next_client;
        *st = fresh;
        if !self.config.disable_default_svc {
            create_default_service(&mut st, &self.config);
        }
        self.resets.fetch_add(1, Ordering::Relaxed);
        let phys_pages = self.mem.passthrough_pages();
        self.hw
            .init_defaults(
                self.info.nid,
                self.info.pid_bits,
                self.info.rdzv_get_idx,
                PHYS_ACID,
                phys_pages,
            )
            .map_err(eio)?;
        self.hw.msix_program(self.info.msix_vectors).map_err(eio)?;
        program_tle_pools(&self.hw, &st).map_err(eio)?;
        tracing::info!(address = %self.info.address, "cassini device reset");
        Ok(())
    }

    /// Free every object of `client` in dependency order, ignoring hardware errors.
    pub(super) fn release_all(&self, st: &mut DevState, client: ClientId) {
        fn mine<T>(
            m: &BTreeMap<u32, T>,
            client: ClientId,
            owner: impl Fn(&T) -> ClientId,
        ) -> Vec<u32> {
            m.iter()
                .filter(|(_, o)| owner(o) == client)
                .map(|(k, _)| *k)
                .collect()
        }
        for j in mine(&st.pte_maps, client, |o| o.client) {
            self.free_pte_map(st, j);
        }
        for n in mine(&st.ptes, client, |o| o.client) {
            self.free_pte(st, n);
        }
        for h in mine(&st.cqs, client, |o| o.client) {
            self.free_cq(st, h);
        }
        for n in mine(&st.cts, client, |o| o.client) {
            self.free_ct(st, n);
        }
        for n in mine(&st.eqs, client, |o| o.client) {
            self.free_eq(st, n);
        }
        for w in mine(&st.waits, client, |o| o.client) {
            self.free_wait(st, w);
        }
        for id in mine(&st.mds, client, |o| o.client) {
            self.free_md(st, id);
        }
        for d in mine(&st.domains, client, |o| o.client) {
            self.free_domain(st, d);
        }
        for h in mine(&st.cp_handles, client, |o| o.client) {
            self.free_cp(st, h);
        }
        for l in mine(&st.lnis, client, |o| o.client) {
            self.free_lni(st, l);
        }
        if let Some(c) = st.clients.get_mut(&client) {
            for m in c.mmaps.values() {
                m.shared.revoke();
            }
            c.mmaps.clear();
        }
    }

    pub(super) fn log_hw(r: Result<(), HwError>) {
        if let Err(e) = r {
            tracing::warn!(error = %e, "teardown: hardware access failed");
        }
    }

    pub(super) fn drop_token(st: &mut DevState, client: ClientId, token: u64) {
        if let Some(c) = st.clients.get_mut(&client) {
            c.mmaps.remove(&token);
        }
    }
}

pub(super) fn create_default_service(st: &mut DevState, cfg: &DriverConfig) {
    let Some(id) = st.svc_id.alloc() else {
        return;
    };
    // cass_svc.c (`cass_svc_init`): restricted to the default VNIs, resource limits at the
    // device's totals, the four traffic classes DEDICATED_ACCESS..BEST_EFFORT, not a system
    // service. Enabled here: nicemu loads the driver as HPE's test VMs do
    // (`disable_default_svc=0`); `DriverConfig::disable_default_svc` leaves it out.
    let mut desc = SvcDesc {
        bits: svcbits::RESTRICTED_VNIS | svcbits::RESOURCE_LIMITS | svcbits::ENABLE,
        num_vld_vnis: cfg.default_vnis.len() as u8,
        tcs: [1, 1, 1, 1, 0],
        svc_id: id,
        ..SvcDesc::default()
    };
    for (d, v) in desc.vnis.iter_mut().zip(&cfg.default_vnis) {
        *d = *v;
    }
    // cass_svc.c: the default service reserves `default_svc_num_tles` TLEs.
    let totals = device_limits();
    for (l, t) in desc.limits.iter_mut().zip(totals) {
        l.max = t;
    }
    desc.limits[rsrc::TLE].res = lim::DEFAULT_SVC_NUM_TLES as u16;
    desc.limits[rsrc::TLE].max = lim::DEFAULT_SVC_NUM_TLES as u16;
    st.services.insert(id, Service::new(desc, 0));
}

/// TLE pools (`c_cq_cfg_tle_pool` has 4 entries).
pub(super) const NUM_TLE_POOLS: u32 = 4;

/// Program the TLE pools from the services (cass_tle.c): pool 0 reserves the default
/// service's `default_svc_num_tles`, a service with a TLE limit has its own pool
/// (`res`/`max`), unused pools hold nothing, and the rest of the 2048 TLEs is the shared
/// reserve.
pub(super) fn program_tle_pools(hw: &CassHw, st: &DevState) -> Result<(), HwError> {
    let mut reserved = lim::DEFAULT_SVC_NUM_TLES as u32;
    hw.tle_pool_set(0, reserved, lim::DEFAULT_SVC_NUM_TLES as u32)?;
    for pool in 1..NUM_TLE_POOLS {
        let svc = st.services.values().find(|s| s.tle_pool == pool);
        let (res, max) = svc.map_or((0, 0), |s| {
            let l = s.desc.limits[rsrc::TLE];
            (u32::from(l.res), u32::from(l.max))
        });
        hw.tle_pool_set(pool, res, max)?;
        reserved += res;
    }
    hw.tle_shared_set((lim::C_NUM_TLES as u32).saturating_sub(reserved))
}
