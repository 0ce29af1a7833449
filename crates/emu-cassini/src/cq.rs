//! Command queues: 1024 transmit and 512 target CQs whose rings live in host memory
//! (cassini.md §1.4, docs/cassini-programming.md "Command queues").
//!
//! One state per step: [`CqOps::cq_enable`] (queue (re)started: pointers at slot 4, status
//! written), [`CqOps::doorbell`] (new write pointer) or [`CqOps::ll_store`] (low-latency window),
//! [`CqOps::run_ring`] (fetch the commands between the read and write pointers by DMA, check
//! size and natural alignment, execute each — transmit commands in `ixe`, target commands in
//! `tgt` — and advance), [`CqOps::write_back`] (the `c_cq_status` block at the head of the ring),
//! and [`CqOps::fail_cq`] (a malformed or unsupported command: COMMAND_FAILURE event, status
//! fields, queue disabled; other queues and the device keep working).
//!
//! The block reaches the rest of the NIC only through [`CqCtx`] (implemented by `hw`): the
//! commands it fetches go to the initiator or the target through `exec_tx` / `exec_target`.

use emu_core::engine::DeviceIo;
use emu_core::sparse::SparseTable;
use firmware_spec::cassini::cmd::{CState, CmdHeader, CmdSize, CmdType};
use firmware_spec::cassini::csr;
use firmware_spec::cassini::event::CommandFailure;
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::status::{C_CQ_FIRST_WR_PTR, CqStatus};

use crate::atu::Atu;
use crate::block::{Counters, EventClass, Exec, Fail};
use crate::csr::CsrFile;
use crate::tables::Cp;

/// First command half-slot (slot 4).
const FIRST32: u64 = 2 * C_CQ_FIRST_WR_PTR;
/// Bytes fetched from a ring at a time.
const FETCH: usize = 4096;

/// Low-latency window assembly.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ll {
    buf_mask: u16,
    /// Window offset of the block being assembled and its length.
    start: u32,
    len: u32,
}

/// What every ring has.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ring {
    pub(crate) enabled: bool,
    /// Ring IOVA (in AC `acid`).
    pub(crate) base: u64,
    pub(crate) acid: u16,
    /// Slots of the ring (`mem_q_max_ptr + 1`).
    pub(crate) slots: u64,
    pub(crate) eq: u16,
    pub(crate) rgid: u8,
    pub(crate) policy: u8,
    /// Read pointer in 32 B half-slots.
    pub(crate) rd32: u64,
    /// Write pointer (64 B slots) from the last doorbell.
    pub(crate) wr: u64,
    pub(crate) status: CqStatus,
    since_wb: u64,
    ll: Ll,
    /// The last doorbell came from a low-latency window (see `run_ring`).
    soft_wr: bool,
}

/// A transmit CQ.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TxCq {
    pub(crate) ring: Ring,
    pub(crate) trig: bool,
    /// TLE pool of triggered commands (`mem_q_pfq`, low 2 bits).
    pub(crate) tle_pool: u8,
    pub(crate) lcid: u8,
    pub(crate) cstate: CState,
    /// Stopped at a CQ FENCE until `outstanding` drops to 0.
    pub(crate) fence: bool,
    /// Requests launched from this queue and not yet completed.
    pub(crate) outstanding: u32,
    /// Cached (generation, CP) of `lcid`.
    pub(crate) cp_cache: Option<(u64, Cp)>,
}

/// All command queues, plus the fetch buffer.
#[derive(Clone, Debug)]
pub(crate) struct Cqs {
    /// Transmit CQs, stored sparsely (an untouched queue is disabled at reset).
    pub(crate) tx: SparseTable<TxCq>,
    /// Target CQs, stored sparsely.
    pub(crate) tgt: SparseTable<Ring>,
    /// Transmit CQs stalled at a CT command (no free triggered-list entry).
    pub(crate) stalled: Vec<u32>,
    fetch: Vec<u8>,
}

