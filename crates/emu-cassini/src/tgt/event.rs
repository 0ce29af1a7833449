//! Target events and counting events: the LPE's events encoded short (32 B) or long (64 B)
//! and posted to the PtlTE's event queue (EE), the CT update of a delivery (TOU).

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp};
use firmware_spec::cassini::event::{EventType, StateChangeFields, TargetLong, TargetShort};
use firmware_spec::cassini::le::{PtAllocOpts, PtlList, ScReason};
use firmware_spec::cassini::rc::ReturnCode;

use crate::block::EventClass;
use crate::lpe::{CtUpdate, TargetEvent};

use super::ctx::TgtCtx;

/// Encode a target event (short 32 B or long 64 B) into `out`; returns its length.
/// `rc` overrides the LPE's return code (a data-movement error).
fn encode_target(
    ev: &TargetEvent,
    long: bool,
    rc: Option<ReturnCode>,
    now_ns: u64,
    out: &mut [u8; 64],
) -> usize {
    let return_code = rc.unwrap_or(ev.return_code);
    let initiator = match ev.state_change {
        Some(sc) => StateChangeFields {
            ptlte_state: sc.ptlte_state,
            sc_reason: sc.sc_reason.unwrap_or(ScReason::FcEqFull),
            sc_nic_auto: sc.sc_nic_auto,
        }
        .to_initiator(),
        None => ev.initiator,
    };
    if long {
        let e = TargetLong {
            header_data: ev.header_data,
            initiator,
            ptlte_index: ev.ptlte_index,
            event_type: ev.event_type,
            ptl_list: ev.ptl_list,
            rendezvous: ev.rendezvous,
            get_issued: ev.get_issued,
            auto_unlinked: ev.auto_unlinked,
            match_bits: ev.match_bits,
            buffer_id: ev.buffer_id,
            vni: ev.vni,
            timestamp_ns: (now_ns % 1_000_000_000) as u32,
            timestamp_sec_low: ((now_ns / 1_000_000_000) & 3) as u8,
            mlength: ev.mlength.min(u64::from(u32::MAX)) as u32,
            rlength: ev.rlength.min(u64::from(u32::MAX)) as u32,
            remote_offset: ev.remote_offset,
            start: ev.start,
            lpe_stat_1: 0,
            lpe_stat_2: 0,
            atomic_type: AmoType::try_from(ev.atomic.ty).unwrap_or_default(),
            atomic_op: AmoOp::try_from(ev.atomic.op).unwrap_or_default(),
            cswap_op: CswapOp::try_from(ev.atomic.cswap_op).unwrap_or_default(),
            rendezvous_id: ev.rendezvous_id,
            return_code,
        };
        out.copy_from_slice(&e.encode());
        64
    } else {
        let e = TargetShort {
            header_data: ev.header_data,
            initiator,
            ptlte_index: ev.ptlte_index,
            event_type: ev.event_type,
            ptl_list: ev.ptl_list,
            auto_unlinked: ev.auto_unlinked,
            match_bits: ev.match_bits,
            buffer_id: ev.buffer_id,
            vni: ev.vni,
            length: ev.mlength.min(0xF_FFFF) as u32,
            return_code,
        };
        out[..32].copy_from_slice(&e.encode());
        32
    }
}

/// Whether a target event has a short (32 B) form: a Put, Get or atomic that matched an
/// entry of the priority list, outside a rendezvous. Every other target event (LINK, UNLINK,
/// SEARCH, STATE_CHANGE, the *_OVERFLOW events, a message that landed in an overflow
/// buffer, a rendezvous Put, RENDEZVOUS, MATCH) carries fields only the long format has
/// (`start`, `mlength`, `rlength`, the state-change word) and is written long whatever the
/// PtlTE and EQ ask. Facts from HPE's libcxi tests, which expect exactly these sizes on
/// platforms without `use_long_event` or `CXI_EQ_TGT_LONG` (`tests/libcxi_test_common.c`
/// `process_eqe`, `msg.c`, `rendezvous.c`).
fn fits_short(ev: &TargetEvent) -> bool {
    matches!(
        ev.event_type,
        EventType::Put | EventType::Get | EventType::Atomic | EventType::FetchAtomic
    ) && ev.ptl_list == PtlList::Priority
        && !ev.rendezvous
}

