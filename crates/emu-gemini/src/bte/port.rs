//! What the BTE's TX side needs from the rest of the NIC ([`BtePort`]).

use emu_core::dma::{DmaPort, Segment};
use emu_core::time::{SimDuration, SimTime};
use firmware_spec::gemini::cqe::Cqe;

use crate::mdd::Domains;
use crate::packet::Header;
use crate::request::{Dest, Req};

/// What the BTE's TX side needs from the rest of the NIC: memory to read from and write to,
/// the request table it sends through, CQs and interrupts for completions, and a timer for
/// its paced steps. The device implements it.
pub(crate) trait BtePort {
    /// Current virtual time.
    fn now(&self) -> SimTime;
    /// Add `n` to model counter `c` ([`regs::counter`]).
    fn count(&mut self, c: u32, n: u64);
    /// The memory domains (transfers with NAT on).
    fn domains(&self) -> &Domains;
    /// The host DMA port (NAT off, and TXD status write-back).
    fn dma(&self) -> &DmaPort;
    /// Tag and send a request on traffic class `tc`; its answer (or timeout) comes back as
    /// [`Bte::xfer_answered`] for `Owner::Xfer`.
    fn issue(&mut self, req: Req, dest: &Dest, hdr: Header, payload: &[u8], tc: u8);
    /// [`BtePort::issue`] of a frame built in place: `frame` is [`HEADER_LEN`] bytes of
    /// room for the header, then the payload.
    fn issue_frame(&mut self, req: Req, dest: &Dest, hdr: Header, frame: Vec<u8>, tc: u8);
    /// An empty buffer of at least `cap` bytes for a frame (recycled when the engine has
    /// one).
    fn frame_buffer(&mut self, cap: usize) -> Vec<u8>;
    /// Whether a packet to physical PE `pe` may be a train (`emu_core::fabric::Train`,
    /// `DeviceIo::train_ok`).
    fn train_ok(&self, pe: u32) -> bool;
    /// Send a train of `frames` PUT frames as one packet: `hdr` (the first frame's), the
    /// payload left in host memory at `segments` (this NIC's DMA addresses). Each frame is
    /// a request whose answer comes back as [`Bte::xfer_answered`].
    fn issue_train(
        &mut self,
        req: Req,
        dest: &Dest,
        hdr: Header,
        frames: u32,
        segments: Vec<Segment>,
        tc: u8,
    );
    /// Deliver a completion event to CQ `cqh`.
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe);
    /// Raise MSI-X vector `v`.
    fn raise(&mut self, v: u16);
    /// Call [`Bte::step`] after `delay`.
    fn step_after(&mut self, delay: SimDuration);
}
