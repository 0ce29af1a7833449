//! Packets on the fabric. Every packet starts with a 20 B fabric header shaped after the public
//! `struct c_port_fab_hdr` (`cassini_user_defs.h`: ver 4, total length, VNI, source and
//! destination fabric addresses, big-endian multi-byte fields), followed by one of:
//!
//! * a request header shaped after `c_port_unrestricted_hdr` (43 B: opcode, packet type,
//!   index_ext, remote_offset, request_len, initiator, match_bits, header_data, and for a
//!   rendezvous put eager length, rendezvous id and `use_offset_for_get`);
//! * a small-message header shaped after `c_port_small_msg_hdr` (29 B; IDC small messages);
//! * an AMO descriptor (40 B, shaped after `c_port_amo_payload`) after the request header of
//!   an atomic;
//! * a continuation header shaped after `c_port_continuation_hdr` (13 B: offset, end of
//!   message, transfer length) for the 2nd..nth MTU segment of a request;
//! * a response header (16 B, our own layout: the public headers do not describe responses)
//!   for ACKs and Get replies.
//!
//! Our reading of the connection fields: the initiator's request handle (20 bits) travels in
//! `sct_idx` (low 12 bits) and `seq_num` (high 8 bits) of every request-side header; responses
//! echo it. `msg_id` is 0. The payload follows the header; a request carries at most
//! [`MTU`] bytes of it.

use emu_core::fabric::{Packet, PortId, TrafficClass};
use firmware_spec::cassini::limits::C_MAX_HPC_MTU;

/// Payload bytes per packet (`C_MAX_HPC_MTU`).
pub(crate) const MTU: usize = C_MAX_HPC_MTU;
/// `sizeof(struct c_port_fab_hdr)`.
pub(crate) const FAB_HDR: usize = 20;
/// `sizeof(struct c_port_unrestricted_hdr)`.
pub(crate) const UNRESTRICTED_HDR: usize = 43;
/// `sizeof(struct c_port_small_msg_hdr)`.
pub(crate) const SMALL_MSG_HDR: usize = 29;
/// `sizeof(struct c_port_continuation_hdr)`.
pub(crate) const CONTINUATION_HDR: usize = 13;
/// Our response header.
pub(crate) const RESPONSE_HDR: usize = 16;
/// Spare capacity of every frame buffer for the 20-byte tag the PCT appends (pct.rs), so
/// appending it does not reallocate.
pub(crate) const TAG_ROOM: usize = 20;
/// Room for every header of a frame (fabric, largest packet header, tag), to size a frame
/// buffer before the payload.
pub(crate) const FRAME_ROOM: usize = FAB_HDR + UNRESTRICTED_HDR + TAG_ROOM + AMO_PAYLOAD;

/// `enum c_port_v4_pkt_type` values.
const PKT_UNRESTRICTED: u8 = 0;
const PKT_SMALLMSG: u8 = 1;
const PKT_CONTINUATION: u8 = 2;
/// Response kinds (our values, in the opcode nibble of a packet with `req_not_rsp` = 0).
const RSP_ACK: u8 = 1;
const RSP_REPLY: u8 = 2;

/// Fabric header fields the model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Fab {
    pub(crate) vni: u16,
    /// Source fabric address (NID in bits 12..32).
    pub(crate) sfa: u32,
    /// Destination fabric address.
    pub(crate) dfa: u32,
}

/// A request (first packet of a message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Request {
    /// `c_dma_op` of the request (PUT, GET, SMALL_MESSAGE, NOMATCH_PUT, NOMATCH_GET).
    pub(crate) opcode: u8,
    pub(crate) index_ext: u8,
    pub(crate) remote_offset: u64,
    pub(crate) request_len: u32,
    pub(crate) initiator: u32,
    pub(crate) match_bits: u64,
    pub(crate) header_data: u64,
    /// Initiator request handle (20 bits).
    pub(crate) handle: u32,
    /// Sent as a small message (29 B header).
    pub(crate) small: bool,
    /// `restricted` packets (non-matching fast path); informational.
    pub(crate) restricted: bool,
    /// RENDEZVOUS_PUT: bytes carried by the put (`eg_len`, 20 bits).
    pub(crate) eager_length: u32,
    /// RENDEZVOUS_PUT: `rendezvous_id` (8 bits, split in `rendezvous_id_hi/low`).
    pub(crate) rendezvous_id: u8,
    /// RENDEZVOUS_PUT: `use_offset_for_get`.
    pub(crate) use_offset_for_get: bool,
}

