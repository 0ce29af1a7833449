//! Event engine: event queues in host memory (`c_ee_cfg_eq_descriptor`), events written with
//! the valid-word rule, the 64 B status block, the software read pointer
//! (`c_ee_cfg_eq_sw_state` through the EE page), drops that never overwrite unread events,
//! and interrupts.
//!
//! Ring layout (cassini.md §3.1): bytes 0..63 are the status block, events start at byte 64 and
//! wrap back there. An event is 16, 32 or 64 B; it never straddles a 64 B boundary (the rest
//! of the block is padded with 16 B NULL events). Its last qword, which holds the return code
//! that software polls, is stored last with release ordering. One 64 B slot always stays free,
//! so the write offset never catches up with software's read offset.

use emu_core::engine::DeviceIo;
use emu_core::pci_shell::PciShell;
use emu_core::sparse::SparseTable;
use emu_core::time::SimTime;
use firmware_spec::cassini::csr;
use firmware_spec::cassini::event::{EventHeader, EventSize, EventType};
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::status::{EqStatus, EqSwState};

use crate::atu::Atu;
use crate::block::EventClass;
use crate::csr::CsrFile;

/// Bytes of the status block / event-combining buffer (`C_EE_CFG_ECB_SIZE`).
const ECB: u64 = 64;

/// One event queue.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Eq {
    pub(crate) enabled: bool,
    /// IOVA of the ring (in AC `acid`).
    base: u64,
    /// Bytes of the ring, including the status block.
    size: u64,
    acid: u16,
    reserved_fc: u64,
    int_en: bool,
    int_idx: u16,
    dropped_en: bool,
    pub(crate) init_long: bool,
    pub(crate) tgt_long: bool,
    /// Next write offset (64..size).
    wr: u64,
    /// Software's read offset (64..size).
    rd: u64,
    sw: u64,
    unackd_dropped: bool,
    drop_seq: bool,
    /// Events dropped (full ring) since the queue started.
    pub(crate) dropped: u64,
    /// Events written since the queue started.
    pub(crate) written: u64,
}

impl Eq {
    /// Bytes of the event region.
    fn region(&self) -> u64 {
        self.size - ECB
    }

    /// Bytes software has not consumed yet.
    fn used(&self) -> u64 {
        let r = self.region();
        (self.wr + r - self.rd) % r
    }

    /// Bytes the device may still write (one 64 B slot stays free).
    fn free(&self) -> u64 {
        self.region()
            .saturating_sub(self.used())
            .saturating_sub(ECB)
    }

    /// NULL padding needed before an event of `n` bytes at the write offset.
    fn pad(&self, n: u64) -> u64 {
        let inb = self.wr % ECB;
        if inb + n > ECB { ECB - inb } else { 0 }
    }
}

/// EE counters (`c_ee_cntrs` names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EeCounters {
    pub(crate) events_enqueued_cntr: u64,
    pub(crate) events_dropped_rsrvn_cntr: u64,
    pub(crate) events_dropped_ordinary_cntr: u64,
    pub(crate) eq_status_update_cntr: u64,
    pub(crate) eq_sw_state_wr_cntr: u64,
}

/// The event engine.
#[derive(Clone, Debug)]
pub(crate) struct Ee {
    /// Queue descriptors, stored sparsely (an untouched EQ is disabled).
    eqs: SparseTable<Eq>,
    pub(crate) counters: EeCounters,
}

/// A NULL event (16 B, rc OK): padding.
fn null_event() -> [u8; 16] {
    let h = EventHeader {
        size: EventSize::B16,
        event_type: EventType::NullEvent,
        return_code: ReturnCode::Ok,
    };
    let mut b = [0u8; 16];
    b.copy_from_slice(&h.encode());
    b
}

impl Ee {
    pub(crate) fn new() -> Self {
        Ee {
            eqs: SparseTable::new(csr::C_EE_CFG_EQ_DESCRIPTOR.entries as usize, Eq::default()),
            counters: EeCounters::default(),
        }
    }

    /// The queue `n`, if it exists.
    pub(crate) fn eq(&self, n: u16) -> Option<&Eq> {
        self.eqs.get(usize::from(n)).ok()
    }

