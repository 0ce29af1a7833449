//! uGNI numeric codes, with the values of the public header `gni_pub.h` (GPL-2, Cray 2007;
//! the Lustre copy, GNI_MINOR_REV 0x5c, unless an item says otherwise).

use super::codes::{code_enum, flag_set};

/// `GNI_MAJOR_REV` of the emulated API.
pub const MAJOR_REV: u32 = 0x00;
/// `GNI_MINOR_REV` of the emulated API (the Lustre copy of `gni_pub.h`).
pub const MINOR_REV: u32 = 0x5c;
/// `GNI_CODE_REV` of the emulated library.
pub const CODE_REV: u32 = 0x0000;

/// `GNI_VERSION_CHECK(maj, min, code)` = `maj << 24 | min << 16 | code`.
pub const fn version(major: u32, minor: u32, code: u32) -> u32 {
    (major << 24) | (minor << 16) | code
}

/// `GNI_VERSION` of the emulated API.
pub const VERSION: u32 = version(MAJOR_REV, MINOR_REV, CODE_REV);
/// `GNI_VERSION_FMA_SHARING`.
pub const VERSION_FMA_SHARING: u32 = 0x5b0000;
/// `GNI_VERSION_FMA_CHAIN_TRANSACTIONS` (SST copy, 0x61).
pub const VERSION_FMA_CHAIN_TRANSACTIONS: u32 = 0x5d0000;
/// `GNI_VERSION_CDM_HOLD_RELEASE` (SST copy, 0x61).
pub const VERSION_CDM_HOLD_RELEASE: u32 = 0x600000;
/// `GNI_VERSION_CE_FPADD_RELEASE` (SST copy, 0x61).
pub const VERSION_CE_FPADD_RELEASE: u32 = 0x610000;

/// `GNI_GET_MAJOR`.
pub const fn version_major(v: u32) -> u32 {
    (v >> 24) & 0xFF
}
/// `GNI_GET_MINOR`.
pub const fn version_minor(v: u32) -> u32 {
    (v >> 16) & 0xFF
}
/// `GNI_GET_REV`.
pub const fn version_rev(v: u32) -> u32 {
    v & 0xFFFF
}

code_enum! {
    /// `gni_return_t`.
    pub enum ReturnCode: u32 {
        /// `GNI_RC_SUCCESS`
        Success = 0,
        /// `GNI_RC_NOT_DONE`
        NotDone = 1,
        /// `GNI_RC_INVALID_PARAM`
        InvalidParam = 2,
        /// `GNI_RC_ERROR_RESOURCE`
        ErrorResource = 3,
        /// `GNI_RC_TIMEOUT`
        Timeout = 4,
        /// `GNI_RC_PERMISSION_ERROR`
        PermissionError = 5,
        /// `GNI_RC_DESCRIPTOR_ERROR`
        DescriptorError = 6,
        /// `GNI_RC_ALIGNMENT_ERROR`
        AlignmentError = 7,
        /// `GNI_RC_INVALID_STATE`
        InvalidState = 8,
        /// `GNI_RC_NO_MATCH`
        NoMatch = 9,
        /// `GNI_RC_SIZE_ERROR`
        SizeError = 10,
        /// `GNI_RC_TRANSACTION_ERROR`
        TransactionError = 11,
        /// `GNI_RC_ILLEGAL_OP`
        IllegalOp = 12,
        /// `GNI_RC_ERROR_NOMEM`
        ErrorNomem = 13,
    }
}

