//! The header every SMSG message of the gni transport starts with: what kind of message it is
//! (eager data, bounce-buffer eager, rendezvous request, clear-to-send, completion), whom it
//! is from, its match bits and length, and where the registered bytes live. A clear-to-send
//! and a put-done reuse `bits` for the offset of the chunk and `len` for its length.

use firmware_spec::gemini::mdd::MemHandle;

use crate::error::{Error, Result};

/// Message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// E0: the payload follows the header in the same SMSG message.
    Eager = 1,
    /// R0: request to send; the receiver GETs `len` bytes from (`va`, `mh`).
    Rts = 2,
    /// The receiver finished its GET of rendezvous `id`: the sender may release it.
    Fin = 3,
    /// A synchronous eager send `id` was matched.
    SyncAck = 4,
    /// E1: the payload waits in the sender's bounce buffer (`va`, `mh`); the receiver GETs it
    /// at once and answers FIN.
    EagerBounce = 5,
    /// Clear to send (Put Fallback, R1): PUT bytes `bits..bits + len` of send `id` to (`va`,
    /// `mh`).
    Cts = 6,
    /// The PUT of bytes `bits..bits + len` of send `id` is complete.
    PutDone = 7,
    /// R1: request to send `len` bytes by pipelined PUT; the receiver grants chunks by CTS.
    RtsPut = 8,
}

/// Bytes of the header on the wire.
pub(super) const HEADER_LEN: usize = 64;

/// The header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    pub kind: Kind,
    /// The sender wants an acknowledgement when the message is matched (MPI_Ssend).
    pub sync: bool,
    pub src: u32,
    pub bits: u64,
    pub len: u64,
    /// The sender's token (synchronous sends, rendezvous).
    pub id: u64,
    /// Rendezvous: the staged copy.
    pub va: u64,
    pub mh: MemHandle,
}

impl Header {
    pub(super) fn control(kind: Kind, src: u32, id: u64) -> Self {
        Header {
            kind,
            sync: false,
            src,
            bits: 0,
            len: 0,
            id,
            va: 0,
            mh: MemHandle::default(),
        }
    }

    pub(super) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.kind as u8;
        b[1] = u8::from(self.sync);
        b[4..8].copy_from_slice(&self.src.to_le_bytes());
        b[8..16].copy_from_slice(&self.bits.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.id.to_le_bytes());
        b[32..40].copy_from_slice(&self.va.to_le_bytes());
        b[40..56].copy_from_slice(&self.mh.to_bytes());
        b
    }

    pub(super) fn decode(b: &[u8]) -> Result<Self> {
        if b.len() < HEADER_LEN {
            return Err(Error::Transport(format!(
                "gni: a message header of {} bytes",
                b.len()
            )));
        }
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(x)
        };
        let kind = match b[0] {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Fin,
            4 => Kind::SyncAck,
            5 => Kind::EagerBounce,
            6 => Kind::Cts,
            7 => Kind::PutDone,
            8 => Kind::RtsPut,
            k => return Err(Error::Transport(format!("gni: unknown message kind {k}"))),
        };
        let mut src = [0u8; 4];
        src.copy_from_slice(&b[4..8]);
        Ok(Header {
            kind,
            sync: b[1] != 0,
            src: u32::from_le_bytes(src),
            bits: u64_at(8),
            len: u64_at(16),
            id: u64_at(24),
            va: u64_at(32),
            mh: MemHandle::from_bytes(&b[40..56])
                .map_err(|_| Error::Transport("gni: a bad memory handle".into()))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header {
            kind: Kind::Rts,
            sync: true,
            src: 7,
            bits: 0x1234_5678_9abc,
            len: 1 << 20,
            id: 42,
            va: 0x10_0000,
            mh: MemHandle {
                qword1: 3,
                qword2: 4,
            },
        };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
        for kind in [Kind::EagerBounce, Kind::Cts, Kind::PutDone, Kind::RtsPut] {
            let k = Header { kind, ..h };
            assert_eq!(Header::decode(&k.encode()).unwrap(), k);
        }
        assert!(Header::decode(&[9; HEADER_LEN]).is_err());
        assert!(Header::decode(&[1; 8]).is_err());
    }
}