/// What the CQ block needs from the rest of the NIC: its own queues, the counters, the ATU
/// (rings and status blocks live in host memory), the CQ policies, the event queues
/// (COMMAND_FAILURE) and the two executors of the commands it fetches. `hw` implements it.
pub(crate) trait CqCtx {
    /// The command queues.
    fn cqs(&mut self) -> &mut Cqs;
    /// The NIC-wide counters.
    fn counters(&mut self) -> &mut Counters;
    /// Address translation for ring fetches and status write-backs.
    fn atu(&mut self) -> &mut Atu;
    /// (write-back shift, write back on empty) of CQ policy `policy` (`c_cq_cfg_cq_policy`).
    fn cq_policy(&self, policy: u8) -> (u8, bool);
    /// Post an encoded event to EQ `eq`; false if it was dropped.
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool;
    /// Execute one transmit command of CQ `n` (the initiator, `ixe`).
    fn exec_tx(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        bytes: &[u8],
        cur32: u64,
        next: Option<u8>,
    ) -> Result<Exec, Fail>;
    /// Execute one target command of target CQ `n` (the target, `tgt`).
    fn exec_target(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail>;
}

impl<T: CqCtx + ?Sized> CqOps for T {}

impl Cqs {
    /// Queue descriptors backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.tx.allocated_entries() + self.tgt.allocated_entries()
    }

    pub(crate) fn new() -> Self {
        Cqs {
            tx: SparseTable::new(csr::C_CQ_TXQ_BASE_TABLE.entries as usize, TxCq::default()),
            tgt: SparseTable::new(csr::C_CQ_TGQ_TABLE.entries as usize, Ring::default()),
            stalled: Vec::new(),
            // Allocated by the first ring fetch.
            fetch: Vec::new(),
        }
    }

    fn ring(&self, tgt: bool, n: u32) -> Option<&Ring> {
        if tgt {
            self.tgt.get(n as usize).ok()
        } else {
            self.tx.get(n as usize).ok().map(|q| &q.ring)
        }
    }

    pub(crate) fn ring_mut(&mut self, tgt: bool, n: u32) -> Option<&mut Ring> {
        if tgt {
            self.tgt.get_mut(n as usize).ok()
        } else {
            self.tx.get_mut(n as usize).ok().map(|q| &mut q.ring)
        }
    }

    /// (enabled, fenced) of transmit CQ `n`.
    pub(crate) fn tx_state(&self, n: u32) -> (bool, bool) {
        self.tx
            .get(n as usize)
            .map_or((false, false), |q| (q.ring.enabled, q.fence))
    }

    /// Whether target CQ `n` is enabled.
    pub(crate) fn tgt_enabled(&self, n: u32) -> bool {
        self.tgt.get(n as usize).is_ok_and(|r| r.enabled)
    }

    /// (read pointer, write pointer) in 64 B slots.
    pub(crate) fn pointers(&self, tgt: bool, n: u32) -> (u64, u64) {
        self.ring(tgt, n)
            .map_or((C_CQ_FIRST_WR_PTR, C_CQ_FIRST_WR_PTR), |r| {
                if r.slots == 0 {
                    (C_CQ_FIRST_WR_PTR, C_CQ_FIRST_WR_PTR)
                } else {
                    (r.rd32 / 2, r.wr)
                }
            })
    }

    /// The base/TC table of a queue was written: refresh its decoded configuration.
    pub(crate) fn config_written(&mut self, csrs: &CsrFile, tgt: bool, n: u32) {
        let (en, _) = if tgt {
            (self.tgt_enabled(n), false)
        } else {
            self.tx_state(n)
        };
        if en {
            self.load_config(csrs, tgt, n);
        }
    }