    /// EQ descriptors backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.eqs.allocated_entries()
    }

    /// `c_ee_cfg_eq_descriptor[n]` was written.
    pub(crate) fn descriptor_written(&mut self, csrs: &CsrFile, n: u32) {
        use csr::fields::c_ee_cfg_eq_descriptor as f;
        let c = csr::C_EE_CFG_EQ_DESCRIPTOR;
        let Ok(eq) = self.eqs.get_mut(n as usize) else {
            return;
        };
        let g = |fld| csrs.field(c, n, fld);
        let enable = g(f::EQ_ENABLE) != 0 && g(f::BUFFER_A_EN) != 0 && n != 0;
        // buffer_a_addr sits at bits 204..249 of the entry and holds address bits 12..57.
        let base = g(f::BUFFER_A_ADDR) << 12;
        let size = g(f::BUFFER_A_SIZE) << 12;
        let acid = g(f::ACID) as u16;
        let enable = enable && size > ECB * 2;
        let restart =
            enable && (!eq.enabled || eq.base != base || eq.size != size || eq.acid != acid);
        eq.enabled = enable;
        eq.base = base;
        eq.size = size;
        eq.acid = acid;
        eq.reserved_fc = g(f::RESERVED_FC);
        eq.int_en = g(f::EVENT_INT_EN) != 0;
        eq.int_idx = g(f::EVENT_INT_IDX) as u16;
        eq.dropped_en = g(f::EQ_STS_DROPPED_EN) != 0;
        if restart {
            eq.wr = ECB;
            eq.rd = ECB;
            eq.unackd_dropped = false;
            eq.drop_seq = false;
            eq.dropped = 0;
            eq.written = 0;
            let sw = EqSwState::from_u64(eq.sw);
            Self::apply_rd(eq, sw.rd_ptr);
        }
    }

    /// `c_ee_cfg_long_evnt_ovr_table[entry]` was written.
    pub(crate) fn long_ovr_written(&mut self, csrs: &CsrFile, entry: u32) {
        let qw = csrs.entry_qword(csr::C_EE_CFG_LONG_EVNT_OVR_TABLE, entry, 0);
        for k in 0..32u32 {
            let n = (entry * 32 + k) as usize;
            if let Ok(eq) = self.eqs.get_mut(n) {
                let v = (qw >> (2 * k)) & 3;
                eq.init_long = v & 1 != 0;
                eq.tgt_long = v & 2 != 0;
            }
        }
    }

    fn apply_rd(eq: &mut Eq, rd_ptr: u32) {
        let rd = u64::from(rd_ptr) * ECB;
        eq.rd = if rd < ECB || eq.size == 0 || rd >= eq.size {
            ECB
        } else {
            rd
        };
    }

    /// The current software-state word of queue `n` (what `c_ee_cfg_eq_sw_state[n]` and the
    /// EE page read back).
    pub(crate) fn sw_state(&self, n: u32) -> u64 {
        self.eqs.get(n as usize).map_or(0, |e| e.sw)
    }

    /// Software stored `qw` to the EE page (or `c_ee_cfg_eq_sw_state[n]`).
    pub(crate) fn sw_state_written(
        &mut self,
        atu: &mut Atu,
        io: &mut DeviceIo<'_>,
        n: u32,
        qw: u64,
    ) {
        self.counters.eq_sw_state_wr_cntr += 1;
        let Ok(eq) = self.eqs.get_mut(n as usize) else {
            return;
        };
        eq.sw = qw;
        let sw = EqSwState::from_u64(qw);
        if eq.enabled {
            Self::apply_rd(eq, sw.rd_ptr);
        }
        if eq.unackd_dropped && sw.event_drop_seq_no == eq.drop_seq {
            eq.unackd_dropped = false;
            eq.drop_seq = !eq.drop_seq;
            if eq.enabled && eq.dropped_en {
                let e = *eq;
                self.write_status(atu, io, &e);
            }
        }
    }

    /// Whether queue `n` can take an event of `bytes` of class `class` now.
    pub(crate) fn has_room(&self, n: u16, bytes: usize, class: EventClass) -> bool {
        let Ok(eq) = self.eqs.get(usize::from(n)) else {
            return false;
        };
        if !eq.enabled {
            return false;
        }
        let need = eq.pad(bytes as u64) + bytes as u64;
        let reserve = match class {
            EventClass::Receive => eq.reserved_fc * ECB,
            EventClass::Other => 0,
        };
        need + reserve <= eq.free()
    }

    fn write_status(&mut self, atu: &mut Atu, io: &mut DeviceIo<'_>, eq: &Eq) {
        let now: SimTime = io.now();
        let ns = now.as_ns();
        let (sec, nsec) = (ns / 1_000_000_000, (ns % 1_000_000_000) as u32);
        let st = EqStatus {
            timestamp_ns_cpy: nsec,
            timestamp_sec_cpy: sec,
            thld_sts: false,
            thld_id: 0,
            unackd_dropped_event: eq.unackd_dropped,
            event_drop_seq_no: eq.drop_seq,
            event_slots_free: (eq.free() / ECB) as u32,
            event_slots_rsrvd: eq.reserved_fc as u32,
            wr_ptr: (eq.wr / ECB) as u32,
            using_buffer_b: false,
            timestamp_ns: nsec,
            timestamp_sec: sec,
        };
        self.counters.eq_status_update_cntr += 1;
        // A status write that fails (buffer unmapped) has nowhere to report to.
        let _ = atu.write(io.dma(), eq.acid, eq.base, &st.encode());
    }

    /// Post `event` (16, 32 or 64 bytes, fully encoded) to queue `n`. Returns false if the
    /// event was dropped (queue disabled, full, or its buffer not writable).
    pub(crate) fn post(
        &mut self,
        atu: &mut Atu,
        pi: &mut PciShell,
        io: &mut DeviceIo<'_>,
        n: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool {
        // An untouched EQ is disabled: nothing to post to, nothing to allocate.
        let Ok(Some(eq)) = self.eqs.get_mut_if_touched(usize::from(n)) else {
            return false;
        };
        if !eq.enabled || n == 0 {
            return false;
        }
        let len = event.len() as u64;
        let pad = eq.pad(len);
        let reserve = match class {
            EventClass::Receive => eq.reserved_fc * ECB,
            EventClass::Other => 0,
        };
        if pad + len + reserve > eq.free() {
            eq.dropped += 1;
            match class {
                EventClass::Receive => self.counters.events_dropped_rsrvn_cntr += 1,
                EventClass::Other => self.counters.events_dropped_ordinary_cntr += 1,
            }
            if !eq.unackd_dropped {
                eq.unackd_dropped = true;
                if eq.dropped_en {
                    let e = *eq;
                    self.write_status(atu, io, &e);
                }
            }
            return false;
        }
        let dma = io.dma();
        let mut off = eq.wr;
        let null = null_event();
        for _ in 0..pad / 16 {
            if atu
                .write_release_last(dma, eq.acid, eq.base + off, &null)
                .is_err()
            {
                return false;
            }
            off += 16;
        }
        if off >= eq.size {
            off = ECB;
        }
        if atu
            .write_release_last(dma, eq.acid, eq.base + off, event)
            .is_err()
        {
            return false;
        }
        off += len;
        if off >= eq.size {
            off = ECB;
        }
        eq.wr = off;
        eq.written += 1;
        self.counters.events_enqueued_cntr += 1;
        let sw = EqSwState::from_u64(eq.sw);
        if eq.int_en && !sw.event_int_disable {
            pi.raise(io, eq.int_idx);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(size: u64, wr: u64, rd: u64) -> Eq {
        Eq {
            enabled: true,
            size,
            wr,
            rd,
            ..Eq::default()
        }
    }

    #[test]
    fn free_space_keeps_one_slot_and_wraps() {
        // 4 KiB ring: 63 event slots of 64 B; one stays free.
        let e = eq(4096, 64, 64);
        assert_eq!(e.free(), 4096 - 64 - 64);
        let e = eq(4096, 4096 - 64, 64);
        assert_eq!(e.free(), 0, "writer one slot behind the reader");
        let e = eq(4096, 128, 192);
        assert_eq!(e.free(), 0);
        let e = eq(4096, 192, 128);
        assert_eq!(e.free(), 4096 - 64 - 64 - 64);
    }

    #[test]
    fn events_never_straddle_a_64_byte_block() {
        let e = eq(4096, 64 + 48, 64);
        assert_eq!(e.pad(16), 0);
        assert_eq!(e.pad(32), 16);
        assert_eq!(e.pad(64), 16);
        let e = eq(4096, 64 + 32, 64);
        assert_eq!(e.pad(32), 0);
        assert_eq!(e.pad(64), 32);
    }

    #[test]
    fn null_events_are_valid_padding() {
        let b = null_event();
        let h = firmware_spec::cassini::event::peek_event(&b)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.size, h.event_type, h.return_code),
            (EventSize::B16, EventType::NullEvent, ReturnCode::Ok)
        );
    }

    #[test]
    fn room_respects_the_receive_reserve() {
        let mut ee = Ee::new();
        *ee.eqs.get_mut(3).unwrap() = Eq {
            reserved_fc: 60,
            ..eq(4096, 64, 64)
        };
        // 62 free slots, 60 reserved: two 64 B receive events fit, the third does not.
        assert!(ee.has_room(3, 64, EventClass::Receive));
        ee.eqs.get_mut(3).unwrap().wr = 64 + 128;
        assert!(!ee.has_room(3, 64, EventClass::Receive));
        assert!(ee.has_room(3, 64, EventClass::Other));
        assert!(
            !ee.has_room(0, 16, EventClass::Other),
            "EQ 0 is never enabled"
        );
    }
}
