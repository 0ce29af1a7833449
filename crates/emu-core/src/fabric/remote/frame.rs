//! The frame a packet travels in between processes (over a shared-memory ring or a TCP
//! stream): a fixed 40-byte little-endian header, then the packet's data.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `NMF1` |
//! | 4 | 1 | kind: 0 packet, 1 hello, 2 heartbeat, 3 bye, 4 credit |
//! | 5 | 1 | traffic class |
//! | 6 | 2 | reserved (0) |
//! | 8 | 4 | source port |
//! | 12 | 4 | destination port |
//! | 16 | 4 | the packet's CRC as the sending fabric left it (may be [`Packet::CRC_TRUSTED`], or a CRC its corruption fault made wrong) |
//! | 20 | 4 | wire CRC32 of the data bytes as sent |
//! | 24 | 8 | delay in picoseconds: the receiver delivers no earlier than this after it takes the frame (a credit: packets taken so far) |
//! | 32 | 4 | data length |
//! | 36 | 4 | reserved (0) |

use super::RemoteError;
use crate::fabric::{Packet, PortId, TrafficClass};
use crate::time::SimDuration;

/// Bytes of a frame header.
pub const HEADER: usize = 40;
const MAGIC: [u8; 4] = *b"NMF1";

/// What a frame carries.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A fabric packet.
    Packet = 0,
    /// The first frame on a TCP connection: `src` is the connecting process's port.
    Hello = 1,
    /// Keeps an idle TCP connection alive (the receiver's read timeout is the liveness
    /// timeout).
    Heartbeat = 2,
    /// The sender closes cleanly; nothing follows.
    Bye = 3,
    /// TCP: how many packet frames the sender of this frame has taken from the stream in
    /// the other direction (in the delay field), so that side knows what is in flight.
    Credit = 4,
}

/// A decoded frame header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub tc: u8,
    pub src: u32,
    pub dst: u32,
    pub pkt_crc: u32,
    pub wire_crc: u32,
    pub delay: SimDuration,
    pub len: u32,
}

impl Header {
    /// The header of a packet frame for `pkt`, to be delivered `delay` after receipt.
    pub fn packet(pkt: &Packet, delay: SimDuration) -> Header {
        Header {
            kind: Kind::Packet,
            tc: pkt.tc.0,
            src: pkt.src.0,
            dst: pkt.dst.0,
            pkt_crc: pkt.crc,
            wire_crc: crc32fast::hash(&pkt.data),
            delay,
            len: pkt.data.len() as u32,
        }
    }

    /// A control frame (hello, heartbeat, bye) from `src`, without data.
    pub fn control(kind: Kind, src: u32) -> Header {
        Header {
            kind,
            tc: 0,
            src,
            dst: 0,
            pkt_crc: 0,
            wire_crc: 0,
            delay: SimDuration::ZERO,
            len: 0,
        }
    }

    /// The 40 header bytes.
    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = self.kind as u8;
        b[5] = self.tc;
        b[8..12].copy_from_slice(&self.src.to_le_bytes());
        b[12..16].copy_from_slice(&self.dst.to_le_bytes());
        b[16..20].copy_from_slice(&self.pkt_crc.to_le_bytes());
        b[20..24].copy_from_slice(&self.wire_crc.to_le_bytes());
        b[24..32].copy_from_slice(&self.delay.0.to_le_bytes());
        b[32..36].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Decode a header; an unknown magic or kind is an error (a stream out of sync).
    pub fn decode(b: &[u8]) -> Result<Header, RemoteError> {
        if b.len() < HEADER || b[0..4] != MAGIC {
            return Err(RemoteError::Protocol("bad frame header".into()));
        }
        let kind = match b[4] {
            0 => Kind::Packet,
            1 => Kind::Hello,
            2 => Kind::Heartbeat,
            3 => Kind::Bye,
            4 => Kind::Credit,
            k => return Err(RemoteError::Protocol(format!("unknown frame kind {k}"))),
        };
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let mut d = [0u8; 8];
        d.copy_from_slice(&b[24..32]);
        Ok(Header {
            kind,
            tc: b[5],
            src: u32_at(8),
            dst: u32_at(12),
            pkt_crc: u32_at(16),
            wire_crc: u32_at(20),
            delay: SimDuration(u64::from_le_bytes(d)),
            len: u32_at(32),
        })
    }

    /// The packet of a packet frame with `data`, and whether the data survived the trip
    /// (its wire CRC matches). A damaged packet keeps the wire CRC, so the receiving
    /// device's [`Packet::crc_ok`] fails on it as on a corrupted link.
    pub fn into_packet(self, data: Vec<u8>) -> (Packet, bool) {
        let intact = crc32fast::hash(&data) == self.wire_crc;
        let crc = if intact { self.pkt_crc } else { self.wire_crc };
        (
            Packet {
                src: PortId(self.src),
                dst: PortId(self.dst),
                tc: TrafficClass(self.tc),
                data,
                crc,
                train: None,
            },
            intact,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_damage_is_caught() {
        let mut p = Packet::new(PortId(3), PortId(9), TrafficClass(2), vec![1, 2, 3, 4, 5]);
        p.crc = Packet::CRC_TRUSTED;
        let h = Header::packet(&p, SimDuration::from_ns(250));
        let b = h.encode();
        let d = Header::decode(&b).unwrap();
        assert_eq!(d, h);
        let (q, ok) = d.into_packet(p.data.clone());
        assert!(ok);
        assert_eq!(q, p);
        let (bad, ok) = d.into_packet(vec![1, 2, 3, 4, 6]);
        assert!(!ok);
        assert!(!bad.crc_ok());
        let mut wrong = b;
        wrong[4] = 9;
        assert!(Header::decode(&wrong).is_err());
        assert!(Header::decode(&b[..10]).is_err());
        let c = Header::control(Kind::Bye, 4);
        assert_eq!(Header::decode(&c.encode()).unwrap(), c);
    }
}
