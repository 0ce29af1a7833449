//! What the initiator needs from the rest of the NIC ([`IxeCtx`], implemented by `hw`).

use emu_core::engine::DeviceIo;
use emu_core::fabric::Packet;
use emu_core::sparse::SparseTable;
use firmware_spec::cassini::dfa::PidBits;

use crate::atu::Atu;
use crate::block::{Counters, EventClass, Exec, Fail, GetCtrl};
use crate::cq::TxCq;
use crate::tables::Tables;
use firmware_spec::cassini::rc::ReturnCode;

use super::requests::{Ixe, OutStream};

/// it executes commands for, the counters, the configuration tables and the ATU, a few
/// read-only facts (NID, PtlTE EQs, PID bits, the rendezvous Get settings, initiator event
/// format), and the blocks it hands work to: the PCT (`pct_send`), the TOU (counting events,
/// CT commands), the CQ block (a FENCE released) and the target (its messages share the
/// timeout scan). `hw` implements it.
pub(crate) trait IxeCtx {
    /// The outstanding-request table.
    fn ixe(&mut self) -> &mut Ixe;
    /// The transmit CQs (C_STATE, LCID, CP cache, outstanding requests, FENCE).
    fn tx_cqs(&mut self) -> &mut SparseTable<TxCq>;
    /// Transmit CQ `n`; a queue number beyond the table is an invalid argument.
    fn tx_cq(&mut self, n: u32) -> Result<&mut TxCq, Fail> {
        self.tx_cqs()
            .get_mut(n as usize)
            .map_err(|_| ReturnCode::CmdInvalidArg)
    }
    /// The NIC-wide counters.
    fn counters(&mut self) -> &mut Counters;
    /// The decoded CQ configuration tables (ACs, CPs, PtlTE resource groups).
    fn tables(&self) -> &Tables;
    /// Address translation for local buffers.
    fn atu(&mut self) -> &mut Atu;
    /// This NIC's NID.
    fn nid(&self) -> u32;
    /// NID of fabric port 0.
    fn nid_base(&self) -> u32;
    /// The EQ of PtlTE `pt` (0 if it is not configured).
    fn ptlte_eq(&self, pt: u16) -> u16;
    /// The device's PID granule (`pid_bits`).
    fn pid_bits(&self) -> PidBits;
    /// Where rendezvous Gets go (`c_lpe_cfg_get_ctrl`).
    fn rdzv_get(&self) -> GetCtrl;
    /// Whether EQ `eq` takes long initiator events.
    fn initiator_long(&self, eq: u16) -> bool;
    /// Post an encoded event to EQ `eq`; false if it was dropped.
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool;
    /// Send a frame through the PCT.
    fn pct_send(&mut self, io: &mut DeviceIo<'_>, pkt: Packet);
    /// Hand the PCT the rest of a message, to be read frame by frame as its window opens.
    fn pct_stream(&mut self, io: &mut DeviceIo<'_>, stream: OutStream);
    /// A counting event on CT `ct` (the TOU).
    fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64);
    /// A CT command on transmit CQ `n` (the TOU).
    fn ct_command(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail>;
    /// Run the ring of CQ `n` again (the CQ block; a FENCE was released).
    fn run_ring(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32);
    /// Drop target messages older than `limit` ps (the target).
    fn expire_target_messages(&mut self, now: u64, limit: u64);
    /// Whether target messages wait for more packets (the target).
    fn target_busy(&mut self) -> bool;
}
