//! Command queues and event queues: allocated with CSR stores as the driver does, and
//! software's side of each ([`CmdQueue`]: commands into the ring, doorbells, the low-latency
//! window; [`EqRing`]: events read from the ring, acknowledged through the EE page).

use emu_core::memory::GuestAddress;
use firmware_spec::cassini::cmd::{CmdHeader, CmdSize, CmdType, DmaOp};
use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::dfa::{PidBits, build_dfa};
use firmware_spec::cassini::event::{Event, EventType, peek_event};
use firmware_spec::cassini::pci::{
    CQ_LAUNCH_PAGE_SIZE, CQ_LAUNCH_TGT_BASE, EE_SW_STATE_BASE, EE_SW_STATE_PAGE_SIZE,
};
use firmware_spec::cassini::status::{C_CQ_FIRST_WR_PTR, CqStatus, EqSwState, pad_slots32};

use super::error::{HarnessError, mem_err};
use super::fixed::{AC_KERNEL, AC_USER, PAGE, RGID};
use super::node::Node;

impl Node {
    /// Event queue `n` with `bytes` of ring (a multiple of 4 KiB) in the user context.
    pub fn alloc_eq(&mut self, n: u16, bytes: u64, opts: EqOpts) -> Result<EqRing, HarnessError> {
        use f::c_ee_cfg_eq_descriptor as d;
        // In the kernel's bypass context the ring's address is its host address.
        let (host, addr, acid) = if opts.kernel_context {
            let host = self.alloc_host(bytes)?;
            (host, host, AC_KERNEL)
        } else {
            let md = self.map(bytes, true, true)?;
            (md.host, md.iova, AC_USER)
        };
        self.csr_write(
            csr::C_CQ_CFG_EQ_RGID_TABLE,
            u32::from(n),
            &[(f::c_cq_cfg_eq_rgid_table::RGID, u64::from(RGID))],
        )?;
        self.csr_write(
            csr::C_EE_CFG_EQ_DESCRIPTOR,
            u32::from(n),
            &[
                (d::EQ_ENABLE, 1),
                (d::BUFFER_A_EN, 1),
                (d::BUFFER_A_SIZE, bytes / PAGE),
                (d::BUFFER_A_ADDR, addr >> 12),
                (d::ACID, u64::from(acid)),
                (d::EQ_STS_DROPPED_EN, u64::from(opts.drop_status)),
                (d::RESERVED_FC, u64::from(opts.reserved_fc)),
                (d::EVENT_INT_EN, u64::from(opts.interrupt.is_some())),
                (d::EVENT_INT_IDX, u64::from(opts.interrupt.unwrap_or(0))),
            ],
        )?;
        if opts.long_initiator || opts.long_target {
            let entry = u32::from(n) / 32;
            let shift = 2 * (u32::from(n) % 32);
            let mut qw = u64::from_le_bytes(
                self.csr_read(csr::C_EE_CFG_LONG_EVNT_OVR_TABLE, entry)?[..8]
                    .try_into()
                    .map_err(|_| HarnessError::Invalid("csr".into()))?,
            );
            let v = u64::from(opts.long_initiator) | (u64::from(opts.long_target) << 1);
            qw = (qw & !(3 << shift)) | (v << shift);
            self.csr_write_image(csr::C_EE_CFG_LONG_EVNT_OVR_TABLE, entry, &qw.to_le_bytes())?;
        }
        let eq = EqRing {
            n,
            host,
            size: bytes,
            rd: 64,
            sw: EqSwState::default(),
            unacked: 0,
        };
        eq.write_sw_state(self)?;
        Ok(eq)
    }

