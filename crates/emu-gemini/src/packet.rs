//! The model's frame format on the emulated wire (inside `emu_core::fabric::Packet::data`).
//!
//! Gemini's network packet format is not public; this one is ours. Every frame is a fixed
//! 48-byte little-endian header followed by the payload:
//!
//! | bytes | field |
//! |---|---|
//! | 0 | [`Kind`] |
//! | 1 | flags ([`flag`]) |
//! | 2 | status (`HwStatus` code of an answer; 0 in requests) |
//! | 3 | ptag of the request |
//! | 4..8 | tag: the initiator's request id, echoed in the answer |
//! | 8..12 | seq: position in the ordered stream (requests with [`flag::ORDERED`]) |
//! | 12..14 | stream: FMA descriptor id, or 0x100 + BTE channel |
//! | 14..16 | mdh: memory domain handle at the target |
//! | 16..18 | cmd: AMO code; CQE source of a remote event; RX channel of a SEND |
//! | 18..20 | reserved |
//! | 20..24 | len: bytes asked for (GET) |
//! | 24..32 | offset in the target domain |
//! | 32..40 | op1: AMO operand 1 / answer value / event data / immediate data |
//! | 40..48 | op2: AMO operand 2 |

use thiserror::Error;

/// Header size.
pub const HEADER_LEN: usize = 48;

/// Traffic class of FMA requests, control frames and their answers.
pub(crate) const TC_FMA: u8 = 0;
/// Traffic class of BTE data (PUT data and GET answers of the BTE).
pub(crate) const TC_BTE: u8 = 1;
/// First stream id of the BTE channels (FMA descriptors use their id).
pub(crate) const BTE_STREAM_BASE: u16 = 0x100;

/// Frame kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Write the payload at (mdh, offset).
    Put = 1,
    /// Read `len` bytes at (mdh, offset).
    GetReq = 2,
    /// Answer to a GET: the data.
    GetResp = 3,
    /// Atomic `cmd` at (mdh, offset) with op1, op2.
    AmoReq = 4,
    /// Answer to an AMO: the old value in op1.
    AmoResp = 5,
    /// Answer without data.
    Ack = 6,
    /// Raise a CQ-write event (data in op1) in the domain's CQ.
    CqWrite = 7,
    /// Raise a remote event (data in op1, CQE source in cmd) in the domain's CQ.
    RemoteEvent = 8,
    /// BTE SEND into the target's RX channel `cmd` (immediate data in op1).
    Send = 9,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Put,
            2 => Kind::GetReq,
            3 => Kind::GetResp,
            4 => Kind::AmoReq,
            5 => Kind::AmoResp,
            6 => Kind::Ack,
            7 => Kind::CqWrite,
            8 => Kind::RemoteEvent,
            9 => Kind::Send,
            _ => return None,
        })
    }

    /// Whether the frame answers a request (and is matched by its tag).
    pub const fn is_answer(self) -> bool {
        matches!(self, Kind::GetResp | Kind::AmoResp | Kind::Ack)
    }
}

/// Header flag bits.
pub mod flag {
    /// The target applies the stream's requests in `seq` order.
    pub const ORDERED: u8 = 0x01;
    /// `mdh` is relative to the target's vMDH entry for `ptag`.
    pub const VMDH: u8 = 0x02;
    /// A SEND carries immediate data (op1).
    pub const IMMED: u8 = 0x04;
    /// Answer: the remote event of this request was lost to a full CQ.
    pub const REM_OVERRUN: u8 = 0x08;
    /// Part of an SMSG message (PUT_MSG).
    pub const MSG: u8 = 0x10;
    /// A PUT that also carries its sequence's remote event (`op1`: the 56 data bits,
    /// `cmd`: the event source), raised after the data is written: sent when the PUT is
    /// the only request of a sequence closed with `REMOTE_EVENT` (fma.rs).
    pub const REMOTE_EVENT: u8 = 0x20;
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Frame kind.
    pub kind: Kind,
    /// [`flag`] bits.
    pub flags: u8,
    /// Status code of an answer.
    pub status: u8,
    /// Protection tag.
    pub ptag: u8,
    /// Request id.
    pub tag: u32,
    /// Stream position.
    pub seq: u32,
    /// Stream id.
    pub stream: u16,
    /// Target memory domain handle.
    pub mdh: u16,
    /// Command / source / channel.
    pub cmd: u16,
    /// Requested length.
    pub len: u32,
    /// Target offset.
    pub offset: u64,
    /// Operand or value 1.
    pub op1: u64,
    /// Operand 2.
    pub op2: u64,
}

impl Header {
    /// A header of `kind` with every other field zero.
    pub const fn new(kind: Kind) -> Header {
        Header {
            kind,
            flags: 0,
            status: 0,
            ptag: 0,
            tag: 0,
            seq: 0,
            stream: 0,
            mdh: 0,
            cmd: 0,
            len: 0,
            offset: 0,
            op1: 0,
            op2: 0,
        }
    }

    /// The answer header for this request: same tag and stream, `kind`, `status`.
    pub const fn answer(&self, kind: Kind, status: u8) -> Header {
        let mut h = Header::new(kind);
        h.tag = self.tag;
        h.stream = self.stream;
        h.status = status;
        h
    }

