//! The Gets the NIC issues itself to pull the rest of a rendezvous put (cassini.md §6).

use emu_core::dma::Perm;
use emu_core::engine::DeviceIo;
use emu_core::fabric::{PortId, TrafficClass};
use firmware_spec::cassini::cmd::DmaOp;
use firmware_spec::cassini::dfa::match_id;
use firmware_spec::cassini::rc::ReturnCode;

use crate::lpe::{CtUpdate, RendezvousGet};
use crate::wire::{self, Fab, Request};

use super::complete::IxeComplete;
use super::ctx::IxeCtx;
use super::requests::{NO_CQ, Req, ReqKind};
use super::timeout::IxeTimeout;

/// Rendezvous Gets, on anything that provides an [`IxeCtx`].
pub(crate) trait IxeRendezvous: IxeCtx {
    /// Issue the Get that pulls the rest of a rendezvous put (cassini.md §6): to the source's
    /// PtlTE at index `rdzv_get_idx` of its PID granule (`c_lpe_cfg_get_ctrl`), match bits
    /// `cxi_rdzv_match_bits` {rendezvous_id, transaction_type, the put's top 16 match bits},
    /// landing in the receiving entry. Its REPLY event (`rendezvous` set, `user_ptr` =
    /// `cxi_rdzv_user_ptr`) goes to the PtlTE's EQ; `ct` is applied when it completes.
    /// `put` is the fabric header the put arrived with.
    fn launch_rendezvous_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        g: &RendezvousGet,
        put: &Fab,
        tc: TrafficClass,
        ct: Option<CtUpdate>,
    ) {
        let eq = self.ptlte_eq(g.ptlte_index);
        let ac = self
            .tables()
            .lac_ac(self.tables().ptlte_rgid(g.ptlte_index), g.dest_lac);
        let user_ptr = (u64::from(g.source_nid) & 0xF_FFFF)
            | ((u64::from(g.source_pid) & 0x1FF) << 20)
            | ((u64::from(g.ptlte_index) & 0x7FF) << 29)
            | (u64::from(g.rendezvous_id) << 40)
            | (u64::from(g.buffer_id) << 48);
        let len = g.length.min(u64::from(u32::MAX)) as u32;
        let req = Req {
            active: true,
            kind: ReqKind::Get,
            cq: NO_CQ,
            eq,
            user_ptr,
            rlength: len,
            local_ac: ac,
            local_addr: g.dest_start,
            at: io.now().as_ps(),
            rendezvous: true,
            rdzv_ct: ct,
            ..Req::default()
        };
        let w = Perm::WRITE;
        if let Err(rc) = self
            .atu()
            .check(io.dma(), ac, g.dest_start, u64::from(len), w)
        {
            self.fail_request(io, &req, rc);
            return;
        }
        let Some(port) = g.source_nid.checked_sub(self.nid_base()) else {
            self.fail_request(io, &req, ReturnCode::Undeliverable);
            return;
        };
        self.ensure_scan(io);
        let Some(handle) = self.ixe().alloc(req) else {
            self.fail_request(io, &req, ReturnCode::ResourceBusy);
            return;
        };
        let gc = self.rdzv_get();
        let pid_bits = self.pid_bits();
        // The PID of the put's destination endpoint: the NIC issuing the Get.
        let my_pid = (put.dfa & 0xFFF) & pid_bits.pid_mask();
        let fab = Fab {
            vni: put.vni,
            sfa: self.nid() << 12,
            dfa: ((g.source_nid & 0xF_FFFF) << 12)
                | (u32::from(gc.index).wrapping_add(g.source_pid) & 0xFFF),
        };
        let r = Request {
            opcode: DmaOp::Get as u8,
            index_ext: gc.index_ext,
            remote_offset: g.source_offset,
            request_len: len,
            initiator: match_id(pid_bits, my_pid, self.nid()),
            match_bits: u64::from(g.rendezvous_id)
                | (u64::from(gc.transaction_type & 0xF) << 8)
                | (g.put_match_bits & (0xFFFF << 48)),
            header_data: 0,
            handle,
            ..Request::default()
        };
        let src = io.port().unwrap_or_default();
        self.pct_send(
            io,
            wire::packet(src, PortId(port), tc, wire::request(&fab, &r, 0)),
        );
        self.counters().ptl_tx_get_msgs += 1;
    }
}

impl<T: IxeCtx + ?Sized> IxeRendezvous for T {}
