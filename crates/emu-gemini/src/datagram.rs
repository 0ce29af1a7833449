//! The device side of uGNI datagrams.
//!
//! Datagrams (`GNI_EpPostData*`, at most `GNI_DATAGRAM_MAXSIZE` = 128 bytes each way) are
//! matched by kgni, not by the NIC. On the wire they are kernel BTE traffic: the driver
//! sends a BTE `SEND` with `IMMED` from its TX channel [`DATAGRAM_CHANNEL`] into the same RX
//! channel of the peer, whose buffers the peer's driver posted. The NIC delivers the bytes
//! into the next posted RX buffer, writes the `CpuRxDescriptor` (length, immediate data) and
//! raises the channel's RX interrupt; without a posted buffer the sender's TXD completes with
//! `SEQUENCE_TERMINATE` (recoverable: retry). This module fixes the conventions the model's
//! tests and demo use; the header format inside the buffer is the driver's choice.

use firmware_spec::gemini::limits::DATAGRAM_MAX_SIZE;

/// BTE channel used for kernel datagram traffic (the fourth channel; uGNI user RDMA uses
/// the first three). Our choice.
pub const DATAGRAM_CHANNEL: u8 = 3;

/// Room for a driver header plus both datagram payloads in one RX buffer.
pub const DATAGRAM_BUFFER_SIZE: u64 = 64 + 2 * DATAGRAM_MAX_SIZE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_holds_two_payloads() {
        assert_eq!(DATAGRAM_BUFFER_SIZE, 320);
        assert!(u64::from(DATAGRAM_CHANNEL) < firmware_spec::gemini::limits::BTE_CHANNELS);
    }
}