    fn load_config(&mut self, csrs: &CsrFile, tgt: bool, n: u32) {
        use csr::fields as f;
        let (c, base, max, eq, rgid, acid, policy) = if tgt {
            (
                csr::C_CQ_TGQ_TABLE,
                f::c_cq_tgq_table::MEM_Q_BASE,
                f::c_cq_tgq_table::MEM_Q_MAX_PTR,
                f::c_cq_tgq_table::MEM_Q_EQ,
                f::c_cq_tgq_table::MEM_Q_RGID,
                f::c_cq_tgq_table::MEM_Q_ACID,
                f::c_cq_tgq_table::MEM_Q_POLICY,
            )
        } else {
            (
                csr::C_CQ_TXQ_BASE_TABLE,
                f::c_cq_txq_base_table::MEM_Q_BASE,
                f::c_cq_txq_base_table::MEM_Q_MAX_PTR,
                f::c_cq_txq_base_table::MEM_Q_EQ,
                f::c_cq_txq_base_table::MEM_Q_RGID,
                f::c_cq_txq_base_table::MEM_Q_ACID,
                f::c_cq_txq_base_table::MEM_Q_POLICY,
            )
        };
        let g = |fld| csrs.field(c, n, fld);
        let (b, m, e, r, a, p) = (
            g(base) << 12,
            g(max),
            g(eq) as u16,
            g(rgid) as u8,
            g(acid) as u16,
            g(policy) as u8,
        );
        if let Some(ring) = self.ring_mut(tgt, n) {
            ring.base = b;
            ring.slots = m + 1;
            ring.eq = e;
            ring.rgid = r;
            ring.acid = a;
            ring.policy = p;
        }
        if !tgt && let Ok(q) = self.tx.get_mut(n as usize) {
            q.trig = csrs.field(csr::C_CQ_TXQ_TC_TABLE, n, f::c_cq_txq_tc_table::MEM_Q_TRIG) != 0;
            q.tle_pool = (csrs.field(
                csr::C_CQ_TXQ_BASE_TABLE,
                n,
                f::c_cq_txq_base_table::MEM_Q_PFQ,
            ) & 3) as u8;
            q.cp_cache = None;
        }
    }
}

/// Half-slot index after `cur32` advanced by `n32`, wrapping at the ring end to slot 4.
fn advance32(cur32: u64, n32: u64, slots: u64) -> u64 {
    let next = cur32 + n32;
    if next >= 2 * slots { FIRST32 } else { next }
}

/// The CQ block's behaviour, on anything that provides a [`CqCtx`].
pub(crate) trait CqOps: CqCtx {
    /// `txq_enable` / `tgq_enable` of queue `n` was written.
    fn cq_enable(&mut self, csrs: &CsrFile, io: &mut DeviceIo<'_>, tgt: bool, n: u32, en: bool) {
        let was = if tgt {
            self.cqs().tgt_enabled(n)
        } else {
            self.cqs().tx_state(n).0
        };
        if !en {
            if let Some(r) = self.cqs().ring_mut(tgt, n) {
                r.enabled = false;
            }
            return;
        }
        if was {
            return;
        }
        self.cqs().load_config(csrs, tgt, n);
        if !tgt {
            let lcid = csrs.field(
                csr::C_CQ_TXQ_BASE_TABLE,
                n,
                csr::fields::c_cq_txq_base_table::MEM_Q_LCID,
            ) as u8;
            if let Ok(q) = self.cqs().tx.get_mut(n as usize) {
                q.lcid = lcid;
                q.cstate = CState::default();
                q.fence = false;
                q.cp_cache = None;
            }
        }
        let Some(r) = self.cqs().ring_mut(tgt, n) else {
            return;
        };
        r.enabled = r.slots > C_CQ_FIRST_WR_PTR;
        r.rd32 = FIRST32;
        r.wr = C_CQ_FIRST_WR_PTR;
        r.since_wb = 0;
        r.ll = Ll::default();
        r.soft_wr = false;
        r.status = CqStatus {
            rd_ptr: C_CQ_FIRST_WR_PTR as u16,
            return_code: ReturnCode::Ok,
            ..CqStatus::default()
        };
        if r.enabled {
            self.write_back(io, tgt, n);
        }
    }

