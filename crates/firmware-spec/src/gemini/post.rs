//! The post descriptor (`gni_post_descriptor_t`), field for field in the order of the
//! public header (`gni_pub.h`, Lustre copy, 0x5c), with typed codes, its C image on x86-64
//! (for a C shim) and the argument checks `GNI_PostFma` / `GNI_PostRdma` document.

use super::amo::{AmoCmd, AmoError};
use super::gni::{CdmMode, CqEventMode, DlvrMode, PostType, RdmaMode, ReturnCode};
use super::layout::FormatError;
use super::limits;
use super::mdd::MemHandle;

/// `gni_post_descriptor_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PostDescriptor {
    /// Control: next descriptor (library list link; CT chaining). Opaque pointer value.
    pub next_descr: u64,
    /// Control: previous descriptor. Opaque pointer value.
    pub prev_descr: u64,
    /// User id of the transaction.
    pub post_id: u64,
    /// Error status of the transaction.
    pub status: u64,
    /// Completion flags.
    pub cq_mode_complete: u16,
    /// Transaction type.
    pub post_type: PostType,
    /// Which CQ events to generate.
    pub cq_mode: CqEventMode,
    /// Delivery (routing) mode.
    pub dlvr_mode: DlvrMode,
    /// Local address: source for PUT, target for GET and fetched AMO results.
    pub local_addr: u64,
    /// Local memory handle.
    pub local_mem_hndl: MemHandle,
    /// Remote address: target for PUT, source for GET.
    pub remote_addr: u64,
    /// Remote memory handle (selects the remote MDD and its `dst_cq`).
    pub remote_mem_hndl: MemHandle,
    /// Bytes to move.
    pub length: u64,
    /// RDMA modes.
    pub rdma_mode: RdmaMode,
    /// Source CQ for RDMA posts (opaque handle value; 0 = the endpoint's CQ).
    pub src_cq_hndl: u64,
    /// FMA_PUT_W_SYNCFLAG: value written after the data.
    pub sync_flag_value: u64,
    /// FMA_PUT_W_SYNCFLAG: where it is written.
    pub sync_flag_addr: u64,
    /// AMO command (raw `gni_fma_cmd_type_t`; see [`PostDescriptor::amo`]).
    pub amo_cmd: u32,
    /// AMO first operand (compare value for CSWAP).
    pub first_operand: u64,
    /// AMO second operand (swap value for CSWAP).
    pub second_operand: u64,
    /// CQ-write value; the low 48 bits are delivered.
    pub cqwrite_value: u64,
    /// CE command (Aries).
    pub ce_cmd: u32,
    /// CE modes (Aries).
    pub ce_mode: u32,
    /// CE reduction id (Aries).
    pub ce_red_id: u64,
}

impl PostDescriptor {
    /// A descriptor of `post_type` with every other field zero / empty.
    pub fn new(post_type: PostType) -> PostDescriptor {
        PostDescriptor {
            next_descr: 0,
            prev_descr: 0,
            post_id: 0,
            status: 0,
            cq_mode_complete: 0,
            post_type,
            cq_mode: CqEventMode::SILENT,
            dlvr_mode: DlvrMode::PERFORMANCE,
            local_addr: 0,
            local_mem_hndl: MemHandle::default(),
            remote_addr: 0,
            remote_mem_hndl: MemHandle::default(),
            length: 0,
            rdma_mode: RdmaMode::empty(),
            src_cq_hndl: 0,
            sync_flag_value: 0,
            sync_flag_addr: 0,
            amo_cmd: 0,
            first_operand: 0,
            second_operand: 0,
            cqwrite_value: 0,
            ce_cmd: 0,
            ce_mode: 0,
            ce_red_id: 0,
        }
    }

    /// The AMO command, checked for Gemini.
    pub fn amo(&self) -> Result<AmoCmd, AmoError> {
        AmoCmd::decode(self.amo_cmd)
    }

    /// The CQ-write payload that reaches software (low 48 bits).
    pub const fn cqwrite_payload(&self) -> u64 {
        self.cqwrite_value & ((1 << limits::CQ_WRITE_DATA_BITS) - 1)
    }

