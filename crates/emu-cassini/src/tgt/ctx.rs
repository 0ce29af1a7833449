//! What the target needs from the rest of the NIC ([`TgtCtx`], implemented by `hw`).

use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, TrafficClass, Train};

use crate::atu::Atu;
use crate::block::{Counters, EventClass};
use crate::lpe::{CtUpdate, Lpe, RendezvousGet};
use crate::rmu::Rmu;
use crate::tables::Tables;
use crate::wire::{Fab, Response};

use super::state::{ReplyStream, Tgt};

/// What the target needs from the rest of the NIC: its own state between packets, the
/// counters, the NIC's address, the RMU and LPE (the matching decision), the configuration
/// tables and the ATU (data placement), the event queues, and the blocks it hands work to:
/// the initiator (responses, rendezvous Gets, the shared timeout scan), the PCT (`pct_send`)
/// and the TOU (counting events). `hw` implements it.
pub(crate) trait TgtCtx {
    /// The target's state between packets.
    fn tgt(&mut self) -> &mut Tgt;
    /// Resource group of target CQ `n` (`mem_q_rgid`).
    fn tgq_rgid(&self, n: u32) -> u8;
    /// The NIC-wide counters.
    fn counters(&mut self) -> &mut Counters;
    /// This NIC's NID.
    fn nid(&self) -> u32;
    /// NID of fabric port 0.
    fn nid_base(&self) -> u32;
    /// The receive match unit (VNI and portal TCAMs).
    fn rmu(&mut self) -> &mut Rmu;
    /// The list processing engine.
    fn lpe(&mut self) -> &mut Lpe;
    /// The decoded CQ configuration tables (ACs, PtlTE resource groups).
    fn tables(&self) -> &Tables;
    /// Address translation for target buffers.
    fn atu(&mut self) -> &mut Atu;
    /// The target's state and the ATU together (a continuation lands in the message it
    /// belongs to).
    fn tgt_and_atu(&mut self) -> (&mut Tgt, &mut Atu);
    /// Whether EQ `eq` can take an event of `bytes` of class `class` now.
    fn eq_has_room(&self, eq: u16, bytes: usize, class: EventClass) -> bool;
    /// Whether EQ `eq` takes long target events.
    fn target_long(&self, eq: u16) -> bool;
    /// Post an encoded event to EQ `eq`; false if it was dropped.
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool;
    /// A response arrived for one of this NIC's requests (the initiator), with the train of
    /// the REPLY frames that follow it, if any.
    fn response(
        &mut self,
        io: &mut DeviceIo<'_>,
        rsp: &Response,
        payload: &[u8],
        train: Option<&Train>,
    );
    /// Issue the Get that pulls the rest of a rendezvous put (the initiator).
    fn launch_rendezvous_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        g: &RendezvousGet,
        put: &Fab,
        tc: TrafficClass,
        ct: Option<CtUpdate>,
    );
    /// Whether the initiator's timeout scan is armed.
    fn ixe_scan_armed(&mut self) -> bool;
    /// Arm the initiator's timeout scan (it also expires target messages).
    fn arm_scan(&mut self, io: &mut DeviceIo<'_>);
    /// Send a frame through the PCT.
    fn pct_send(&mut self, io: &mut DeviceIo<'_>, pkt: Packet);
    /// Send the REPLY frames of a Get through the PCT as the window opens.
    fn pct_reply(&mut self, io: &mut DeviceIo<'_>, stream: ReplyStream);
    /// A counting event on CT `ct` (the TOU).
    fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64);
}