    /// Encode header and payload into a new frame.
    pub fn encode(&self, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN + payload.len());
        self.encode_into(&mut v);
        v.extend_from_slice(payload);
        v
    }

    /// The [`HEADER_LEN`] header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.kind as u8;
        b[1] = self.flags;
        b[2] = self.status;
        b[3] = self.ptag;
        b[4..8].copy_from_slice(&self.tag.to_le_bytes());
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..14].copy_from_slice(&self.stream.to_le_bytes());
        b[14..16].copy_from_slice(&self.mdh.to_le_bytes());
        b[16..18].copy_from_slice(&self.cmd.to_le_bytes());
        b[20..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.offset.to_le_bytes());
        b[32..40].copy_from_slice(&self.op1.to_le_bytes());
        b[40..48].copy_from_slice(&self.op2.to_le_bytes());
        b
    }

    /// Append the [`HEADER_LEN`] header bytes to `v` (a frame is the header, then the
    /// payload).
    pub fn encode_into(&self, v: &mut Vec<u8>) {
        v.extend_from_slice(&self.to_bytes());
    }

    /// Overwrite the first [`HEADER_LEN`] bytes of `frame` with the header (a frame whose
    /// payload was placed behind a header-sized gap).
    pub fn write_into(&self, frame: &mut [u8]) {
        if let Some(dst) = frame.get_mut(..HEADER_LEN) {
            dst.copy_from_slice(&self.to_bytes());
        }
    }

    /// Decode a frame into its header and payload.
    pub fn decode(frame: &[u8]) -> Result<(Header, &[u8]), PacketError> {
        let h = frame
            .get(..HEADER_LEN)
            .ok_or(PacketError::Short(frame.len()))?;
        let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let kind = Kind::from_u8(h[0]).ok_or(PacketError::Kind(h[0]))?;
        Ok((
            Header {
                kind,
                flags: h[1],
                status: h[2],
                ptag: h[3],
                tag: u32_at(4),
                seq: u32_at(8),
                stream: u16_at(12),
                mdh: u16_at(14),
                cmd: u16_at(16),
                len: u32_at(20),
                offset: u64_at(24),
                op1: u64_at(32),
                op2: u64_at(40),
            },
            &frame[HEADER_LEN..],
        ))
    }
}

/// A frame the model cannot read (it is dropped and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PacketError {
    /// Shorter than the header.
    #[error("frame of {0} bytes is shorter than the header")]
    Short(usize),
    /// Unknown kind.
    #[error("unknown frame kind {0}")]
    Kind(u8),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_header_written_in_front_of_a_payload_in_place_is_the_encoded_frame() {
        let mut h = Header::new(Kind::Put);
        h.flags = flag::ORDERED | flag::MSG;
        h.tag = 77;
        h.offset = 0x1234_5678;
        let payload: Vec<u8> = (0..100u8).collect();
        let mut frame = vec![0xEEu8; HEADER_LEN];
        frame.extend_from_slice(&payload);
        h.write_into(&mut frame);
        assert_eq!(frame, h.encode(&payload));
        let (back, data) = Header::decode(&frame).unwrap();
        assert_eq!((back, data), (h, payload.as_slice()));
    }

    #[test]
    fn golden_header() {
        let mut h = Header::new(Kind::AmoReq);
        h.flags = flag::ORDERED;
        h.ptag = 7;
        h.tag = 0x0102_0304;
        h.stream = 0x100;
        h.mdh = 0xABC;
        h.cmd = 0x08;
        h.offset = 0x10;
        h.op1 = 5;
        let f = h.encode(&[9, 9]);
        assert_eq!(f.len(), HEADER_LEN + 2);
        assert_eq!(&f[..8], &[4, 1, 0, 7, 4, 3, 2, 1]);
        assert_eq!(&f[12..18], &[0x00, 0x01, 0xBC, 0x0A, 0x08, 0x00]);
        assert_eq!(f[24], 0x10);
        assert_eq!(f[32], 5);
        let (d, p) = Header::decode(&f).unwrap();
        assert_eq!((d, p), (h, &[9u8, 9][..]));
        assert_eq!(Header::decode(&f[..10]), Err(PacketError::Short(10)));
        let mut bad = f.clone();
        bad[0] = 0;
        assert_eq!(Header::decode(&bad), Err(PacketError::Kind(0)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn round_trip(kind in 1u8..=9, flags: u8, status: u8, ptag: u8, tag: u32, seq: u32,
                      stream: u16, mdh: u16, cmd: u16, len: u32, offset: u64, op1: u64,
                      op2: u64, payload in proptest::collection::vec(any::<u8>(), 0..80)) {
            let h = Header { kind: Kind::from_u8(kind).unwrap(), flags, status, ptag, tag, seq,
                             stream, mdh, cmd, len, offset, op1, op2 };
            let f = h.encode(&payload);
            let (d, p) = Header::decode(&f).unwrap();
            prop_assert_eq!(d, h);
            prop_assert_eq!(p, &payload[..]);
        }
    }
}