impl ReturnCode {
    /// The C name, as `gni_err_str[]` is indexed by the code.
    pub const fn name(self) -> &'static str {
        match self {
            ReturnCode::Success => "GNI_RC_SUCCESS",
            ReturnCode::NotDone => "GNI_RC_NOT_DONE",
            ReturnCode::InvalidParam => "GNI_RC_INVALID_PARAM",
            ReturnCode::ErrorResource => "GNI_RC_ERROR_RESOURCE",
            ReturnCode::Timeout => "GNI_RC_TIMEOUT",
            ReturnCode::PermissionError => "GNI_RC_PERMISSION_ERROR",
            ReturnCode::DescriptorError => "GNI_RC_DESCRIPTOR_ERROR",
            ReturnCode::AlignmentError => "GNI_RC_ALIGNMENT_ERROR",
            ReturnCode::InvalidState => "GNI_RC_INVALID_STATE",
            ReturnCode::NoMatch => "GNI_RC_NO_MATCH",
            ReturnCode::SizeError => "GNI_RC_SIZE_ERROR",
            ReturnCode::TransactionError => "GNI_RC_TRANSACTION_ERROR",
            ReturnCode::IllegalOp => "GNI_RC_ILLEGAL_OP",
            ReturnCode::ErrorNomem => "GNI_RC_ERROR_NOMEM",
        }
    }

    /// Whether this is `GNI_RC_SUCCESS`.
    pub const fn is_success(self) -> bool {
        matches!(self, ReturnCode::Success)
    }
}

impl core::fmt::Display for ReturnCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Reserved protection tags (`GNI_PTAG_*`).
pub mod ptag {
    /// `GNI_PTAG_LND`
    pub const LND: u8 = 1;
    /// `GNI_PTAG_OFED`
    pub const OFED: u8 = 2;
    /// `GNI_PTAG_USER_START`: first user ptag.
    pub const USER_START: u8 = 3;
    /// `GNI_PTAG_LND_KNC`
    pub const LND_KNC: u8 = 128;
    /// `GNI_PTAG_USER_END`: last user ptag.
    pub const USER_END: u8 = 253;
    /// `GNI_PTAG_HSNBOOT`
    pub const HSNBOOT: u8 = 254;
    /// `GNI_PTAG_MAX`
    pub const MAX: u8 = 254;
    /// `GNI_PTAG_LB`
    pub const LB: u8 = 255;
    /// `GNI_FIND_ALLOC_PTAG` (= `GNI_PTAG_LB`; the Aries way to get a ptag).
    pub const FIND_ALLOC: u8 = LB;
    /// Whether `p` is in the user range.
    pub const fn is_user(p: u8) -> bool {
        p >= USER_START && p <= USER_END
    }
}

/// Reserved protection keys (`GNI_PKEY_*`).
pub mod pkey {
    /// `GNI_PKEY_INVALID`
    pub const INVALID: u16 = 0;
    /// `GNI_PKEY_LND`
    pub const LND: u16 = 1;
    /// `GNI_PKEY_OFED`
    pub const OFED: u16 = 2;
    /// `GNI_PKEY_USER_START`
    pub const USER_START: u16 = 128;
    /// `GNI_PKEY_USER_END`
    pub const USER_END: u16 = 65407;
    /// `GNI_PKEY_HSNBOOT`
    pub const HSNBOOT: u16 = 65408;
    /// `GNI_PKEY_MAX`
    pub const MAX: u16 = 65534;
    /// `GNI_PKEY_LB`
    pub const LB: u16 = 65535;
}

/// `GNI_JOB_CREATE_COOKIE(pkey, cbps_mdd)` = `pkey << 16 | (cbps_mdd & 7) << 3`.
pub const fn job_create_cookie(pkey: u16, cbps_mdd: u32) -> u32 {
    ((pkey as u32) << 16) | ((cbps_mdd & 0x7) << 3)
}

/// `GNI_COOKIE_PKEY(cookie)`.
pub const fn cookie_pkey(cookie: u32) -> u16 {
    (cookie >> 16) as u16
}

