//! A packet's arrival at the target: `receive` (CRC, parse) hands a request's first packet
//! to `request` (DFA check, RMU: VNI and portal TCAMs -> PtlTE, LPE: the matching decision)
//! and on to the stage that moves its data (put, Get or atomic); continuations go to their
//! put, responses to the initiator.

use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, TrafficClass};
use emu_core::nic_faults::NicSite;
use firmware_spec::cassini::cmd::DmaOp;
use firmware_spec::cassini::rc::ReturnCode;

use crate::block::EventClass;
use crate::lpe::{AtomicInfo, IncomingRequest, NetOp};
use crate::wire::{self, AmoPayload, Fab, Parsed, Request};

use super::amo::TgtAmo;
use super::answer::TgtAnswer;
use super::ctx::TgtCtx;
use super::event::TgtEvents;
use super::get::TgtGet;
use super::put::TgtPut;

/// The target's behaviour, on anything that provides a [`TgtCtx`]: where a packet enters.
pub(crate) trait TgtOps: TgtCtx {
    /// A packet arrived.
    fn receive(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        if !pkt.crc_ok() {
            self.counters().rx_unrecognized_pkt += 1;
            return;
        }
        match wire::parse(&pkt.data) {
            Some(Parsed::Request(fab, r, payload)) => {
                let hdr = &pkt.data[..pkt.data.len() - payload.len()];
                self.request(io, &fab, &r, hdr, payload, pkt.tc);
                if let Some(t) = &pkt.train {
                    self.train(io, &fab, r.handle, payload.len() as u64, t);
                }
            }
            Some(Parsed::Continuation(fab, c, payload)) => {
                self.continuation(io, &fab, &c, payload, pkt.train.as_deref())
            }
            Some(Parsed::Response(_, r, payload)) => {
                self.response(io, &r, payload, pkt.train.as_deref())
            }
            None => self.counters().rx_unrecognized_pkt += 1,
        }
        // The payload has been placed (or copied where it must wait): the frame's buffer
        // goes back to the engine's pool for the next frame built here.
        io.recycle(pkt.data);
    }

    /// The first packet of a request.
    fn request(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        hdr: &[u8],
        payload: &[u8],
        tc: TrafficClass,
    ) {
        if req.small {
            self.counters().rx_ptl_smallmsg_pkt += 1;
        } else {
            self.counters().rx_ptl_unrestricted_pkt += 1;
        }
        self.counters().rx_ptl_msgs += 1;
        if fab.dfa >> 12 != self.nid() {
            self.counters().port_dfa_mismatch += 1;
            self.nack(io, fab, tc, req, ReturnCode::InvalidDfaFormat);
            return;
        }
        let op = match DmaOp::try_from(req.opcode) {
            Ok(DmaOp::Put | DmaOp::SmallMessage | DmaOp::NomatchPut) => NetOp::Put,
            Ok(DmaOp::RendezvousPut) => NetOp::RendezvousPut,
            Ok(DmaOp::Get | DmaOp::NomatchGet) => NetOp::Get,
            Ok(DmaOp::Atomic) => NetOp::Atomic,
            Ok(DmaOp::FetchingAtomic) => NetOp::FetchAtomic,
            _ => {
                self.nack(io, fab, tc, req, ReturnCode::IllegalOp);
                return;
            }
        };
        let amo = if matches!(op, NetOp::Atomic | NetOp::FetchAtomic) {
            match AmoPayload::parse(payload) {
                Some(a) => Some(a),
                None => {
                    self.nack(io, fab, tc, req, ReturnCode::IllegalOp);
                    return;
                }
            }
        } else {
            None
        };
        let pt = match self
            .rmu()
            .resolve(fab.vni, (fab.dfa & 0xFFF) as u16, req.index_ext, false)
        {
            Ok(pt) => pt,
            Err(rc) => {
                self.nack(io, fab, tc, req, rc);
                return;
            }
        };
        let (eq, long) = self.event_format(pt);
        // Fault sites (issue 15): the PtlTE's EQ reads as full, or no LE is left for an
        // unexpected header. The LPE then does what the hardware does on real exhaustion
        // (cassini.md §3.2, §4.3: a flow-control PtlTE goes DISABLED with a STATE_CHANGE
        // event, FC_EQ_FULL or FC_UNEXPECTED_FAIL, and the request is NACKed PT_DISABLED).
        let eq_full = eq != 0
            && (!self.eq_has_room(eq, if long { 64 } else { 32 }, EventClass::Receive)
                || io.fault(NicSite::EqFull));
        let le_exhausted = io.fault(NicSite::LeExhaust);
        let incoming = IncomingRequest {
            op,
            initiator: req.initiator,
            source_nid: fab.sfa >> 12,
            match_bits: req.match_bits,
            header_data: req.header_data,
            rlength: u64::from(req.request_len),
            remote_offset: req.remote_offset,
            vni: fab.vni,
            restricted: req.restricted,
            wire_header_len: (wire::FAB_HDR
                + if req.small {
                    wire::SMALL_MSG_HDR
                } else {
                    wire::UNRESTRICTED_HDR
                }) as u64,
            eq_full,
            le_exhausted,
            eager_length: u64::from(req.eager_length),
            rendezvous_id: req.rendezvous_id,
            use_offset_for_get: req.use_offset_for_get,
            atomic: amo.map_or(AtomicInfo::default(), |a| AtomicInfo {
                op: a.op,
                ty: a.ty,
                cswap_op: a.cswap,
            }),
        };
        let outcome = self.lpe().incoming(pt, incoming);
        if let Some(a) = amo {
            self.serve_amo(io, fab, req, tc, pt, outcome, a);
        } else if op == NetOp::Get {
            self.serve_get(io, fab, req, tc, pt, outcome);
        } else {
            self.place_put(io, fab, req, hdr, payload, tc, pt, outcome);
        }
    }
}

impl<T: TgtCtx + ?Sized> TgtOps for T {}