    #[allow(clippy::too_many_arguments)]
    fn alloc_cq(
        &mut self,
        tgt: bool,
        n: u16,
        slots: u32,
        eq: u16,
        lcid: u8,
        trig_pool: Option<u8>,
    ) -> Result<CmdQueue, HarnessError> {
        let bytes = u64::from(slots) * 64;
        let host = self.alloc_host(bytes)?;
        if tgt {
            use f::c_cq_tgq_table as t;
            self.csr_write(
                csr::C_CQ_TGQ_TABLE,
                u32::from(n),
                &[
                    (t::MEM_Q_BASE, host >> 12),
                    (t::MEM_Q_MAX_PTR, u64::from(slots - 1)),
                    (t::MEM_Q_EQ, u64::from(eq)),
                    (t::MEM_Q_RGID, u64::from(RGID)),
                    (t::MEM_Q_ACID, u64::from(AC_KERNEL)),
                ],
            )?;
            self.csr_write(
                csr::C_CQ_TGQ_ENABLE,
                u32::from(n),
                &[(f::c_cq_tgq_enable::TGQ_ENABLE, 1)],
            )?;
        } else {
            use f::c_cq_txq_base_table as t;
            self.csr_write(
                csr::C_CQ_TXQ_BASE_TABLE,
                u32::from(n),
                &[
                    (t::MEM_Q_BASE, host >> 12),
                    (t::MEM_Q_MAX_PTR, u64::from(slots - 1)),
                    (t::MEM_Q_EQ, u64::from(eq)),
                    (t::MEM_Q_RGID, u64::from(RGID)),
                    (t::MEM_Q_LCID, u64::from(lcid)),
                    (t::MEM_Q_ACID, u64::from(AC_KERNEL)),
                    // A trigger CQ draws its TLEs from pool `mem_q_pfq` (cass_cq.c).
                    (t::MEM_Q_PFQ, u64::from(trig_pool.unwrap_or(0))),
                ],
            )?;
            self.csr_write(
                csr::C_CQ_TXQ_TC_TABLE,
                u32::from(n),
                &[(
                    f::c_cq_txq_tc_table::MEM_Q_TRIG,
                    u64::from(trig_pool.is_some()),
                )],
            )?;
            self.csr_write(
                csr::C_CQ_TXQ_ENABLE,
                u32::from(n),
                &[(f::c_cq_txq_enable::TXQ_ENABLE, 1)],
            )?;
        }
        Ok(CmdQueue {
            tgt,
            n,
            host,
            slots: u64::from(slots),
            wp32: 2 * C_CQ_FIRST_WR_PTR,
            rd: C_CQ_FIRST_WR_PTR,
        })
    }

    /// Transmit CQ `n` with `slots` 64 B slots (power of two, at least 64), failures to `eq`,
    /// starting on LCID `lcid`.
    pub fn alloc_txq(
        &mut self,
        n: u16,
        slots: u32,
        eq: u16,
        lcid: u8,
    ) -> Result<CmdQueue, HarnessError> {
        self.alloc_cq(false, n, slots, eq, lcid, None)
    }

    /// Trigger CQ `n` (`CXI_CQ_TX_WITH_TRIG_CMDS`: CT commands only, LCID 0) whose pending
    /// triggered operations take TLEs from pool `tle_pool`.
    pub fn alloc_trig_txq(
        &mut self,
        n: u16,
        slots: u32,
        eq: u16,
        tle_pool: u8,
    ) -> Result<CmdQueue, HarnessError> {
        self.alloc_cq(false, n, slots, eq, 0, Some(tle_pool & 3))
    }

    /// Target CQ `n`.
    pub fn alloc_tgq(&mut self, n: u16, slots: u32, eq: u16) -> Result<CmdQueue, HarnessError> {
        self.alloc_cq(true, n, slots, eq, 0, None)
    }

    /// Read `c_cq_status` of a queue from its ring.
    pub fn cq_status(&self, q: &CmdQueue) -> Result<CqStatus, HarnessError> {
        let b = self.read_host(q.host, 8)?;
        CqStatus::decode(&b).map_err(|e| HarnessError::Invalid(e.to_string()))
    }
}

/// Options of [`Node::alloc_eq`].
#[derive(Debug, Clone, Copy, Default)]
pub struct EqOpts {
    /// Write the status block on drops (`eq_sts_dropped_en`).
    pub drop_status: bool,
    /// `reserved_fc` slots.
    pub reserved_fc: u16,
    /// Initiator events in the long format.
    pub long_initiator: bool,
    /// Target events in the long format.
    pub long_target: bool,
    /// Raise this MSI-X vector per event.
    pub interrupt: Option<u16>,
    /// Put the ring in the kernel's bypass context (as a driver-owned EQ) instead of the user
    /// context: no LAC of the user's resource group reaches it, so no command a process
    /// issues can write over it (a user-context ring can be overwritten by the process's own
    /// Gets, as on the hardware).
    pub kernel_context: bool,
}