flag_set! {
    /// `GNI_CDM_MODE_*` (argument `modes` of `GNI_CdmCreate`).
    pub struct CdmMode: u32 {
        /// `GNI_CDM_MODE_FORK_NOCOPY`
        const FORK_NOCOPY = 0x1;
        /// `GNI_CDM_MODE_FORK_FULLCOPY`
        const FORK_FULLCOPY = 0x2;
        /// `GNI_CDM_MODE_FORK_PARTCOPY` (the default)
        const FORK_PARTCOPY = 0x4;
        /// `GNI_CDM_MODE_ERR_NO_KILL`
        const ERR_NO_KILL = 0x8;
        /// `GNI_CDM_MODE_ERR_ALL_KILL`
        const ERR_ALL_KILL = 0x10;
        /// `GNI_CDM_MODE_FAST_DATAGRAM_POLL`
        const FAST_DATAGRAM_POLL = 0x20;
        /// `GNI_CDM_MODE_BTE_SINGLE_CHANNEL`
        const BTE_SINGLE_CHANNEL = 0x40;
        /// `GNI_CDM_MODE_USE_PCI_IOMMU`
        const USE_PCI_IOMMU = 0x80;
        /// `GNI_CDM_MODE_MDD_DEDICATED`
        const MDD_DEDICATED = 0x100;
        /// `GNI_CDM_MODE_MDD_SHARED`
        const MDD_SHARED = 0x200;
        /// `GNI_CDM_MODE_DUAL_EVENTS`
        const DUAL_EVENTS = 0x1000;
        /// `GNI_CDM_MODE_DLA_ENABLE_FORWARDING` (Aries)
        const DLA_ENABLE_FORWARDING = 0x4000;
        /// `GNI_CDM_MODE_DLA_DISABLE_FORWARDING` (Aries)
        const DLA_DISABLE_FORWARDING = 0x8000;
        /// `GNI_CDM_MODE_FMA_DEDICATED`
        const FMA_DEDICATED = 0x10000;
        /// `GNI_CDM_MODE_FMA_SHARED`
        const FMA_SHARED = 0x20000;
        /// `GNI_CDM_MODE_CACHED_AMO_ENABLED`
        const CACHED_AMO_ENABLED = 0x40000;
        /// `GNI_CDM_MODE_CQ_NIC_LOCAL_PLACEMENT`
        const CQ_NIC_LOCAL_PLACEMENT = 0x80000;
        /// `GNI_CDM_MODE_FLBTE_DISABLE`
        const FLBTE_DISABLE = 0x100000;
        /// `GNI_CDM_MODE_FMA_SMALL_WINDOW`
        const FMA_SMALL_WINDOW = 0x200000;
    }
}

impl CdmMode {
    /// `GNI_CDM_MODE_MASK`: bits an application may pass.
    pub const MASK: u32 = 0x0FFF_FFFF;
    /// `GNI_CDM_MODE_PRIV_MASK`: bits reserved for uGNI/DMAPP.
    pub const PRIV_MASK: u32 = 0xF000_0000;
}

code_enum! {
    /// `gni_post_state_t`: state of a datagram exchange.
    pub enum PostState: u32 {
        /// `GNI_POST_PENDING`
        Pending = 0,
        /// `GNI_POST_COMPLETED`
        Completed = 1,
        /// `GNI_POST_ERROR`
        Error = 2,
        /// `GNI_POST_TIMEOUT`
        Timeout = 3,
        /// `GNI_POST_TERMINATED`
        Terminated = 4,
        /// `GNI_POST_REMOTE_DATA`
        RemoteData = 5,
    }
}

flag_set! {
    /// `GNI_MEM_*` registration flags (argument `flags` of `GNI_MemRegister`).
    /// `GNI_MEM_READWRITE` is 0 (no flag).
    pub struct MemFlags: u32 {
        /// `GNI_MEM_READ_ONLY`
        const READ_ONLY = 0x1;
        /// `GNI_MEM_USE_VMDH`
        const USE_VMDH = 0x2;
        /// `GNI_MEM_USE_GART`
        const USE_GART = 0x4;
        /// `GNI_MEM_PHYS_CONT`
        const PHYS_CONT = 0x8;
        /// `GNI_MEM_PHYS_SEGMENTS`
        const PHYS_SEGMENTS = 0x10;
        /// `GNI_MEM_STRICT_PI_ORDERING`
        const STRICT_PI_ORDERING = 0x20;
        /// `GNI_MEM_PI_FLUSH`
        const PI_FLUSH = 0x40;
        /// `GNI_MEM_MDD_CLONE`
        const MDD_CLONE = 0x80;
        /// `GNI_MEM_RELAXED_PI_ORDERING`
        const RELAXED_PI_ORDERING = 0x100;
        /// `GNI_MEM_RESERVE_REGION`
        const RESERVE_REGION = 0x200;
        /// `GNI_MEM_UPDATE_REGION`
        const UPDATE_REGION = 0x400;
        /// `GNI_MEM_MDD_SHARED`
        const MDD_SHARED = 0x800;
        /// `GNI_MEM_MDD_DEDICATED`
        const MDD_DEDICATED = 0x1000;
        /// `GNI_MEM_CUDA`
        const CUDA = 0x0100_0000;
    }
}