/// A continuation packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Continuation {
    pub(crate) offset: u32,
    pub(crate) eom: bool,
    pub(crate) handle: u32,
}

/// Kind of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RspKind {
    Ack,
    Reply,
}

/// A response (ACK of a put, or one segment of a Get reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) kind: RspKind,
    /// `c_return_code` (6 bits).
    pub(crate) rc: u8,
    /// `c_ptl_list` the request matched (2 bits).
    pub(crate) ptl_list: u8,
    /// Offset of this reply segment's data in the Get.
    pub(crate) offset: u32,
    /// Last segment.
    pub(crate) eom: bool,
    pub(crate) handle: u32,
    /// Bytes delivered (ACK) or the Get's total matched length (REPLY).
    pub(crate) mlength: u32,
}

/// A parsed packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parsed<'a> {
    Request(Fab, Request, &'a [u8]),
    Continuation(Fab, Continuation, &'a [u8]),
    Response(Fab, Response, &'a [u8]),
}

/// Bytes of the AMO descriptor that follows the request header of an atomic (shaped after
/// `c_port_amo_payload`, 40 B: op, type, cswap op, then both 16-byte operands).
pub(crate) const AMO_PAYLOAD: usize = 40;

/// An AMO descriptor on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AmoPayload {
    pub(crate) op: u8,
    pub(crate) ty: u8,
    pub(crate) cswap: u8,
    pub(crate) op1: u128,
    pub(crate) op2: u128,
}

impl AmoPayload {
    /// Encode (operand words big-endian, word 1 first).
    pub(crate) fn encode(&self) -> [u8; AMO_PAYLOAD] {
        let mut b = [0u8; AMO_PAYLOAD];
        b[0] = self.op & 0xF;
        b[1] = self.ty & 0xF;
        b[2] = self.cswap & 7;
        b[8..16].copy_from_slice(&(self.op1 as u64).to_be_bytes());
        b[16..24].copy_from_slice(&((self.op1 >> 64) as u64).to_be_bytes());
        b[24..32].copy_from_slice(&(self.op2 as u64).to_be_bytes());
        b[32..40].copy_from_slice(&((self.op2 >> 64) as u64).to_be_bytes());
        b
    }

    /// Decode; `None` if `b` is too short.
    pub(crate) fn parse(b: &[u8]) -> Option<AmoPayload> {
        let b = b.get(..AMO_PAYLOAD)?;
        let w = |i: usize| u128::from(be64(&b[i..i + 8]));
        Some(AmoPayload {
            op: b[0] & 0xF,
            ty: b[1] & 0xF,
            cswap: b[2] & 7,
            op1: w(8) | (w(16) << 64),
            op2: w(24) | (w(32) << 64),
        })
    }
}

/// A packet for the fabric. The CRC is left for the fabric to seal when the packet is
/// injected (`Fabric::inject` computes it), so it is not computed twice.
pub(crate) fn packet(src: PortId, dst: PortId, tc: TrafficClass, data: Vec<u8>) -> Packet {
    Packet {
        src,
        dst,
        tc,
        data,
        crc: 0,
        train: None,
    }
}

fn put_fab(b: &mut Vec<u8>, fab: &Fab, total: usize) {
    b.push(0x40 | 5); // ver 4, ihl 5
    b.push(0);
    b.extend_from_slice(&(total.min(u16::MAX as usize) as u16).to_be_bytes());
    b.extend_from_slice(&fab.vni.to_be_bytes());
    b.extend_from_slice(&[0, 0, 64, 0, 0, 0]); // spt_idx, try, ttl, protocol, checksum
    b.extend_from_slice(&fab.sfa.to_be_bytes());
    b.extend_from_slice(&fab.dfa.to_be_bytes());
}

/// A fabric header alone, for frames the PCT builds itself (connection management).
pub(crate) fn fab_header(fab: &Fab, total: usize) -> [u8; FAB_HDR] {
    let mut b = Vec::with_capacity(FAB_HDR);
    put_fab(&mut b, fab, total);
    let mut out = [0u8; FAB_HDR];
    out.copy_from_slice(&b);
    out
}

fn pkt_type(opcode: u8, ty: u8, req: bool) -> u8 {
    (opcode & 0xF) | ((ty & 7) << 4) | (u8::from(req) << 7)
}

/// `sct_idx` (12 bits) and `seq_num` (8 of 12 bits) holding a handle.
fn split_handle(h: u32) -> (u16, u16) {
    ((h & 0xFFF) as u16, ((h >> 12) & 0xFF) as u16)
}

fn join_handle(sct: u16, seq: u16) -> u32 {
    u32::from(sct & 0xFFF) | (u32::from(seq & 0xFF) << 12)
}

/// Bytes 10..15 of the unrestricted / small-message / continuation headers: seq_num (12),
/// clr_seq_num (12, zero), sct_idx (12), then the low nibble of byte 14 (a 4-bit field of the
/// caller).
fn put_conn(b: &mut Vec<u8>, handle: u32, nibble: u8) {
    let (sct, seq) = split_handle(handle);
    b.push((seq >> 4) as u8);
    b.push(((seq & 0xF) as u8) << 4);
    b.push(0);
    b.push((sct >> 4) as u8);
    b.push((((sct & 0xF) as u8) << 4) | (nibble & 0xF));
}

fn get_conn(b: &[u8]) -> (u32, u8) {
    let seq = (u16::from(b[0]) << 4) | u16::from(b[1] >> 4);
    let sct = (u16::from(b[3]) << 4) | u16::from(b[4] >> 4);
    (join_handle(sct, seq), b[4] & 0xF)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Encode the headers of a request packet carrying `payload_len` bytes into a vector with room
/// for the payload, which the caller appends.
pub(crate) fn request(fab: &Fab, r: &Request, payload_len: usize) -> Vec<u8> {
    request_in(Vec::new(), fab, r, payload_len)
}

/// [`request`] built in `b` (emptied first), e.g. a recycled frame buffer.
pub(crate) fn request_in(mut b: Vec<u8>, fab: &Fab, r: &Request, payload_len: usize) -> Vec<u8> {
    let hdr = if r.small {
        SMALL_MSG_HDR
    } else {
        UNRESTRICTED_HDR
    };
    let total = FAB_HDR + hdr + payload_len;
    b.clear();
    b.reserve(total + TAG_ROOM);
    put_fab(&mut b, fab, total);
    let ty = if r.small {
        PKT_SMALLMSG
    } else {
        PKT_UNRESTRICTED
    };
    b.push(pkt_type(r.opcode, ty, true));
    b.push((r.index_ext & 0x1F) | (u8::from(r.restricted) << 5));
    if r.small {
        b.extend_from_slice(&r.header_data.to_be_bytes());
        let len = r.request_len.min(0xFFF);
        put_conn(&mut b, r.handle, (len >> 8) as u8);
        b.push(len as u8);
        b.extend_from_slice(&r.initiator.to_be_bytes());
        b.extend_from_slice(&r.match_bits.to_be_bytes());
        b.push(0);
    } else {
        b.extend_from_slice(&r.remote_offset.to_be_bytes()[1..]);
        b.push(0); // msg_id
        // Byte 14 low nibble: rendezvous_id_hi; byte 15: rendezvous_id_low (high nibble),
        // src_error, use_offset_for_get (c_port_unrestricted_hdr).
        put_conn(&mut b, r.handle, r.rendezvous_id >> 4);
        b.push(((r.rendezvous_id & 0xF) << 4) | (u8::from(r.use_offset_for_get) << 2));
        b.extend_from_slice(&r.request_len.to_be_bytes());
        b.extend_from_slice(&r.initiator.to_be_bytes());
        b.extend_from_slice(&r.match_bits.to_be_bytes());
        b.extend_from_slice(&r.header_data.to_be_bytes());
        // eg_len_hi, eg_len_mid, eg_len_low (high nibble): 20 bits.
        let eg = r.eager_length & 0xF_FFFF;
        b.extend_from_slice(&[(eg >> 12) as u8, (eg >> 4) as u8, ((eg & 0xF) << 4) as u8]);
    }
    b
}

/// Encode a continuation packet's headers (payload appended by the caller).
#[cfg(test)]
pub(crate) fn continuation(fab: &Fab, c: &Continuation, payload_len: usize) -> Vec<u8> {
    continuation_in(Vec::new(), fab, c, payload_len)
}

/// [`continuation`] built in `b` (emptied first), e.g. a recycled frame buffer.
pub(crate) fn continuation_in(
    mut b: Vec<u8>,
    fab: &Fab,
    c: &Continuation,
    payload_len: usize,
) -> Vec<u8> {
    let total = FAB_HDR + CONTINUATION_HDR + payload_len;
    b.clear();
    b.reserve(total + TAG_ROOM);
    put_fab(&mut b, fab, total);
    b.push(pkt_type(0, PKT_CONTINUATION, true));
    b.push(u8::from(c.eom) << 4);
    b.extend_from_slice(&c.offset.to_be_bytes());
    b.push(0); // msg_id
    let len = payload_len.min(0xFFF) as u16;
    put_conn(&mut b, c.handle, (len >> 8) as u8);
    b.push(len as u8);
    b
}

/// Encode a response packet's headers (reply data appended by the caller).
#[cfg(test)]
pub(crate) fn response(fab: &Fab, r: &Response, payload_len: usize) -> Vec<u8> {
    response_in(Vec::new(), fab, r, payload_len)
}

/// [`response`] built in `b` (emptied first), e.g. a recycled frame buffer.
pub(crate) fn response_in(mut b: Vec<u8>, fab: &Fab, r: &Response, payload_len: usize) -> Vec<u8> {
    let total = FAB_HDR + RESPONSE_HDR + payload_len;
    b.clear();
    b.reserve(total + TAG_ROOM);
    put_fab(&mut b, fab, total);
    let kind = match r.kind {
        RspKind::Ack => RSP_ACK,
        RspKind::Reply => RSP_REPLY,
    };
    b.push(pkt_type(kind, 0, false));
    b.push((r.rc & 0x3F) | ((r.ptl_list & 3) << 6));
    b.extend_from_slice(&r.offset.to_be_bytes());
    b.push(u8::from(r.eom));
    b.extend_from_slice(&r.handle.to_be_bytes()[1..]);
    b.extend_from_slice(&r.mlength.to_be_bytes());
    b.extend_from_slice(&(payload_len.min(u16::MAX as usize) as u16).to_be_bytes());
    b
}

/// Set the `eom` flag of a response built by [`response_in`] (a REPLY frame carrying a
/// train: whether the last frame it stands for ends the Get).
pub(crate) fn set_response_eom(b: &mut [u8], eom: bool) {
    if let Some(x) = b.get_mut(FAB_HDR + 6) {
        *x = u8::from(eom);
    }
}

/// Parse a packet; `None` if it is malformed (the receiver drops it).
pub(crate) fn parse(b: &[u8]) -> Option<Parsed<'_>> {
    if b.len() < FAB_HDR + 1 || b[0] >> 4 != 4 {
        return None;
    }
    let fab = Fab {
        vni: u16::from_be_bytes([b[4], b[5]]),
        sfa: be32(&b[12..16]),
        dfa: be32(&b[16..20]),
    };
    let h = &b[FAB_HDR..];
    let opcode = h[0] & 0xF;
    let ty = (h[0] >> 4) & 7;
    let req = h[0] & 0x80 != 0;
    if !req {
        if h.len() < RESPONSE_HDR {
            return None;
        }
        let kind = match opcode {
            RSP_ACK => RspKind::Ack,
            RSP_REPLY => RspKind::Reply,
            _ => return None,
        };
        let r = Response {
            kind,
            rc: h[1] & 0x3F,
            ptl_list: h[1] >> 6,
            offset: be32(&h[2..6]),
            eom: h[6] & 1 != 0,
            handle: u32::from_be_bytes([0, h[7], h[8], h[9]]),
            mlength: be32(&h[10..14]),
        };
        let n = usize::from(u16::from_be_bytes([h[14], h[15]]));
        let payload = h.get(RESPONSE_HDR..RESPONSE_HDR + n)?;
        return Some(Parsed::Response(fab, r, payload));
    }
    match ty {
        PKT_UNRESTRICTED => {
            let p = h.get(..UNRESTRICTED_HDR)?;
            let mut ro = [0u8; 8];
            ro[1..].copy_from_slice(&p[2..9]);
            let (handle, rid_hi) = get_conn(&p[10..15]);
            let r = Request {
                opcode,
                index_ext: p[1] & 0x1F,
                restricted: p[1] & 0x20 != 0,
                remote_offset: u64::from_be_bytes(ro),
                request_len: be32(&p[16..20]),
                initiator: be32(&p[20..24]),
                match_bits: be64(&p[24..32]),
                header_data: be64(&p[32..40]),
                handle,
                small: false,
                eager_length: (u32::from(p[40]) << 12)
                    | (u32::from(p[41]) << 4)
                    | u32::from(p[42] >> 4),
                rendezvous_id: (rid_hi << 4) | (p[15] >> 4),
                use_offset_for_get: p[15] & 0x4 != 0,
            };
            Some(Parsed::Request(fab, r, &h[UNRESTRICTED_HDR..]))
        }
        PKT_SMALLMSG => {
            let p = h.get(..SMALL_MSG_HDR)?;
            let (handle, hi) = get_conn(&p[10..15]);
            let r = Request {
                opcode,
                index_ext: p[1] & 0x1F,
                restricted: p[1] & 0x20 != 0,
                remote_offset: 0,
                request_len: (u32::from(hi) << 8) | u32::from(p[15]),
                initiator: be32(&p[16..20]),
                match_bits: be64(&p[20..28]),
                header_data: be64(&p[2..10]),
                handle,
                small: true,
                ..Request::default()
            };
            Some(Parsed::Request(fab, r, &h[SMALL_MSG_HDR..]))
        }
        PKT_CONTINUATION => {
            let p = h.get(..CONTINUATION_HDR)?;
            let (handle, _) = get_conn(&p[7..12]);
            let c = Continuation {
                offset: be32(&p[2..6]),
                eom: p[1] & 0x10 != 0,
                handle,
            };
            Some(Parsed::Continuation(fab, c, &h[CONTINUATION_HDR..]))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fab() -> Fab {
        Fab {
            vni: 0x1234,
            sfa: 5 << 12,
            dfa: (7 << 12) | 3,
        }
    }

    #[test]
    fn request_round_trip_and_sizes() {
        let r = Request {
            opcode: 1,
            index_ext: 17,
            remote_offset: 0x00AB_CDEF_0123_4567,
            request_len: 1 << 20,
            initiator: 0xDEAD_BEEF,
            match_bits: 0x0102_0304_0506_0708,
            header_data: 0x1122_3344_5566_7788,
            handle: 0xF_ABCD,
            small: false,
            restricted: false,
            eager_length: 0xA_BCDE,
            rendezvous_id: 0xC3,
            use_offset_for_get: true,
        };
        let mut b = request(&fab(), &r, 4);
        assert_eq!(b.len(), FAB_HDR + UNRESTRICTED_HDR);
        b.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(u16::from_be_bytes([b[2], b[3]]) as usize, b.len());
        match parse(&b) {
            Some(Parsed::Request(f, got, p)) => {
                assert_eq!(f, fab());
                assert_eq!(got, r);
                assert_eq!(p, &[1, 2, 3, 4]);
            }
            other => panic!("{other:?}"),
        }
        let s = Request {
            small: true,
            opcode: 7,
            request_len: 192,
            remote_offset: 0,
            eager_length: 0,
            rendezvous_id: 0,
            use_offset_for_get: false,
            ..r
        };
        let b = request(&fab(), &s, 0);
        assert_eq!(b.len(), FAB_HDR + SMALL_MSG_HDR);
        assert_eq!(parse(&b), Some(Parsed::Request(fab(), s, &[])));
    }

    #[test]
    fn continuation_and_response_round_trip() {
        let c = Continuation {
            offset: 0x12_3456,
            eom: true,
            handle: 0x8_0001,
        };
        let b = continuation(&fab(), &c, 0);
        assert_eq!(b.len(), FAB_HDR + CONTINUATION_HDR);
        assert_eq!(parse(&b), Some(Parsed::Continuation(fab(), c, &[])));
        let r = Response {
            kind: RspKind::Reply,
            rc: 36,
            ptl_list: 1,
            offset: 4096,
            eom: false,
            handle: 0xF_FFFF,
            mlength: 1 << 20,
        };
        let mut b = response(&fab(), &r, 3);
        b.extend_from_slice(&[9, 8, 7]);
        assert_eq!(parse(&b), Some(Parsed::Response(fab(), r, &[9, 8, 7])));
    }

    #[test]
    fn amo_payload_round_trip() {
        let a = AmoPayload {
            op: 11,
            ty: 12,
            cswap: 5,
            op1: 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210,
            op2: 42,
        };
        assert_eq!(AmoPayload::parse(&a.encode()), Some(a));
        assert_eq!(AmoPayload::parse(&[0; 39]), None);
    }

    #[test]
    fn malformed_packets_are_rejected() {
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[0x45; 10]), None);
        let mut b = request(&fab(), &Request::default(), 0);
        b.truncate(FAB_HDR + 10);
        assert_eq!(parse(&b), None);
        let mut b = response(
            &fab(),
            &Response {
                kind: RspKind::Ack,
                rc: 1,
                ptl_list: 0,
                offset: 0,
                eom: true,
                handle: 1,
                mlength: 8,
            },
            8,
        );
        b.extend_from_slice(&[0; 4]); // claims 8 bytes of data, carries 4
        assert_eq!(parse(&b), None);
    }
}
