//! BTE (Block Transfer Engine): TX descriptor rings on 4 channels, asynchronous progress in
//! paced steps, PUT/GET/SEND transfers up to 4 GiB, completion events, and the RX channels
//! that receive SENDs.
//!
//! Formats: `ghal_tx_desc_t`, `ghal_txvc_desc_t`, `ghal_rx_desc_t`, `ghal_rxvc_desc_t`,
//! `ghal_cpurx_desc_t` (`firmware_spec::gemini::bte`). Posting protocol and our readings:
//! docs/gemini-programming.md ("BTE").
//!
//! A doorbell only arms a timer; the work happens in the BTE step (a timer handler), which
//! issues at most `bte_max_burst` bytes per call (token bucket at `bte_bandwidth`), so neither
//! the CPU that rang the doorbell nor the engine is held for long.
//!
//! The TX side (`Bte`) reaches the rest of the NIC only through the `BtePort` trait (memory,
//! request table, CQs, interrupts, its step timer); answers come back from the device as
//! `Bte::xfer_answered`. The RX side (`BteRx`) is handed the DMA port and returns the
//! interrupt to raise; the target side feeds it SENDs.
//!
//! Modules: `port` (what the TX side needs), `tx` (channels, TXD ring, registers), `xfer`
//! (the paced step and its transfers), `rx` (RX channels).

mod port;
mod rx;
mod tx;
mod xfer;

pub(crate) use port::BtePort;
pub(crate) use rx::BteRx;
pub(crate) use tx::Bte;
pub use tx::SEND_MAX_BYTES;