impl MemFlags {
    /// `GNI_MEM_READWRITE`.
    pub const READWRITE: MemFlags = MemFlags(0);
}

flag_set! {
    /// `gni_cq_mode_t` (argument `mode` of `GNI_CqCreate`). `GNI_CQ_NOBLOCK` is 0.
    pub struct CqMode: u32 {
        /// `GNI_CQ_BLOCKING`
        const BLOCKING = 0x1;
        /// `GNI_CQ_EMULATED` (internal)
        const EMULATED = 0x2;
        /// `GNI_CQ_PHYS_PAGES`
        const PHYS_PAGES = 0x4;
        /// `GNI_CQ_UNMANAGED`
        const UNMANAGED = 0x8;
        /// `GNI_CQ_NOAUTOFILL` (SST copy of `gni_pub.h`, 0x61)
        const NOAUTOFILL = 0x10;
    }
}

impl CqMode {
    /// `GNI_CQ_NOBLOCK`.
    pub const NOBLOCK: CqMode = CqMode(0);
    /// `GNI_CQ_EMULATED_INVALID`: emulated CQs cannot block.
    pub const EMULATED_INVALID: CqMode = CqMode(0x3);
}

code_enum! {
    /// CQ event type (`GNI_CQ_EVENT_TYPE_*`, a 2-bit field of the CQE).
    pub enum CqEventType: u8 {
        /// `GNI_CQ_EVENT_TYPE_POST`
        Post = 0,
        /// `GNI_CQ_EVENT_TYPE_SMSG`
        Smsg = 1,
        /// `GNI_CQ_EVENT_TYPE_DMAPP`
        Dmapp = 2,
        /// `GNI_CQ_EVENT_TYPE_MSGQ`
        Msgq = 3,
    }
}

code_enum! {
    /// `gni_post_type_t`.
    pub enum PostType: u32 {
        /// `GNI_POST_RDMA_PUT`
        RdmaPut = 1,
        /// `GNI_POST_RDMA_GET`
        RdmaGet = 2,
        /// `GNI_POST_FMA_PUT`
        FmaPut = 3,
        /// `GNI_POST_FMA_PUT_W_SYNCFLAG`
        FmaPutWSyncflag = 4,
        /// `GNI_POST_FMA_GET`
        FmaGet = 5,
        /// `GNI_POST_AMO`
        Amo = 6,
        /// `GNI_POST_CQWRITE`
        CqWrite = 7,
        /// `GNI_POST_CE` (Aries collective engine)
        Ce = 8,
        /// `GNI_POST_FMA_GET_W_FLAG`
        FmaGetWFlag = 9,
        /// `GNI_POST_AMO_W_FLAG`
        AmoWFlag = 10,
    }
}

impl PostType {
    /// Whether the post goes through `GNI_PostRdma` (BTE).
    pub const fn is_rdma(self) -> bool {
        matches!(self, PostType::RdmaPut | PostType::RdmaGet)
    }

    /// Whether the post reads remote memory (and so falls under the Gemini GET alignment).
    pub const fn is_get(self) -> bool {
        matches!(
            self,
            PostType::RdmaGet | PostType::FmaGet | PostType::FmaGetWFlag
        )
    }

    /// Whether the post is an AMO.
    pub const fn is_amo(self) -> bool {
        matches!(self, PostType::Amo | PostType::AmoWFlag)
    }
}