/// Software's side of an event queue.
#[derive(Debug, Clone)]
pub struct EqRing {
    /// EQ number.
    pub n: u16,
    /// Host address of the ring.
    pub host: u64,
    /// Ring bytes.
    pub size: u64,
    rd: u64,
    sw: EqSwState,
    unacked: u32,
}

impl EqRing {
    fn write_sw_state(&self, node: &Node) -> Result<(), HarnessError> {
        let off = EE_SW_STATE_BASE + u64::from(self.n) * EE_SW_STATE_PAGE_SIZE;
        node.bar
            .write_u64(off, self.sw.to_u64())
            .map_err(Into::into)
    }

    /// The next event, if one is there (`cxi_eq_peek_event` + `cxi_eq_next_event`): NULL
    /// events are skipped; consumed bytes are zeroed; the read pointer is written back every
    /// [`EqRing::ACK_BATCH`] events (or by [`EqRing::ack`]).
    pub fn next(&mut self, node: &Node) -> Result<Option<Event>, HarnessError> {
        loop {
            let avail = ((self.size - self.rd) as usize).min(64);
            let mut b = [0u8; 64];
            let at = GuestAddress(self.host + self.rd);
            node.mem.read(at, &mut b[..avail]).map_err(mem_err)?;
            let h = match peek_event(&b[..avail]) {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(None),
                Err(e) => return Err(HarnessError::Invalid(e.to_string())),
            };
            let size = h.size.bytes();
            let ev = Event::decode(&b[..size]).map_err(|e| HarnessError::Invalid(e.to_string()))?;
            node.mem.fill(at, size as u64, 0).map_err(mem_err)?;
            self.rd += size as u64;
            if self.rd >= self.size {
                self.rd = 64;
            }
            self.unacked += 1;
            if self.unacked >= Self::ACK_BATCH {
                self.ack(node)?;
            }
            if ev.event_type() == EventType::NullEvent {
                continue;
            }
            return Ok(Some(ev));
        }
    }

    /// Events consumed between two read-pointer write-backs.
    pub const ACK_BATCH: u32 = 8;

    /// Write the read pointer back (`cxi_eq_ack_events`).
    pub fn ack(&mut self, node: &Node) -> Result<(), HarnessError> {
        self.sw.rd_ptr = (self.rd / 64) as u32;
        self.unacked = 0;
        self.write_sw_state(node)
    }

    /// The status block at the head of the ring.
    pub fn status(
        &self,
        node: &Node,
    ) -> Result<firmware_spec::cassini::status::EqStatus, HarnessError> {
        let b = node.read_host(self.host, 64)?;
        firmware_spec::cassini::status::EqStatus::decode(&b)
            .map_err(|e| HarnessError::Invalid(e.to_string()))
    }

    /// Acknowledge dropped events (`cxi_eq_ack_drops`).
    pub fn ack_drops(&mut self, node: &Node) -> Result<(), HarnessError> {
        let st = self.status(node)?;
        self.sw.event_drop_seq_no = st.event_drop_seq_no;
        self.write_sw_state(node)
    }
}

/// Software's side of a command queue.
#[derive(Debug, Clone)]
pub struct CmdQueue {
    /// Target queue.
    pub tgt: bool,
    /// Queue number.
    pub n: u16,
    /// Host address of the ring.
    pub host: u64,
    /// Slots.
    pub slots: u64,
    wp32: u64,
    rd: u64,
}

/// The 32 B IDC NOOP used as padding (first 8 bytes zero).
const NOOP32: [u8; 32] = [0u8; 32];

impl CmdQueue {
    fn launch_offset(&self) -> u64 {
        if self.tgt {
            CQ_LAUNCH_TGT_BASE + u64::from(self.n) * CQ_LAUNCH_PAGE_SIZE
        } else {
            u64::from(self.n) * CQ_LAUNCH_PAGE_SIZE
        }
    }

