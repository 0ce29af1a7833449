//! The messages two kgni instances exchange about datagrams ([`Wire`]: a 48-byte header and
//! the payload, carried by a BTE `SEND`), and the domains they belong to.

use firmware_spec::gemini::limits::DATAGRAM_MAX_SIZE;
use thiserror::Error;

/// Largest datagram payload (`GNI_DATAGRAM_MAXSIZE`).
pub const MAX_PAYLOAD: usize = DATAGRAM_MAX_SIZE as usize;
/// Bytes of the [`Wire`] header.
pub const WIRE_HEADER: usize = 48;
/// Largest encoded [`Wire`].
pub const WIRE_MAX: usize = WIRE_HEADER + MAX_PAYLOAD;
/// First two bytes of every message (`"gD"`).
const MAGIC: u16 = 0x4467;
/// Protocol version.
const VERSION: u8 = 1;

/// A communication domain: datagrams match only within one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Domain {
    /// Protection tag.
    pub ptag: u8,
    /// Cookie.
    pub cookie: u32,
}

/// Kinds of kgni-to-kgni datagram messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WireKind {
    /// A bound datagram looking for its match.
    Request = 1,
    /// The matching side's payload, completing the requester's post.
    Response = 2,
    /// The requester cancelled its post.
    Cancel = 3,
    /// The target could not hold the request.
    Reject = 4,
}

impl WireKind {
    fn from_u8(v: u8) -> Option<WireKind> {
        Some(match v {
            1 => WireKind::Request,
            2 => WireKind::Response,
            3 => WireKind::Cancel,
            4 => WireKind::Reject,
            _ => return None,
        })
    }
}

/// One kgni datagram message (our layout, little endian):
///
/// | bytes | field |
/// |---|---|
/// | 0..2 | magic `0x4467` |
/// | 2 | version 1 |
/// | 3 | kind |
/// | 4 | ptag |
/// | 5 | reserved 0 |
/// | 6..8 | payload length (≤ 128) |
/// | 8..12 | cookie |
/// | 12..16 | source PE |
/// | 16..20 | source inst_id |
/// | 20..24 | destination inst_id |
/// | 24..32 | sequence (`Request`/`Cancel`: the sender's post; `Response`/`Reject`: the requester's) |
/// | 32..40 | consumed (`Response`: the responder's crossing request, 0 = none) |
/// | 40..48 | reserved 0 |
/// | 48.. | payload |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    /// Message kind.
    pub kind: WireKind,
    /// Domain of the posts involved.
    pub domain: Domain,
    /// Sender's physical PE.
    pub src_pe: u32,
    /// Sender's instance.
    pub src_inst: u32,
    /// Addressed instance.
    pub dst_inst: u32,
    /// Sequence number, see the table.
    pub seq: u64,
    /// The responder's own request consumed by this exchange (0 = none).
    pub consumed: u64,
    /// Payload (≤ 128 bytes).
    pub data: Vec<u8>,
}

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Shorter than its header or its payload length.
    #[error("datagram message of {0} bytes is truncated")]
    Short(usize),
    /// Not a kgni datagram message (magic or version).
    #[error("not a datagram message (magic {magic:#x}, version {version})")]
    Foreign {
        /// Magic found.
        magic: u16,
        /// Version found.
        version: u8,
    },
    /// Unknown kind.
    #[error("unknown datagram message kind {0}")]
    Kind(u8),
    /// Payload length above 128.
    #[error("datagram payload of {0} bytes exceeds 128")]
    TooLong(usize),
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn le64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

impl Wire {
    /// The message bytes (header + payload; a payload over 128 bytes is cut to 128).
    pub fn encode(&self) -> Vec<u8> {
        let n = self.data.len().min(MAX_PAYLOAD);
        let mut b = vec![0u8; WIRE_HEADER + n];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.kind as u8;
        b[4] = self.domain.ptag;
        b[6..8].copy_from_slice(&(n as u16).to_le_bytes());
        b[8..12].copy_from_slice(&self.domain.cookie.to_le_bytes());
        b[12..16].copy_from_slice(&self.src_pe.to_le_bytes());
        b[16..20].copy_from_slice(&self.src_inst.to_le_bytes());
        b[20..24].copy_from_slice(&self.dst_inst.to_le_bytes());
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.consumed.to_le_bytes());
        b[WIRE_HEADER..].copy_from_slice(&self.data[..n]);
        b
    }

    /// Decode a message; bytes past the payload are ignored (an RX buffer is larger).
    pub fn decode(b: &[u8]) -> Result<Wire, WireError> {
        if b.len() < WIRE_HEADER {
            return Err(WireError::Short(b.len()));
        }
        let magic = u16::from_le_bytes([b[0], b[1]]);
        if magic != MAGIC || b[2] != VERSION {
            return Err(WireError::Foreign {
                magic,
                version: b[2],
            });
        }
        let kind = WireKind::from_u8(b[3]).ok_or(WireError::Kind(b[3]))?;
        let n = usize::from(u16::from_le_bytes([b[6], b[7]]));
        if n > MAX_PAYLOAD {
            return Err(WireError::TooLong(n));
        }
        let data = b
            .get(WIRE_HEADER..WIRE_HEADER + n)
            .ok_or(WireError::Short(b.len()))?
            .to_vec();
        Ok(Wire {
            kind,
            domain: Domain {
                ptag: b[4],
                cookie: le32(b, 8),
            },
            src_pe: le32(b, 12),
            src_inst: le32(b, 16),
            dst_inst: le32(b, 20),
            seq: le64(b, 24),
            consumed: le64(b, 32),
            data,
        })
    }
}