    /// A new write pointer for queue `n`.
    fn doorbell(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32, wr: u64) {
        let Some(r) = self.cqs().ring_mut(tgt, n) else {
            return;
        };
        if !r.enabled {
            return;
        }
        if wr < C_CQ_FIRST_WR_PTR || wr >= r.slots {
            let cur = r.rd32;
            self.counters().wr_ptr_updt_err_cntr += 1;
            self.fail_cq(io, tgt, n, ReturnCode::CmdInvalidArg, 0, cur, false);
            return;
        }
        r.wr = wr;
        r.soft_wr = false;
        self.run_ring(io, tgt, n);
    }

    /// An 8-byte store into a low-latency window of queue `n`'s launch page.
    fn ll_store(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32, off: u32, _v: u64) {
        self.counters().num_ll_ops_received += u64::from(off & 0x3F == 0);
        let Some(r) = self.cqs().ring_mut(tgt, n) else {
            return;
        };
        if !r.enabled {
            return;
        }
        let (window, len) = match off {
            0x400..0x800 => (0x400u32, 64u32),
            0x800..0xC00 => (0x800, 128),
            _ => (0xC00, 128),
        };
        let wo = off - window;
        let ll = &mut r.ll;
        let fresh = ll.buf_mask == 0 || ll.len != len || wo < ll.start || wo >= ll.start + len;
        if fresh {
            *ll = Ll {
                buf_mask: 0,
                start: wo & !63,
                len,
            };
        }
        let idx = (wo - ll.start) / 8;
        ll.buf_mask |= 1 << idx;
        let full: u16 = if len == 64 { 0xFF } else { 0xFFFF };
        if ll.buf_mask != full {
            return;
        }
        let block = u64::from(ll.start / 64);
        let blocks = u64::from(len / 64);
        *ll = Ll::default();
        // The block starts at the first slot at or after the write pointer whose low 4 bits
        // are `block` (LL_OFFSET, cxi_prov_hw.h).
        let mut s = r.wr;
        for _ in 0..16 {
            if s & 0xF == block {
                break;
            }
            s += 1;
            if s >= r.slots {
                s = C_CQ_FIRST_WR_PTR;
            }
        }
        let mut end = s;
        for _ in 0..blocks {
            end += 1;
            if end >= r.slots {
                end = C_CQ_FIRST_WR_PTR;
            }
        }
        r.wr = end;
        r.soft_wr = true;
        self.counters().num_ll_ops_successful += 1;
        self.run_ring(io, tgt, n);
    }

    /// Execute every command between the read and write pointers of queue `n`.
    fn run_ring(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32) {
        let mut buf = std::mem::take(&mut self.cqs().fetch);
        if buf.len() < FETCH {
            buf.resize(FETCH, 0);
        }
        self.run_ring_with(io, tgt, n, &mut buf);
        self.cqs().fetch = buf;
    }

