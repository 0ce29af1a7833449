//! The Gemini network as the fabric models it: link timing and the links' own retry of lost
//! or damaged packets. `platform` and the harness's clusters build their tori with these.

use emu_core::fabric::{LinkParams, LinkRetry};
use emu_core::time::SimDuration;

/// Link timing for a Gemini torus. Illustrative, from the public numbers: 8.32 GB/s per
/// direction (64 B every 5 cycles at 650 MHz, euroben.nl XE6 report), 100 ns per link and
/// per router hop (end-to-end small-message latency 0.7–1.4 µs over a few hops, same
/// report), 16 bytes of header per packet (our choice).
pub fn gemini_link_params() -> LinkParams {
    LinkParams {
        latency: SimDuration::from_ns(100),
        bandwidth: 8_320_000_000,
        header_overhead: 16,
        switch_latency: SimDuration::from_ns(100),
    }
}

/// Link-level retry of a Gemini torus: each link checks every packet's CRC and sends a
/// lost or damaged one again (the LCB's link-level retry, nicemu issue 15), so drops and
/// corruption on a link cost time, not data. The numbers are this model's choice (no public
/// figure): up to 8 retransmissions per hop, each a link round trip plus the resend (300 ns
/// against [`gemini_link_params`]' 100 ns links), and a link that is down is waited for up
/// to 50 µs; a longer outage loses the packet, and the initiating NIC then fails the request
/// with `REQUEST_TIMEOUT` (uGNI: `GNI_RC_TRANSACTION_ERROR`).
pub fn gemini_link_retry() -> LinkRetry {
    LinkRetry {
        max_retries: 8,
        retry_delay: SimDuration::from_ns(300),
        down_window: SimDuration::from_us(50),
    }
}