    /// The return code a Gemini `GNI_PostFma` / `GNI_PostRdma` gives for this descriptor
    /// before touching the network (our reading of the documented returns):
    /// - a type posted through the wrong call, or CE on Gemini: `IllegalOp`;
    /// - LOCAL and GLOBAL events together without `DUAL_EVENTS`: `InvalidParam`;
    /// - zero-length GET or AMO, RDMA longer than the BTE limit, an unknown or Aries AMO:
    ///   `InvalidParam`;
    /// - GET with local address, remote address or length not a multiple of 4, AMO target
    ///   not 8-byte aligned: `AlignmentError`.
    pub fn check(&self, rdma: bool, cdm: CdmMode) -> ReturnCode {
        let t = self.post_type;
        if t == PostType::Ce || rdma != t.is_rdma() {
            return ReturnCode::IllegalOp;
        }
        if self.cq_mode.contains(CqEventMode::DUAL_EVENTS) && !cdm.contains(CdmMode::DUAL_EVENTS) {
            return ReturnCode::InvalidParam;
        }
        if (t.is_get() || t.is_amo()) && self.length == 0 {
            return ReturnCode::InvalidParam;
        }
        if rdma && self.length > limits::BTE_MAX_LENGTH {
            return ReturnCode::InvalidParam;
        }
        if t.is_get() && !limits::get_is_aligned(self.local_addr, self.remote_addr, self.length) {
            return ReturnCode::AlignmentError;
        }
        if t.is_amo() {
            if self.amo().is_err() {
                return ReturnCode::InvalidParam;
            }
            if !limits::amo_is_aligned(self.remote_addr) {
                return ReturnCode::AlignmentError;
            }
        }
        ReturnCode::Success
    }
}

