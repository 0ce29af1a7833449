//! Configuration of one emulated Gemini NIC.

use emu_core::time::SimDuration;

/// Parameters of a [`crate::Gemini`] model. None of them is visible to software except
/// `pe` (the `NODE_ID` register).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeminiConfig {
    /// Name for traces ("gemini3").
    pub name: String,
    /// Physical PE (18 bits) of this NIC. The model sends to PE `p` through fabric port `p`,
    /// so this must be the port the NIC is attached to.
    pub pe: u32,
    /// Largest payload of one BTE data packet on the emulated wire. Real Gemini packets carry
    /// 64 bytes; the model moves bulk data in larger packets to keep the event count low (the
    /// fabric still charges every byte against link bandwidth).
    pub bte_packet_bytes: u32,
    /// Bytes the BTE issues per step when unpaced, and the pacing quantum otherwise.
    pub bte_step_bytes: u64,
    /// BTE injection bandwidth in bytes/s used to pace steps; 0 = unpaced (as fast as the
    /// engine runs). Default 6.911 GB/s, the measured DMAPP peak (HOTI'11, Vishnu et al.).
    pub bte_bandwidth: u64,
    /// Most bytes one paced step may issue when catching up after a late timer.
    pub bte_max_burst: u64,
    /// Most bytes of one BTE transfer in flight (sent, not yet answered): the BTE's flow
    /// control. Our choice, about 60 µs of data at the modelled bandwidth.
    pub bte_max_inflight: u64,
    /// A request unanswered this long (since the last progress of its sequence or transfer)
    /// fails with `REQUEST_TIMEOUT`.
    pub request_timeout: SimDuration,
}

impl GeminiConfig {
    /// Defaults for the NIC with physical PE `pe`.
    pub fn new(pe: u32) -> Self {
        GeminiConfig {
            name: format!("gemini{pe}"),
            pe,
            bte_packet_bytes: 16 * 1024,
            bte_step_bytes: 64 * 1024,
            bte_bandwidth: 6_911_000_000,
            bte_max_burst: 1024 * 1024,
            bte_max_inflight: 512 * 1024,
            request_timeout: SimDuration::from_us(100_000),
        }
    }
}