    fn run_ring_with(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32, buf: &mut [u8]) {
        let mut progressed = false;
        'fetch: loop {
            let Some(r) = self.cqs().ring(tgt, n).copied() else {
                return;
            };
            if !r.enabled || (!tgt && self.cqs().tx.get(n as usize).is_ok_and(|q| q.fence)) {
                break;
            }
            let wr32 = 2 * r.wr;
            if r.rd32 == wr32 {
                break;
            }
            let end32 = if wr32 > r.rd32 { wr32 } else { 2 * r.slots };
            let avail = ((end32 - r.rd32) * 32) as usize;
            let len = avail.min(buf.len());
            let addr = r.base + r.rd32 * 32;
            if let Err(rc) = self.atu().read(io.dma(), r.acid, addr, &mut buf[..len]) {
                self.fail_cq(io, tgt, n, rc, 0, r.rd32, false);
                return;
            }
            if tgt {
                self.counters().num_tgq_cmd_reads += 1;
            } else {
                self.counters().num_txq_cmd_reads += 1;
            }
            let mut pos = 0usize;
            let mut cur32 = r.rd32;
            while pos < len {
                let h = CmdHeader::from_byte(buf[pos]);
                // A 32 B IDC NOOP is padding in any queue; target commands are 64 B.
                let size = if tgt { CmdSize::B64 } else { h.cmd_size };
                let n32 = size.slots32() as u64;
                let bytes = size.bytes();
                if cur32 % n32 != 0 {
                    self.fail_cq(
                        io,
                        tgt,
                        n,
                        ReturnCode::CmdAlignError,
                        buf[pos],
                        cur32,
                        false,
                    );
                    return;
                }
                if pos + bytes > len {
                    if len < avail {
                        // More of the ring is available: fetch again from this command.
                        self.set_rd(tgt, n, cur32);
                        continue 'fetch;
                    }
                    if r.soft_wr && self.extend_soft_wr(tgt, n, cur32 + n32) {
                        self.set_rd(tgt, n, cur32);
                        continue 'fetch;
                    }
                    self.fail_cq(
                        io,
                        tgt,
                        n,
                        ReturnCode::CmdAlignError,
                        buf[pos],
                        cur32,
                        false,
                    );
                    return;
                }
                let mut cmd = [0u8; 256];
                cmd[..bytes].copy_from_slice(&buf[pos..pos + bytes]);
                let next = buf.get(pos + bytes).copied().filter(|_| pos + bytes < len);
                let res = if tgt {
                    self.exec_target(io, n, &cmd[..bytes])
                } else {
                    self.exec_tx(io, n, &cmd[..bytes], cur32, next)
                };
                let exec = match res {
                    Ok(Exec::Stall) => break 'fetch,
                    Ok(e) => e,
                    Err(rc) => {
                        self.fail_cq(io, tgt, n, rc, buf[pos], cur32, false);
                        return;
                    }
                };
                if tgt {
                    self.counters().success_tgt_cntr += 1;
                } else {
                    self.counters().success_tx_cntr += 1;
                }
                pos += bytes;
                cur32 = advance32(cur32, n32, r.slots);
                progressed = true;
                let shift = self.cq_policy(r.policy).0;
                if let Some(ring) = self.cqs().ring_mut(tgt, n) {
                    ring.rd32 = cur32;
                    ring.since_wb += n32;
                    if ring.since_wb >= 2u64 << shift {
                        self.write_back(io, tgt, n);
                    }
                }
                if exec == Exec::Fence {
                    if let Ok(q) = self.cqs().tx.get_mut(n as usize) {
                        q.fence = q.outstanding > 0;
                    }
                    break 'fetch;
                }
                if !self.cqs().ring(tgt, n).is_some_and(|x| x.enabled) {
                    return;
                }
            }
        }
        if progressed {
            self.write_back(io, tgt, n);
        }
    }

    fn set_rd(&mut self, tgt: bool, n: u32, rd32: u64) {
        if let Some(r) = self.cqs().ring_mut(tgt, n) {
            r.rd32 = rd32;
        }
    }

    /// A low-latency doorbell stopped inside a command: move the write pointer to its end.
    fn extend_soft_wr(&mut self, tgt: bool, n: u32, end32: u64) -> bool {
        let Some(r) = self.cqs().ring_mut(tgt, n) else {
            return false;
        };
        let end = end32.div_ceil(2);
        if end > r.slots || end <= r.wr {
            return false;
        }
        r.wr = if end == r.slots {
            C_CQ_FIRST_WR_PTR
        } else {
            end
        };
        r.soft_wr = false;
        true
    }

    /// Write `c_cq_status` (8 B at the head of the ring).
    fn write_back(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32) {
        let Some(r) = self.cqs().ring_mut(tgt, n) else {
            return;
        };
        r.status.rd_ptr = (r.rd32 / 2) as u16;
        r.since_wb = 0;
        let (acid, base, st) = (r.acid, r.base, r.status.encode());
        // A status block that cannot be written (ring unmapped) has nowhere to report to.
        let _ = self.atu().write(io.dma(), acid, base, &st);
    }

    /// Fail queue `n` at half-slot `cur32` with `rc`: status fields, disable, and a
    /// COMMAND_FAILURE event on the queue's EQ.
    #[allow(clippy::too_many_arguments)]
    fn fail_cq(
        &mut self,
        io: &mut DeviceIo<'_>,
        tgt: bool,
        n: u32,
        rc: ReturnCode,
        header: u8,
        cur32: u64,
        ll: bool,
    ) {
        let Some(r) = self.cqs().ring_mut(tgt, n) else {
            return;
        };
        r.enabled = false;
        r.rd32 = cur32;
        r.status.fail_command = CmdHeader::from_byte(header);
        r.status.return_code = rc;
        r.status.fail_loc_32 = cur32 % 2 == 1;
        r.status.fail_ll = ll;
        let eq = r.eq;
        if tgt {
            self.counters().fail_tgt_cntr += 1;
            if rc == ReturnCode::PermViolation {
                self.counters().num_tgt_cmd_perm_errors += 1;
            } else {
                self.counters().num_tgt_cmd_arg_errors += 1;
            }
        } else {
            self.counters().fail_tx_cntr += 1;
            match rc {
                ReturnCode::CmdAlignError => self.counters().num_tx_cmd_align_errors += 1,
                ReturnCode::IllegalOp => self.counters().num_tx_cmd_op_errors += 1,
                ReturnCode::PermViolation => self.counters().num_tx_cmd_perm_errors += 1,
                _ => self.counters().num_tx_cmd_arg_errors += 1,
            }
        }
        self.write_back(io, tgt, n);
        if eq != 0 {
            let ev = CommandFailure {
                cq_id: (n & 0x3FF) as u16,
                is_target: tgt,
                fail_loc: (cur32 / 2) as u16,
                fail_command: CmdHeader::from_byte(header),
                return_code: rc,
            };
            self.post_event(io, eq, &ev.encode(), EventClass::Other);
        }
    }
}