/// Communication events (the ones that report a data movement).
fn is_comm(t: EventType) -> bool {
    matches!(
        t,
        EventType::Put
            | EventType::Get
            | EventType::Atomic
            | EventType::FetchAtomic
            | EventType::Rendezvous
    )
}

/// Posting what the target reports, on anything that provides a [`TgtCtx`].
pub(crate) trait TgtEvents: TgtCtx {
    /// (EQ, long format) of PtlTE `pt`'s target events.
    fn event_format(&mut self, pt: u16) -> (u16, bool) {
        let cfg = self.lpe().ptlte_config(pt).unwrap_or_default();
        let long = cfg.options.contains(PtAllocOpts::USE_LONG_EVENT) || self.target_long(cfg.eq);
        (cfg.eq, long)
    }

    /// Post the LPE's target events in order; `data_rc` replaces the return code of the
    /// communication event when the data could not be moved.
    fn post_target_events(
        &mut self,
        io: &mut DeviceIo<'_>,
        events: &[TargetEvent],
        data_rc: Option<ReturnCode>,
    ) {
        let now = io.now().as_ns();
        for ev in events {
            let long = ev.long_format || self.target_long(ev.eq) || !fits_short(ev);
            let comm = is_comm(ev.event_type);
            let rc = if comm { data_rc } else { None };
            let mut buf = [0u8; 64];
            let n = encode_target(ev, long, rc, now, &mut buf);
            let class = if comm {
                EventClass::Receive
            } else {
                EventClass::Other
            };
            self.post_event(io, ev.eq, &buf[..n], class);
        }
    }

    fn apply_ct(&mut self, io: &mut DeviceIo<'_>, ct: Option<CtUpdate>, failed: bool) {
        if let Some(u) = ct {
            if failed {
                self.ct_event(io, u.ct, 0, 1);
            } else {
                self.ct_event(io, u.ct, u.success_increment, 0);
            }
        }
    }
}

impl<T: TgtCtx + ?Sized> TgtEvents for T {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpe::AtomicInfo;
    use firmware_spec::cassini::le::PtlList;

    #[test]
    fn short_and_long_target_events_carry_the_lpe_fields() {
        let ev = TargetEvent {
            event_type: EventType::Put,
            return_code: ReturnCode::Ok,
            eq: 3,
            ptlte_index: 9,
            long_format: false,
            header_data: 0x55,
            initiator: 0x1234,
            state_change: None,
            ptl_list: PtlList::Overflow,
            rendezvous: false,
            get_issued: false,
            auto_unlinked: true,
            match_bits: 0xABCD,
            buffer_id: 77,
            vni: 10,
            mlength: 100,
            rlength: 200,
            remote_offset: 8,
            start: 0x1000,
            atomic: AtomicInfo::default(),
            rendezvous_id: 0,
        };
        let mut b = [0u8; 64];
        assert_eq!(encode_target(&ev, false, None, 0, &mut b), 32);
        let s = TargetShort::decode(&b).unwrap();
        assert_eq!(
            (s.buffer_id, s.length, s.ptl_list),
            (77, 100, PtlList::Overflow)
        );
        assert!(s.auto_unlinked);
        assert_eq!(
            encode_target(&ev, true, Some(ReturnCode::NoTranslation), 5, &mut b),
            64
        );
        let l = TargetLong::decode(&b).unwrap();
        assert_eq!((l.mlength, l.rlength, l.start), (100, 200, 0x1000));
        assert_eq!(l.return_code, ReturnCode::NoTranslation);
    }
}
