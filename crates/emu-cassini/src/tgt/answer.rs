//! The target's answers to the initiator: a response (ACK or REPLY) built back from the
//! request's fabric header and sent through the PCT, and the NACK of a refused request.

use emu_core::engine::DeviceIo;
use emu_core::fabric::{PortId, TrafficClass};
use firmware_spec::cassini::cmd::DmaOp;
use firmware_spec::cassini::rc::ReturnCode;

use crate::wire::{self, Fab, Request, Response, RspKind};

use super::ctx::TgtCtx;

/// Answering the initiator, on anything that provides a [`TgtCtx`].
pub(crate) trait TgtAnswer: TgtCtx {
    /// Send a response to the initiator of a request that arrived with `fab`.
    fn respond(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        r: &Response,
        data: &[u8],
    ) {
        let Some(port) = (fab.sfa >> 12).checked_sub(self.nid_base()) else {
            return;
        };
        let back = Fab {
            vni: fab.vni,
            sfa: self.nid() << 12,
            dfa: fab.sfa,
        };
        let buf = io.packet_buffer(wire::FRAME_ROOM + data.len());
        let mut b = wire::response_in(buf, &back, r, data.len());
        b.extend_from_slice(data);
        let src = io.port().unwrap_or_default();
        self.pct_send(io, wire::packet(src, PortId(port), tc, b));
    }

    fn nack(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        req: &Request,
        rc: ReturnCode,
    ) {
        let get = matches!(
            DmaOp::try_from(req.opcode),
            Ok(DmaOp::Get | DmaOp::NomatchGet | DmaOp::FetchingAtomic)
        );
        let r = Response {
            kind: if get { RspKind::Reply } else { RspKind::Ack },
            rc: rc.into(),
            ptl_list: 0,
            offset: 0,
            eom: true,
            handle: req.handle,
            mlength: 0,
        };
        self.respond(io, fab, tc, &r, &[]);
    }
}

impl<T: TgtCtx + ?Sized> TgtAnswer for T {}