flag_set! {
    /// `GNI_CQMODE_*`: which CQ events a post generates (field `cq_mode`).
    /// `GNI_CQMODE_SILENT` is 0.
    pub struct CqEventMode: u16 {
        /// `GNI_CQMODE_LOCAL_EVENT`: the request has left.
        const LOCAL_EVENT = 0x1;
        /// `GNI_CQMODE_GLOBAL_EVENT`: delivered or acknowledged.
        const GLOBAL_EVENT = 0x2;
        /// `GNI_CQMODE_REMOTE_EVENT`: an event at the target's `dst_cq`.
        const REMOTE_EVENT = 0x4;
    }
}

impl CqEventMode {
    /// `GNI_CQMODE_SILENT`.
    pub const SILENT: CqEventMode = CqEventMode(0);
    /// `GNI_CQMODE_DUAL_EVENTS` = LOCAL | GLOBAL.
    pub const DUAL_EVENTS: CqEventMode = CqEventMode(0x3);
}

flag_set! {
    /// `GNI_DLVMODE_*` (field `dlvr_mode`). `GNI_DLVMODE_PERFORMANCE` is 0 (adaptive).
    pub struct DlvrMode: u16 {
        /// `GNI_DLVMODE_NO_ADAPT`
        const NO_ADAPT = 0x1;
        /// `GNI_DLVMODE_NO_HASH`
        const NO_HASH = 0x2;
        /// `GNI_DLVMODE_NO_RADAPT`
        const NO_RADAPT = 0x4;
        /// `GNI_DLVMODE_NMIN_HASH` (Aries)
        const NMIN_HASH = 0x8;
        /// `GNI_DLVMODE_MIN_HASH` (Aries)
        const MIN_HASH = 0x10;
        /// `GNI_DLVMODE_ADAPTIVE1` (Aries)
        const ADAPTIVE1 = 0x20;
        /// `GNI_DLVMODE_ADAPTIVE2` (Aries)
        const ADAPTIVE2 = 0x40;
        /// `GNI_DLVMODE_ADAPTIVE3` (Aries)
        const ADAPTIVE3 = 0x80;
        /// `GNI_DLVMODE_ORDERED_TAIL`
        const ORDERED_TAIL = 0x100;
    }
}

impl DlvrMode {
    /// `GNI_DLVMODE_PERFORMANCE` (adaptive routing; no order).
    pub const PERFORMANCE: DlvrMode = DlvrMode(0);
    /// `GNI_DLVMODE_IN_ORDER` = NO_ADAPT | NO_HASH.
    pub const IN_ORDER: DlvrMode = DlvrMode(0x3);

    /// Whether packets of one post may be reordered in the network (adaptive routing on).
    pub const fn may_reorder(self) -> bool {
        self.0 & Self::NO_ADAPT.0 == 0
    }
}

flag_set! {
    /// `GNI_RDMAMODE_*` (field `rdma_mode`).
    pub struct RdmaMode: u16 {
        /// `GNI_RDMAMODE_PHYS_ADDR` (kernel only)
        const PHYS_ADDR = 0x1;
        /// `GNI_RDMAMODE_FENCE`: wait for all responses of this and earlier posts first.
        const FENCE = 0x2;
        /// `GNI_RDMAMODE_GETWC_DIS` (Aries)
        const GETWC_DIS = 0x4;
    }
}

code_enum! {
    /// `gni_smsg_type_t`.
    pub enum SmsgType: u32 {
        /// `GNI_SMSG_TYPE_INVALID`
        Invalid = 0,
        /// `GNI_SMSG_TYPE_MBOX`
        Mbox = 1,
        /// `GNI_SMSG_TYPE_MBOX_AUTO_RETRANSMIT`
        MboxAutoRetransmit = 2,
    }
}

code_enum! {
    /// `gni_nic_device_t` (`GNI_GetDeviceType`).
    pub enum NicDevice: u32 {
        /// `GNI_DEVICE_GEMINI`
        Gemini = 0,
        /// `GNI_DEVICE_ARIES`
        Aries = 1,
        /// `GNI_DEVICE_PISCES`
        Pisces = 2,
    }
}