/// Whether `b` (the first byte of the next 64 B slot) is a NOOP a CQ LCID command may be
/// followed by: a CQ NOOP, or an IDC NOOP (padding).
pub(crate) fn is_noop_header(b: u8) -> bool {
    let h = CmdHeader::from_byte(b);
    (h.cmd_type == CmdType::Cq && h.opcode == 0 && h.cmd_size == CmdSize::B64)
        || (h.cmd_type == CmdType::Idc && h.opcode == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_pointer_wraps_to_slot_four() {
        // 64-slot ring: half-slots 8..128.
        assert_eq!(advance32(8, 2, 64), 10);
        assert_eq!(advance32(126, 2, 64), FIRST32);
        assert_eq!(advance32(120, 8, 64), FIRST32);
    }

    #[test]
    fn lcid_may_be_followed_by_a_cq_or_idc_noop_only() {
        let cq_noop = CmdHeader::new(CmdType::Cq, CmdSize::B64, 0).to_byte();
        let fence = CmdHeader::new(CmdType::Cq, CmdSize::B64, 1).to_byte();
        let dma_put = CmdHeader::new(CmdType::Dma, CmdSize::B64, 1).to_byte();
        assert!(is_noop_header(cq_noop));
        assert!(is_noop_header(0), "32 B IDC NOOP padding");
        assert!(!is_noop_header(fence));
        assert!(!is_noop_header(dma_put));
    }

    #[test]
    fn queues_start_disabled_at_slot_four() {
        let q = Cqs::new();
        assert_eq!(q.tx.len(), 1024);
        assert_eq!(q.tgt.len(), 512);
        assert_eq!(q.tx_state(3), (false, false));
        assert_eq!(q.pointers(false, 3), (4, 4));
        assert_eq!(q.pointers(true, 5000), (4, 4));
    }
}