/// One field of the C image: `(name, byte offset, size)`.
pub type CField = (&'static str, usize, usize);

/// Byte layout of `gni_post_descriptor_t` under the x86-64 SysV ABI (pointers 8 bytes,
/// enums 4 bytes, natural alignment), derived from the header's field order.
pub const C_LAYOUT: &[CField] = &[
    ("next_descr", 0, 8),
    ("prev_descr", 8, 8),
    ("post_id", 16, 8),
    ("status", 24, 8),
    ("cq_mode_complete", 32, 2),
    ("type", 36, 4),
    ("cq_mode", 40, 2),
    ("dlvr_mode", 42, 2),
    ("local_addr", 48, 8),
    ("local_mem_hndl", 56, 16),
    ("remote_addr", 72, 8),
    ("remote_mem_hndl", 80, 16),
    ("length", 96, 8),
    ("rdma_mode", 104, 2),
    ("src_cq_hndl", 112, 8),
    ("sync_flag_value", 120, 8),
    ("sync_flag_addr", 128, 8),
    ("amo_cmd", 136, 4),
    ("first_operand", 144, 8),
    ("second_operand", 152, 8),
    ("cqwrite_value", 160, 8),
    ("ce_cmd", 168, 4),
    ("ce_mode", 172, 4),
    ("ce_red_id", 176, 8),
];

/// `sizeof(gni_post_descriptor_t)` on x86-64.
pub const C_SIZE: usize = 184;

fn put(buf: &mut [u8], off: usize, bytes: &[u8]) {
    buf[off..off + bytes.len()].copy_from_slice(bytes);
}

fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

impl PostDescriptor {
    /// The C image (padding bytes 0).
    pub fn to_c_bytes(&self) -> [u8; C_SIZE] {
        let mut b = [0u8; C_SIZE];
        put(&mut b, 0, &self.next_descr.to_le_bytes());
        put(&mut b, 8, &self.prev_descr.to_le_bytes());
        put(&mut b, 16, &self.post_id.to_le_bytes());
        put(&mut b, 24, &self.status.to_le_bytes());
        put(&mut b, 32, &self.cq_mode_complete.to_le_bytes());
        put(&mut b, 36, &self.post_type.code().to_le_bytes());
        put(&mut b, 40, &self.cq_mode.bits().to_le_bytes());
        put(&mut b, 42, &self.dlvr_mode.bits().to_le_bytes());
        put(&mut b, 48, &self.local_addr.to_le_bytes());
        put(&mut b, 56, &self.local_mem_hndl.to_bytes());
        put(&mut b, 72, &self.remote_addr.to_le_bytes());
        put(&mut b, 80, &self.remote_mem_hndl.to_bytes());
        put(&mut b, 96, &self.length.to_le_bytes());
        put(&mut b, 104, &self.rdma_mode.bits().to_le_bytes());
        put(&mut b, 112, &self.src_cq_hndl.to_le_bytes());
        put(&mut b, 120, &self.sync_flag_value.to_le_bytes());
        put(&mut b, 128, &self.sync_flag_addr.to_le_bytes());
        put(&mut b, 136, &self.amo_cmd.to_le_bytes());
        put(&mut b, 144, &self.first_operand.to_le_bytes());
        put(&mut b, 152, &self.second_operand.to_le_bytes());
        put(&mut b, 160, &self.cqwrite_value.to_le_bytes());
        put(&mut b, 168, &self.ce_cmd.to_le_bytes());
        put(&mut b, 172, &self.ce_mode.to_le_bytes());
        put(&mut b, 176, &self.ce_red_id.to_le_bytes());
        b
    }

    /// Decode a C image; unknown type, cq_mode, dlvr_mode or rdma_mode values are errors.
    /// The AMO command stays raw (checked by [`PostDescriptor::amo`] / [`check`](Self::check)).
    pub fn from_c_bytes(b: &[u8]) -> Result<PostDescriptor, FormatError> {
        if b.len() < C_SIZE {
            return Err(FormatError::Short {
                format: "PostDescriptor",
                need: C_SIZE,
                got: b.len(),
            });
        }
        let invalid = |field: &'static str, value: u64| FormatError::Invalid {
            format: "PostDescriptor",
            field,
            value,
        };
        let t = get_u32(b, 36);
        let post_type = PostType::try_from(t).map_err(|_| invalid("type", t as u64))?;
        let cq = get_u16(b, 40);
        let cq_mode = CqEventMode::from_bits(cq).map_err(|_| invalid("cq_mode", cq as u64))?;
        let dl = get_u16(b, 42);
        let dlvr_mode = DlvrMode::from_bits(dl).map_err(|_| invalid("dlvr_mode", dl as u64))?;
        let rm = get_u16(b, 104);
        let rdma_mode = RdmaMode::from_bits(rm).map_err(|_| invalid("rdma_mode", rm as u64))?;
        Ok(PostDescriptor {
            next_descr: get_u64(b, 0),
            prev_descr: get_u64(b, 8),
            post_id: get_u64(b, 16),
            status: get_u64(b, 24),
            cq_mode_complete: get_u16(b, 32),
            post_type,
            cq_mode,
            dlvr_mode,
            local_addr: get_u64(b, 48),
            local_mem_hndl: MemHandle::from_bytes(&b[56..72])?,
            remote_addr: get_u64(b, 72),
            remote_mem_hndl: MemHandle::from_bytes(&b[80..96])?,
            length: get_u64(b, 96),
            rdma_mode,
            src_cq_hndl: get_u64(b, 112),
            sync_flag_value: get_u64(b, 120),
            sync_flag_addr: get_u64(b, 128),
            amo_cmd: get_u32(b, 136),
            first_operand: get_u64(b, 144),
            second_operand: get_u64(b, 152),
            cqwrite_value: get_u64(b, 160),
            ce_cmd: get_u32(b, 168),
            ce_mode: get_u32(b, 172),
            ce_red_id: get_u64(b, 176),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_layout_is_packed_in_order() {
        let mut end = 0;
        for (name, off, size) in C_LAYOUT {
            assert!(*off >= end, "{name}");
            assert_eq!(off % size.min(&8), 0, "{name} misaligned");
            end = off + size;
        }
        assert_eq!(end, C_SIZE);
    }

    #[test]
    fn checks() {
        let cdm = CdmMode::empty();
        let mut d = PostDescriptor::new(PostType::FmaGet);
        d.length = 8;
        d.local_addr = 0x1000;
        d.remote_addr = 0x2000;
        assert_eq!(d.check(false, cdm), ReturnCode::Success);
        assert_eq!(d.check(true, cdm), ReturnCode::IllegalOp);
        d.remote_addr = 0x2002;
        assert_eq!(d.check(false, cdm), ReturnCode::AlignmentError);
        d.remote_addr = 0x2000;
        d.length = 0;
        assert_eq!(d.check(false, cdm), ReturnCode::InvalidParam);
        d.length = 8;
        d.cq_mode = CqEventMode::DUAL_EVENTS;
        assert_eq!(d.check(false, cdm), ReturnCode::InvalidParam);
        assert_eq!(d.check(false, CdmMode::DUAL_EVENTS), ReturnCode::Success);

        let mut a = PostDescriptor::new(PostType::Amo);
        a.length = 8;
        a.remote_addr = 0x10;
        a.amo_cmd = AmoCmd::Fadd.code();
        assert_eq!(a.check(false, cdm), ReturnCode::Success);
        a.remote_addr = 0x14;
        assert_eq!(a.check(false, cdm), ReturnCode::AlignmentError);
        a.remote_addr = 0x10;
        a.amo_cmd = 0x055; // Aries FIADD
        assert_eq!(a.check(false, cdm), ReturnCode::InvalidParam);
        // PUTs have no alignment rule.
        let mut p = PostDescriptor::new(PostType::RdmaPut);
        p.local_addr = 3;
        p.remote_addr = 5;
        p.length = 7;
        assert_eq!(p.check(true, cdm), ReturnCode::Success);
        assert_eq!(
            PostDescriptor::new(PostType::Ce).check(false, cdm),
            ReturnCode::IllegalOp
        );
    }

    #[test]
    fn c_image_errors() {
        let d = PostDescriptor::new(PostType::CqWrite);
        let mut b = d.to_c_bytes();
        assert_eq!(PostDescriptor::from_c_bytes(&b).unwrap(), d);
        b[36] = 11;
        assert!(matches!(
            PostDescriptor::from_c_bytes(&b),
            Err(FormatError::Invalid {
                field: "type",
                value: 11,
                ..
            })
        ));
        assert!(matches!(
            PostDescriptor::from_c_bytes(&b[..100]),
            Err(FormatError::Short { .. })
        ));
    }
}