code_enum! {
    /// `gni_mem_handle_attr_t` (`GNI_MemHndlQueryAttr`).
    pub enum MemHandleAttr: u32 {
        /// `GNI_MEMHNDL_ATTR_READONLY`
        ReadOnly = 1,
        /// `GNI_MEMHNDL_ATTR_VMDH`
        Vmdh = 2,
        /// `GNI_MEMHNDL_ATTR_MRT`
        Mrt = 3,
        /// `GNI_MEMHNDL_ATTR_GART`
        Gart = 4,
        /// `GNI_MEMHNDL_ATTR_IOMMU`
        Iommu = 5,
        /// `GNI_MEMHNDL_ATTR_PCI_IOMMU`
        PciIommu = 6,
        /// `GNI_MEMHNDL_ATTR_CLONE`
        Clone = 7,
    }
}

code_enum! {
    /// `gni_dev_res_t` (`GNI_GetDevResInfo`).
    pub enum DevRes: u32 {
        /// `GNI_DEV_RES_MDD`
        Mdd = 1,
        /// `GNI_DEV_RES_MRT`
        Mrt = 2,
        /// `GNI_DEV_RES_CQ`
        Cq = 3,
        /// `GNI_DEV_RES_FMA`
        Fma = 4,
        /// `GNI_DEV_RES_CE` (Aries)
        Ce = 5,
        /// `GNI_DEV_RES_DLA` (Aries)
        Dla = 6,
    }
}

code_enum! {
    /// `gni_job_res_t` (`GNI_GetJobResInfo`).
    pub enum JobRes: u32 {
        /// `GNI_JOB_RES_MDD`
        Mdd = 1,
        /// `GNI_JOB_RES_MRT`
        Mrt = 2,
        /// `GNI_JOB_RES_IOMMU`
        Iommu = 3,
        /// `GNI_JOB_RES_GART`
        Gart = 4,
        /// `GNI_JOB_RES_CQ`
        Cq = 5,
        /// `GNI_JOB_RES_FMA`
        Fma = 6,
        /// `GNI_JOB_RES_RMDA` (sic in the header: RDMA)
        Rdma = 7,
        /// `GNI_JOB_RES_CE`
        Ce = 8,
        /// `GNI_JOB_RES_DLA`
        Dla = 9,
        /// `GNI_JOB_RES_SFMA`
        Sfma = 10,
    }
}

code_enum! {
    /// `gni_statistic_t` as built for Gemini (the Aries-only entries are absent).
    pub enum Statistic: u32 {
        /// `GNI_STAT_SMSG_BUFF_CREDITS_STALL`
        SmsgBuffCreditsStall = 0,
        /// `GNI_STAT_SMSG_DLA_STALL`
        SmsgDlaStall = 1,
        /// `GNI_STAT_SMSG_MBOX_CREDITS_STALL`
        SmsgMboxCreditsStall = 2,
        /// `GNI_STAT_SMSG_REQ_STALL`
        SmsgReqStall = 3,
        /// `GNI_STAT_SMSG_RETRANS_COUNT`
        SmsgRetransCount = 4,
        /// `GNI_STAT_SMSG_RETRANS_DLA_COUNT`
        SmsgRetransDlaCount = 5,
        /// `GNI_STAT_SMSG_RETRANS_STALL`
        SmsgRetransStall = 6,
    }
}

/// `GNI_NUM_STATS` on Gemini.
pub const NUM_STATS: u32 = 7;

flag_set! {
    /// `GNI_ERRMASK_*` error event categories (`gni_error_mask_t`).
    pub struct ErrMask: u8 {
        /// `GNI_ERRMASK_CORRECTABLE_MEMORY`
        const CORRECTABLE_MEMORY = 0x1;
        /// `GNI_ERRMASK_CRITICAL`
        const CRITICAL = 0x2;
        /// `GNI_ERRMASK_TRANSACTION`
        const TRANSACTION = 0x4;
        /// `GNI_ERRMASK_ADDRESS_TRANSLATION`
        const ADDRESS_TRANSLATION = 0x8;
        /// `GNI_ERRMASK_TRANSIENT`
        const TRANSIENT = 0x10;
        /// `GNI_ERRMASK_INFORMATIONAL`
        const INFORMATIONAL = 0x20;
        /// `GNI_ERRMASK_DIAG_ONLY`
        const DIAG_ONLY = 0x40;
        /// `GNI_ERRMASK_UNKNOWN_TRANSACTION`
        const UNKNOWN_TRANSACTION = 0x80;
    }
}