    /// Free half-slots (one 64 B slot always stays free), re-reading the written-back read
    /// pointer when the cached one leaves less than `need` (`__cxi_cq_free_slots`).
    fn free32(&mut self, node: &Node, need: u64) -> Result<u64, HarnessError> {
        let total = 2 * (self.slots - C_CQ_FIRST_WR_PTR);
        let free = |wp: u64, rd: u64| total - 2 - (wp + total - 2 * rd) % total;
        let mut n = free(self.wp32, self.rd);
        if n < need.max(16) {
            self.rd = u64::from(node.cq_status(self)?.rd_ptr);
            n = free(self.wp32, self.rd);
        }
        Ok(n)
    }

    fn put32(&mut self, node: &Node, bytes: &[u8]) -> Result<(), HarnessError> {
        node.write_host(self.host + self.wp32 * 32, bytes)?;
        self.wp32 += (bytes.len() / 32) as u64;
        if self.wp32 >= 2 * self.slots {
            self.wp32 = 2 * C_CQ_FIRST_WR_PTR;
        }
        Ok(())
    }

    /// Write one command (its `cmd_size` bytes) into the ring, padding with 32 B NOOPs so it
    /// is naturally aligned (`__cxi_pad_slots`). Does not ring the doorbell.
    pub fn emit(&mut self, node: &Node, cmd: &[u8]) -> Result<(), HarnessError> {
        let size = match cmd.len() {
            32 => CmdSize::B32,
            64 => CmdSize::B64,
            128 => CmdSize::B128,
            256 => CmdSize::B256,
            n => return Err(HarnessError::Invalid(format!("command of {n} bytes"))),
        };
        let pad = pad_slots32(self.wp32, size);
        let need = pad + size.slots32() as u64;
        if self.free32(node, need + 1)? < need + 1 {
            return Err(HarnessError::CqFull(self.n));
        }
        for _ in 0..pad {
            self.put32(node, &NOOP32)?;
        }
        self.put32(node, cmd)
    }

    /// Ring the doorbell (padding an odd half-slot with a NOOP first).
    pub fn ring(&mut self, node: &Node) -> Result<(), HarnessError> {
        if self.wp32 % 2 == 1 {
            self.put32(node, &NOOP32)?;
        }
        node.bar
            .write_u64(self.launch_offset(), self.wp32 / 2)
            .map_err(Into::into)
    }

    /// Emit and ring in one go.
    pub fn submit(&mut self, node: &Node, cmd: &[u8]) -> Result<(), HarnessError> {
        self.emit(node, cmd)?;
        self.ring(node)
    }

    /// Write pointer in 64 B slots (after the last `ring`).
    pub fn wr_ptr(&self) -> u64 {
        self.wp32.div_ceil(2)
    }

    /// Half-slot write pointer (where the next command goes).
    pub fn wp32(&self) -> u64 {
        self.wp32
    }

    /// Write a command through the 64 B low-latency window instead of ringing: the command
    /// (64 B, slot aligned) is also written to the ring, then copied into the `ll_64` window at
    /// `LL_OFFSET` with 8-byte stores.
    pub fn submit_ll64(&mut self, node: &Node, cmd: &[u8; 64]) -> Result<(), HarnessError> {
        if self.wp32 % 2 == 1 {
            self.put32(node, &NOOP32)?;
        }
        let wp32 = self.wp32;
        self.emit(node, cmd)?;
        let off = self.launch_offset()
            + firmware_spec::cassini::status::CQ_LAUNCH_LL_64 as u64
            + firmware_spec::cassini::status::ll_offset(wp32) as u64;
        for (i, q) in cmd.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(q);
            node.bar.write(off + 8 * i as u64, &b)?;
        }
        Ok(())
    }
}

/// The DFA and index_ext of PtlTE index `idx` of `pid` on `nid`.
pub fn dfa(nid: u32, pid: u32, idx: u32) -> (u32, u8) {
    build_dfa(nid, pid, PidBits::DEFAULT, idx)
}

/// A `c_cmd` header byte.
pub fn header(t: CmdType, size: CmdSize, op: DmaOp) -> u8 {
    CmdHeader::new(t, size, op as u8).to_byte()
}