/// `GNI_JOB_INVALID_LIMIT`.
pub const JOB_INVALID_LIMIT: i32 = -1;
/// `GNI_JOB_CTRL_NTT_CLEANUP`.
pub const JOB_CTRL_NTT_CLEANUP: i32 = 0x01;
/// `GNI_MSGQ_MODE_BLOCKING`.
pub const MSGQ_MODE_BLOCKING: u8 = 0x01;

/// `gni_job_limits_t` as a Rust value (Gemini view of the unions: `mrt_limit`, `gart_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobLimits {
    /// MDDs for the ptag.
    pub mdd_limit: i32,
    /// MRT entries used by MDDs of the ptag.
    pub mrt_limit: i32,
    /// GART entries used by MDDs of the ptag.
    pub gart_limit: i32,
    /// FMA descriptors for the ptag.
    pub fma_limit: i32,
    /// Outstanding BTE descriptors with the ptag as source.
    pub bte_limit: i32,
    /// CQ descriptors for the ptag.
    pub cq_limit: i32,
    /// NTT control flags (`GNI_JOB_CTRL_NTT_*`).
    pub ntt_ctrl: i32,
    /// First NTT entry of the job.
    pub ntt_base: i32,
    /// NTT entries of the job.
    pub ntt_size: i32,
}

impl Default for JobLimits {
    /// Every limit `GNI_JOB_INVALID_LIMIT` (no limit), no NTT.
    fn default() -> Self {
        JobLimits {
            mdd_limit: JOB_INVALID_LIMIT,
            mrt_limit: JOB_INVALID_LIMIT,
            gart_limit: JOB_INVALID_LIMIT,
            fma_limit: JOB_INVALID_LIMIT,
            bte_limit: JOB_INVALID_LIMIT,
            cq_limit: JOB_INVALID_LIMIT,
            ntt_ctrl: 0,
            ntt_base: 0,
            ntt_size: 0,
        }
    }
}

/// `gni_error_event_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ErrorEvent {
    /// Error code.
    pub error_code: u16,
    /// Category (one `GNI_ERRMASK_*` bit).
    pub error_category: u8,
    /// Protection tag of the failing job.
    pub ptag: u8,
    /// Serial number.
    pub serial_number: u32,
    /// Timestamp.
    pub timestamp: u64,
    /// Raw MMR snapshots.
    pub info_mmrs: [u64; 4],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_codes_are_dense_and_named() {
        for (i, rc) in ReturnCode::ALL.iter().enumerate() {
            assert_eq!(rc.code(), i as u32);
            assert_eq!(ReturnCode::try_from(i as u32).unwrap(), *rc);
            assert!(rc.name().starts_with("GNI_RC_"));
        }
        assert!(ReturnCode::try_from(14).is_err());
    }

    #[test]
    fn flags_reject_unknown_bits() {
        assert!(CdmMode::from_bits(0x800).is_err());
        assert_eq!(
            CdmMode::from_bits(0x40000 | 0x8).unwrap(),
            CdmMode::CACHED_AMO_ENABLED | CdmMode::ERR_NO_KILL
        );
        assert_eq!(
            CqEventMode::DUAL_EVENTS,
            CqEventMode::LOCAL_EVENT | CqEventMode::GLOBAL_EVENT
        );
        assert_eq!(DlvrMode::IN_ORDER, DlvrMode::NO_ADAPT | DlvrMode::NO_HASH);
        assert!(DlvrMode::PERFORMANCE.may_reorder());
        assert!(!DlvrMode::IN_ORDER.may_reorder());
        assert_eq!(job_create_cookie(0x1234, 0xF), 0x1234_0038);
        assert_eq!(cookie_pkey(0x1234_0038), 0x1234);
        assert_eq!(VERSION, 0x005c_0000);
    }
}
