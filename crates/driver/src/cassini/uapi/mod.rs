//! The Cassini uAPI: what `libcxi` writes to `/dev/cxiN` (shs-cxi-driver
//! `include/uapi/ethernet/cxi-abi.h`, cassini.md §1.3), as an in-process ABI.
//!
//! - [`Opcode`]: `enum cxi_command_opcode` with its real positional numbering, obsolete slots
//!   kept.
//! - Request and response structs: `#[repr(C)]` images of the C structs on x86-64 (padding
//!   spelled out as `padN` fields, pointers as `u64`), checked for their exact C sizes. A
//!   request whose length is not its opcode's size is refused with `EINVAL`, as the driver's
//!   `dispatch()` does.
//! - The `resp` pointer slot of a request is kept for size fidelity but not followed: the
//!   response is copied into the caller's buffer ([`crate::cassini::Client::write`]).
//!   Other pointers in requests (`va`, `wb`, `queue`, `svc_list`, `ule_offsets`) are user
//!   virtual addresses ([`crate::mem::UserMemory::va`]).
//! - [`Errno`]: the errors the driver returns (`-errno`).
//!
//! Sizes were taken by compiling `cxi-abi.h` (shs-cxi-driver 9ce667e) with gcc on x86-64.

use thiserror::Error;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// An error number, as the driver returns `-errno` from `write()`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Error)]
#[repr(i32)]
pub enum Errno {
    /// Operation not permitted (admin-only op, VNI or service not allowed).
    #[error("EPERM: operation not permitted")]
    Eperm = 1,
    /// No such entry.
    #[error("ENOENT: no such entry")]
    Enoent = 2,
    /// I/O error: the device failed or is gone (reset, removed).
    #[error("EIO: device I/O error")]
    Eio = 5,
    /// Argument list too long (a CQ of more than `CXI_MAX_CQ_COUNT` commands).
    #[error("E2BIG: argument list too long")]
    E2big = 7,
    /// Bad handle.
    #[error("EBADF: bad handle")]
    Ebadf = 9,
    /// Try again (PtlTE drop count mismatch).
    #[error("EAGAIN: try again")]
    Eagain = 11,
    /// Out of host memory.
    #[error("ENOMEM: out of memory")]
    Enomem = 12,
    /// A user address is not mapped (or the response buffer is too small).
    #[error("EFAULT: bad address")]
    Efault = 14,
    /// The object is in use.
    #[error("EBUSY: resource busy")]
    Ebusy = 16,
    /// Already exists.
    #[error("EEXIST: already exists")]
    Eexist = 17,
    /// Invalid argument (bad length, unknown handle, bad field value).
    #[error("EINVAL: invalid argument")]
    Einval = 22,
    /// No space: a hardware resource is exhausted.
    #[error("ENOSPC: no space left")]
    Enospc = 28,
    /// A value too large for its type (ATU_MAP of a range that wraps the address space).
    #[error("EOVERFLOW: value too large")]
    Eoverflow = 75,
    /// Not supported by this driver.
    #[error("EOPNOTSUPP: operation not supported")]
    Eopnotsupp = 95,
    /// Already done (a second MAP_CSRS of one client).
    #[error("EALREADY: operation already in progress")]
    Ealready = 114,
    /// The key was revoked (LNI_ALLOC on a disabled service).
    #[error("EKEYREVOKED: key has been revoked")]
    Ekeyrevoked = 128,
}

impl Errno {
    /// The positive errno value (`EINVAL` = 22).
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// Declare `enum cxi_command_opcode`.
macro_rules! opcodes {
    ($( $(#[$m:meta])* $var:ident = $val:literal => $name:literal, )+) => {
        /// `enum cxi_command_opcode` (cxi-abi.h), positional: obsolete slots keep their numbers.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum Opcode {
            $( $(#[$m])* $var = $val, )+
        }

        impl Opcode {
            /// Every opcode below `CXI_OP_MAX`, in order.
            pub const ALL: &'static [Opcode] = &[ $( Opcode::$var, )+ ];

            /// The opcode with number `v`, if below `CXI_OP_MAX`.
            pub fn from_u32(v: u32) -> Option<Opcode> {
                match v {
                    $( $val => Some(Opcode::$var), )+
                    _ => None,
                }
            }

            /// The C name without `CXI_OP_` (obsolete ones without `_OBSOLETED_CXI_OP_`).
            pub fn name(self) -> &'static str {
                match self {
                    $( Opcode::$var => $name, )+
                }
            }
        }
    };
}

opcodes! {
        /// `CXI_OP_INVALID`.
        Invalid = 0 => "INVALID",
        /// `CXI_OP_LNI_ALLOC`.
        LniAlloc = 1 => "LNI_ALLOC",
        /// `CXI_OP_LNI_FREE`.
        LniFree = 2 => "LNI_FREE",
        /// `CXI_OP_DOMAIN_RESERVE`.
        DomainReserve = 3 => "DOMAIN_RESERVE",
        /// `CXI_OP_DOMAIN_ALLOC`.
        DomainAlloc = 4 => "DOMAIN_ALLOC",
        /// `CXI_OP_DOMAIN_FREE`.
        DomainFree = 5 => "DOMAIN_FREE",
        /// `CXI_OP_CP_ALLOC`.
        CpAlloc = 6 => "CP_ALLOC",
        /// `CXI_OP_CP_FREE`.
        CpFree = 7 => "CP_FREE",
        /// `CXI_OP_CQ_ALLOC`.
        CqAlloc = 8 => "CQ_ALLOC",
        /// `CXI_OP_CQ_FREE`.
        CqFree = 9 => "CQ_FREE",
        /// `CXI_OP_CQ_ACK_COUNTER`.
        CqAckCounter = 10 => "CQ_ACK_COUNTER",
        /// `CXI_OP_ATU_MAP`.
        AtuMap = 11 => "ATU_MAP",
        /// `CXI_OP_ATU_UNMAP`.
        AtuUnmap = 12 => "ATU_UNMAP",
        /// `CXI_OP_EQ_ALLOC`.
        EqAlloc = 13 => "EQ_ALLOC",
        /// `CXI_OP_EQ_FREE`.
        EqFree = 14 => "EQ_FREE",
        /// `CXI_OP_EQ_RESIZE`.
        EqResize = 15 => "EQ_RESIZE",
        /// `CXI_OP_EQ_RESIZE_COMPLETE`.
        EqResizeComplete = 16 => "EQ_RESIZE_COMPLETE",
        /// `CXI_OP_PTE_ALLOC`.
        PteAlloc = 17 => "PTE_ALLOC",
        /// `CXI_OP_PTE_FREE`.
        PteFree = 18 => "PTE_FREE",
        /// `CXI_OP_PTE_MAP`.
        PteMap = 19 => "PTE_MAP",
        /// `CXI_OP_PTE_UNMAP`.
        PteUnmap = 20 => "PTE_UNMAP",
        /// `CXI_OP_PTE_LE_INVALIDATE`.
        PteLeInvalidate = 21 => "PTE_LE_INVALIDATE",
        /// `CXI_OP_PTE_STATUS`.
        PteStatus = 22 => "PTE_STATUS",
        /// `CXI_OP_WAIT_ALLOC`.
        WaitAlloc = 23 => "WAIT_ALLOC",
        /// `CXI_OP_WAIT_FREE`.
        WaitFree = 24 => "WAIT_FREE",
        /// `CXI_OP_CT_ALLOC`.
        CtAlloc = 25 => "CT_ALLOC",
        /// `CXI_OP_CT_FREE`.
        CtFree = 26 => "CT_FREE",
        /// `CXI_OP_SVC_LIST_GET`.
        SvcListGet = 27 => "SVC_LIST_GET",
        /// `CXI_OP_SVC_ALLOC`.
        SvcAlloc = 28 => "SVC_ALLOC",
        /// `CXI_OP_SVC_DESTROY`.
        SvcDestroy = 29 => "SVC_DESTROY",
        /// `CXI_OP_MAP_CSRS`.
        MapCsrs = 30 => "MAP_CSRS",
        /// `CXI_OP_SBUS_OP_RESET`.
        SbusOpReset = 31 => "SBUS_OP_RESET",
        /// `CXI_OP_SBUS_OP`.
        SbusOp = 32 => "SBUS_OP",
        /// `CXI_OP_SERDES_OP`.
        SerdesOp = 33 => "SERDES_OP",
        /// `CXI_OP_GET_DEV_PROPERTIES`.
        GetDevProperties = 34 => "GET_DEV_PROPERTIES",
        /// `_OBSOLETED_CXI_OP_MAP_TELEMETRY`.
        ObsoleteMapTelemetry = 35 => "MAP_TELEMETRY",
        /// `_OBSOLETED_CXI_OP_UNMAP_TELEMETRY`.
        ObsoleteUnmapTelemetry = 36 => "UNMAP_TELEMETRY",
        /// `CXI_OP_EQ_ADJUST_RESERVED_FC`.
        EqAdjustReservedFc = 37 => "EQ_ADJUST_RESERVED_FC",
        /// `CXI_OP_CT_WB_UPDATE`.
        CtWbUpdate = 38 => "CT_WB_UPDATE",
        /// `_OBSOLETED_CXI_OP_RESERVE_CNTR_POOL_ID`.
        ObsoleteReserveCntrPoolId = 39 => "RESERVE_CNTR_POOL_ID",
        /// `_OBSOLETED_CXI_OP_RELEASE_CNTR_POOL_ID`.
        ObsoleteReleaseCntrPoolId = 40 => "RELEASE_CNTR_POOL_ID",
        /// `_OBSOLETED_CXI_OP_GET_TELEMETRY_REFRESH_INTERVAL`.
        ObsoleteGetTelemetryRefreshInterval = 41 => "GET_TELEMETRY_REFRESH_INTERVAL",
        /// `_OBSOLETED_CXI_OP_SET_TELEMETRY_REFRESH_INTERVAL`.
        ObsoleteSetTelemetryRefreshInterval = 42 => "SET_TELEMETRY_REFRESH_INTERVAL",
        /// `CXI_OP_INBOUND_WAIT`.
        InboundWait = 43 => "INBOUND_WAIT",
        /// `CXI_OP_SVC_UPDATE`.
        SvcUpdate = 44 => "SVC_UPDATE",
        /// `CXI_OP_SVC_GET`.
        SvcGet = 45 => "SVC_GET",
        /// `_OBSOLETED_CXI_OP_START_TELEMETRY`.
        ObsoleteStartTelemetry = 46 => "START_TELEMETRY",
        /// `_OBSOLETED_CXI_OP_STOP_TELEMETRY`.
        ObsoleteStopTelemetry = 47 => "STOP_TELEMETRY",
        /// `CXI_OP_PTE_TRANSITION_SM`.
        PteTransitionSm = 48 => "PTE_TRANSITION_SM",
        /// `CXI_OP_SVC_RSRC_LIST_GET`.
        SvcRsrcListGet = 49 => "SVC_RSRC_LIST_GET",
        /// `CXI_OP_SVC_RSRC_GET`.
        SvcRsrcGet = 50 => "SVC_RSRC_GET",
        /// `CXI_OP_ATU_UPDATE_MD`.
        AtuUpdateMd = 51 => "ATU_UPDATE_MD",
        /// `CXI_OP_DEV_INFO_GET`.
        DevInfoGet = 52 => "DEV_INFO_GET",
        /// `CXI_OP_SVC_SET_LPR`.
        SvcSetLpr = 53 => "SVC_SET_LPR",
        /// `CXI_OP_SVC_GET_LPR`.
        SvcGetLpr = 54 => "SVC_GET_LPR",
        /// `CXI_OP_DEV_ALLOC_RX_PROFILE`.
        DevAllocRxProfile = 55 => "DEV_ALLOC_RX_PROFILE",
        /// `CXI_OP_DEV_GET_RX_PROFILE_IDS`.
        DevGetRxProfileIds = 56 => "DEV_GET_RX_PROFILE_IDS",
        /// `CXI_OP_RX_PROFILE_RELEASE`.
        RxProfileRelease = 57 => "RX_PROFILE_RELEASE",
        /// `CXI_OP_RX_PROFILE_REVOKE`.
        RxProfileRevoke = 58 => "RX_PROFILE_REVOKE",
        /// `CXI_OP_RX_PROFILE_GET_INFO`.
        RxProfileGetInfo = 59 => "RX_PROFILE_GET_INFO",
        /// `CXI_OP_RX_PROFILE_ADD_AC_ENTRY`.
        RxProfileAddAcEntry = 60 => "RX_PROFILE_ADD_AC_ENTRY",
        /// `CXI_OP_RX_PROFILE_REMOVE_AC_ENTRY`.
        RxProfileRemoveAcEntry = 61 => "RX_PROFILE_REMOVE_AC_ENTRY",
        /// `CXI_OP_RX_PROFILE_GET_AC_ENTRY_IDS`.
        RxProfileGetAcEntryIds = 62 => "RX_PROFILE_GET_AC_ENTRY_IDS",
        /// `CXI_OP_RX_PROFILE_GET_AC_ENTRY_DATA_BY_ID`.
        RxProfileGetAcEntryDataById = 63 => "RX_PROFILE_GET_AC_ENTRY_DATA_BY_ID",
        /// `CXI_OP_RX_PROFILE_GET_AC_ENTRY_ID_BY_DATA`.
        RxProfileGetAcEntryIdByData = 64 => "RX_PROFILE_GET_AC_ENTRY_ID_BY_DATA",
        /// `CXI_OP_RX_PROFILE_GET_AC_ENTRY_ID_BY_USER`.
        RxProfileGetAcEntryIdByUser = 65 => "RX_PROFILE_GET_AC_ENTRY_ID_BY_USER",
        /// `CXI_OP_DEV_ALLOC_TX_PROFILE`.
        DevAllocTxProfile = 66 => "DEV_ALLOC_TX_PROFILE",
        /// `CXI_OP_DEV_GET_TX_PROFILE_IDS`.
        DevGetTxProfileIds = 67 => "DEV_GET_TX_PROFILE_IDS",
        /// `CXI_OP_TX_PROFILE_RELEASE`.
        TxProfileRelease = 68 => "TX_PROFILE_RELEASE",
        /// `CXI_OP_TX_PROFILE_REVOKE`.
        TxProfileRevoke = 69 => "TX_PROFILE_REVOKE",
        /// `CXI_OP_TX_PROFILE_GET_INFO`.
        TxProfileGetInfo = 70 => "TX_PROFILE_GET_INFO",
        /// `CXI_OP_TX_PROFILE_ADD_AC_ENTRY`.
        TxProfileAddAcEntry = 71 => "TX_PROFILE_ADD_AC_ENTRY",
        /// `CXI_OP_TX_PROFILE_REMOVE_AC_ENTRY`.
        TxProfileRemoveAcEntry = 72 => "TX_PROFILE_REMOVE_AC_ENTRY",
        /// `CXI_OP_TX_PROFILE_GET_AC_ENTRY_IDS`.
        TxProfileGetAcEntryIds = 73 => "TX_PROFILE_GET_AC_ENTRY_IDS",
        /// `CXI_OP_TX_PROFILE_GET_AC_ENTRY_DATA_BY_ID`.
        TxProfileGetAcEntryDataById = 74 => "TX_PROFILE_GET_AC_ENTRY_DATA_BY_ID",
        /// `CXI_OP_TX_PROFILE_GET_AC_ENTRY_ID_BY_DATA`.
        TxProfileGetAcEntryIdByData = 75 => "TX_PROFILE_GET_AC_ENTRY_ID_BY_DATA",
        /// `CXI_OP_TX_PROFILE_GET_AC_ENTRY_ID_BY_USER`.
        TxProfileGetAcEntryIdByUser = 76 => "TX_PROFILE_GET_AC_ENTRY_ID_BY_USER",
        /// `CXI_OP_CP_MODIFY`.
        CpModify = 77 => "CP_MODIFY",
        /// `CXI_OP_SVC_SET_EXCLUSIVE_CP`.
        SvcSetExclusiveCp = 78 => "SVC_SET_EXCLUSIVE_CP",
        /// `CXI_OP_SVC_GET_EXCLUSIVE_CP`.
        SvcGetExclusiveCp = 79 => "SVC_GET_EXCLUSIVE_CP",
        /// `CXI_OP_SVC_ENABLE`.
        SvcEnable = 80 => "SVC_ENABLE",
        /// `CXI_OP_SVC_SET_VNI_RANGE`.
        SvcSetVniRange = 81 => "SVC_SET_VNI_RANGE",
        /// `CXI_OP_SVC_GET_VNI_RANGE`.
        SvcGetVniRange = 82 => "SVC_GET_VNI_RANGE",
        /// `CXI_OP_TRIG_CP_ALLOC`.
        TrigCpAlloc = 83 => "TRIG_CP_ALLOC",
        /// `CXI_OP_SVC_SET_NETNS`.
        SvcSetNetns = 84 => "SVC_SET_NETNS",
        /// `CXI_OP_SVC_GET_NETNS`.
        SvcGetNetns = 85 => "SVC_GET_NETNS",
        /// `CXI_OP_CQ_ALLOC_BUF`.
        CqAllocBuf = 86 => "CQ_ALLOC_BUF",
        /// `CXI_OP_VF_GET_TOKEN`.
        VfGetToken = 87 => "VF_GET_TOKEN",
        /// `CXI_OP_PHYS_LAC_ALLOC`.
        PhysLacAlloc = 88 => "PHYS_LAC_ALLOC",
        /// `CXI_OP_PHYS_LAC_FREE`.
        PhysLacFree = 89 => "PHYS_LAC_FREE",
        /// `CXI_OP_ATU_MAP_SGT`.
        AtuMapSgt = 90 => "ATU_MAP_SGT",
        /// `CXI_OP_ATU_UPDATE_SGT`.
        AtuUpdateSgt = 91 => "ATU_UPDATE_SGT",
        /// `CXI_OP_ATU_CLEAR_MD`.
        AtuClearMd = 92 => "ATU_CLEAR_MD",
        /// `CXI_OP_RETRY_HANDLER_RUNNING`.
        RetryHandlerRunning = 93 => "RETRY_HANDLER_RUNNING",
        /// `CXI_OP_ETH_DEV_INFO_GET`.
        EthDevInfoGet = 94 => "ETH_DEV_INFO_GET",
        /// `CXI_OP_ETH_TC_REQ_PCP_GET`.
        EthTcReqPcpGet = 95 => "ETH_TC_REQ_PCP_GET",
        /// `CXI_OP_ETH_PAUSE_GET`.
        EthPauseGet = 96 => "ETH_PAUSE_GET",
        /// `CXI_OP_ETH_MAX_RXSIZE_GET`.
        EthMaxRxsizeGet = 97 => "ETH_MAX_RXSIZE_GET",
        /// `CXI_OP_ETH_LINK_STATE_GET`.
        EthLinkStateGet = 98 => "ETH_LINK_STATE_GET",
        /// `CXI_OP_RMU_ETH_ALLOC`.
        RmuEthAlloc = 99 => "RMU_ETH_ALLOC",
        /// `CXI_OP_RMU_ETH_FREE`.
        RmuEthFree = 100 => "RMU_ETH_FREE",
        /// `CXI_OP_RMU_ETH_HASH_KEY_GET`.
        RmuEthHashKeyGet = 101 => "RMU_ETH_HASH_KEY_GET",
        /// `CXI_OP_RMU_ETH_ADD_MAC_FILTER`.
        RmuEthAddMacFilter = 102 => "RMU_ETH_ADD_MAC_FILTER",
        /// `CXI_OP_RMU_ETH_REMOVE_FILTER`.
        RmuEthRemoveFilter = 103 => "RMU_ETH_REMOVE_FILTER",
        /// `CXI_OP_RMU_ETH_ADD_PROMISC_FILTER`.
        RmuEthAddPromiscFilter = 104 => "RMU_ETH_ADD_PROMISC_FILTER",
        /// `CXI_OP_RMU_ETH_SET_RSS_QUEUES`.
        RmuEthSetRssQueues = 105 => "RMU_ETH_SET_RSS_QUEUES",
        /// `CXI_OP_RMU_ETH_SET_INDIR_TABLE`.
        RmuEthSetIndirTable = 106 => "RMU_ETH_SET_INDIR_TABLE",
        /// `CXI_OP_RMU_ETH_ADD_ALL_MCAST_FILTER`.
        RmuEthAddAllMcastFilter = 107 => "RMU_ETH_ADD_ALL_MCAST_FILTER",
        /// `CXI_OP_ETH_VF_MAC_GET`.
        EthVfMacGet = 108 => "ETH_VF_MAC_GET",
        /// `CXI_OP_ETH_VF_MAC_VALIDATE`.
        EthVfMacValidate = 109 => "ETH_VF_MAC_VALIDATE",
}

/// `CXI_OP_MAX`: one past the last opcode.
pub const CXI_OP_MAX: u32 = 110;

/// `MAX_REQ_SIZE` (cxi_user.h): the longest request a process may write.
pub const MAX_REQ_SIZE: usize = 22432;

impl Opcode {
    /// Whether the slot is an obsolete one (kept for numbering).
    pub fn is_obsolete(self) -> bool {
        matches!(
            self,
            Opcode::ObsoleteMapTelemetry
                | Opcode::ObsoleteUnmapTelemetry
                | Opcode::ObsoleteReserveCntrPoolId
                | Opcode::ObsoleteReleaseCntrPoolId
                | Opcode::ObsoleteGetTelemetryRefreshInterval
                | Opcode::ObsoleteSetTelemetryRefreshInterval
                | Opcode::ObsoleteStartTelemetry
                | Opcode::ObsoleteStopTelemetry
        )
    }
}

/// A request struct: its opcode and response type. [`crate::cassini::Client::call`] fills
/// `op` and returns the response.
pub trait Request: IntoBytes + FromBytes + Immutable + KnownLayout + Copy {
    /// The opcode.
    const OP: Opcode;
    /// The response (`()` for none).
    type Resp: IntoBytes + FromBytes + Immutable + KnownLayout + Copy;
    /// Set the `op` field to [`Request::OP`].
    fn set_op(&mut self);
}

/// Define `#[repr(C)]` uAPI structs with their C sizes checked at compile time.
macro_rules! uapi_struct {
    ($( $(#[$m:meta])* pub struct $name:ident ($cname:literal, $size:literal) { $( $(#[$fm:meta])* pub $f:ident : $t:ty, )* } )+) => {
        $(
            $(#[$m])*
            #[doc = concat!("\n\nC: `struct ", $cname, "`, ", stringify!($size), " bytes.")]
            #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
            #[repr(C)]
            pub struct $name {
                $( $(#[$fm])* pub $f: $t, )*
            }
            const _: () = assert!(core::mem::size_of::<$name>() == $size);
        )+
    };
}

/// Implement [`Request`].
macro_rules! request {
    ($( $t:ident => $op:ident, $resp:ty; )+) => {
        $(
            impl Request for $t {
                const OP: Opcode = Opcode::$op;
                type Resp = $resp;
                fn set_op(&mut self) {
                    self.op = Opcode::$op as u32;
                }
            }
        )+
    };
}

uapi_struct! {
    /// Every request starts with this header.
    pub struct CommonCmd("cxi_common_cmd", 16) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot (not followed; see the module docs).
        pub resp: u64,
    }

    /// `mmap` token: offset and size to pass to [`crate::cassini::Client::mmap`].
    pub struct MmInfo("cxi_mminfo", 16) {
        /// Offset.
        pub offset: u64,
        /// Size.
        pub size: u64,
    }
}

mod cp;
mod cq;
mod dev;
mod eq;
mod lni;
mod md;
mod pte;
mod svc;
mod wait_ct;
pub use cp::*;
pub use cq::*;
pub use dev::*;
pub use eq::*;
pub use lni::*;
pub use md::*;
pub use pte::*;
pub use svc::*;
pub use wait_ct::*;

request! {
    LniAllocCmd => LniAlloc, LniAllocResp;
    LniFreeCmd => LniFree, ();
    DomainReserveCmd => DomainReserve, DomainReserveResp;
    DomainAllocCmd => DomainAlloc, DomainAllocResp;
    DomainFreeCmd => DomainFree, ();
    CpAllocCmd => CpAlloc, CpAllocResp;
    CpFreeCmd => CpFree, ();
    CpModifyCmd => CpModify, ();
    TrigCpAllocCmd => TrigCpAlloc, CpAllocResp;
    CqAllocCmd => CqAlloc, CqAllocResp;
    CqAllocBufCmd => CqAllocBuf, CqAllocResp;
    CqFreeCmd => CqFree, ();
    CqAckCounterCmd => CqAckCounter, CqAckCounterResp;
    AtuMapCmd => AtuMap, AtuMapResp;
    AtuUnmapCmd => AtuUnmap, ();
    AtuUpdateMdCmd => AtuUpdateMd, ();
    EqAllocCmd => EqAlloc, EqAllocResp;
    EqFreeCmd => EqFree, ();
    EqAdjustReservedFcCmd => EqAdjustReservedFc, EqAdjustReservedFcResp;
    PteAllocCmd => PteAlloc, PteAllocResp;
    PteFreeCmd => PteFree, ();
    PteMapCmd => PteMap, PteMapResp;
    PteUnmapCmd => PteUnmap, ();
    PteLeInvalidateCmd => PteLeInvalidate, ();
    PteStatusCmd => PteStatus, PteStatus;
    PteTransitionSmCmd => PteTransitionSm, ();
    WaitAllocCmd => WaitAlloc, WaitAllocResp;
    WaitFreeCmd => WaitFree, ();
    CtAllocCmd => CtAlloc, CtAllocResp;
    CtWbUpdateCmd => CtWbUpdate, ();
    CtFreeCmd => CtFree, ();
    InboundWaitCmd => InboundWait, ();
    SvcAllocCmd => SvcAlloc, SvcAllocResp;
    SvcUpdateCmd => SvcUpdate, SvcUpdateResp;
    SvcDestroyCmd => SvcDestroy, ();
    SvcEnableCmd => SvcEnable, ();
    SvcSetExclusiveCpCmd => SvcSetExclusiveCp, ();
    SvcSetNetnsCmd => SvcSetNetns, ();
}

/// A [`NoArgCmd`] or [`SvcIdCmd`]/[`SvcListGetCmd`]/[`SvcLprCmd`] sent under one of the
/// opcodes sharing that layout.
#[derive(Copy, Clone, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(transparent)]
pub struct As<const OP: u32, T>(pub T);

/// Implement [`Request`] for shared layouts under each of their opcodes.
macro_rules! shared_request {
    ($( $t:ident as $op:ident => $resp:ty; )+) => {
        $(
            impl Request for As<{ Opcode::$op as u32 }, $t> {
                const OP: Opcode = Opcode::$op;
                type Resp = $resp;
                fn set_op(&mut self) {
                    self.0.op = Opcode::$op as u32;
                }
            }
        )+
    };
}

shared_request! {
    NoArgCmd as MapCsrs => MapCsrsResp;
    NoArgCmd as GetDevProperties => PropertiesInfo;
    NoArgCmd as DevInfoGet => DevInfoUse;
    NoArgCmd as RetryHandlerRunning => RetryHandlerRunningResp;
    SvcIdCmd as SvcGet => SvcDesc;
    SvcIdCmd as SvcRsrcGet => RsrcUse;
    SvcListGetCmd as SvcListGet => SvcListGetResp;
    SvcListGetCmd as SvcRsrcListGet => SvcListGetResp;
    SvcLprCmd as SvcSetLpr => ();
    SvcLprCmd as SvcGetLpr => SvcGetValueResp;
    SvcIdCmd as SvcGetExclusiveCp => SvcGetExclusiveCpResp;
    SvcIdCmd as SvcGetNetns => SvcGetValueResp;
    SvcVniRangeCmd as SvcSetVniRange => ();
    SvcVniRangeCmd as SvcGetVniRange => SvcGetVniRangeResp;
}

/// The size of the request and response of an opcode this driver implements, and whether it
/// is admin-only (the driver's `cmds_info[]`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// Exact request length.
    pub req_size: usize,
    /// Response length (0 for none).
    pub resp_size: usize,
    /// Needs an admin client (CAP_SYS_ADMIN on a PF).
    pub admin_only: bool,
}

const fn info<Q, R>(admin_only: bool) -> OpInfo {
    OpInfo {
        req_size: core::mem::size_of::<Q>(),
        resp_size: core::mem::size_of::<R>(),
        admin_only,
    }
}

impl Opcode {
    /// Request/response sizes of the opcodes this driver handles; `None` for the others
    /// (obsolete slots and unimplemented operations), which fail with `EOPNOTSUPP`.
    pub fn info(self) -> Option<OpInfo> {
        use Opcode as O;
        Some(match self {
            O::LniAlloc => info::<LniAllocCmd, LniAllocResp>(false),
            O::LniFree => info::<LniFreeCmd, ()>(false),
            O::DomainReserve => info::<DomainReserveCmd, DomainReserveResp>(false),
            O::DomainAlloc => info::<DomainAllocCmd, DomainAllocResp>(false),
            O::DomainFree => info::<DomainFreeCmd, ()>(false),
            O::CpAlloc => info::<CpAllocCmd, CpAllocResp>(false),
            O::CpFree => info::<CpFreeCmd, ()>(false),
            O::CpModify => info::<CpModifyCmd, ()>(false),
            O::TrigCpAlloc => info::<TrigCpAllocCmd, CpAllocResp>(false),
            O::CqAlloc => info::<CqAllocCmd, CqAllocResp>(false),
            O::CqAllocBuf => info::<CqAllocBufCmd, CqAllocResp>(false),
            O::CqFree => info::<CqFreeCmd, ()>(false),
            O::CqAckCounter => info::<CqAckCounterCmd, CqAckCounterResp>(false),
            O::AtuMap => info::<AtuMapCmd, AtuMapResp>(false),
            O::AtuUnmap => info::<AtuUnmapCmd, ()>(false),
            O::AtuUpdateMd => info::<AtuUpdateMdCmd, ()>(false),
            O::EqAlloc => info::<EqAllocCmd, EqAllocResp>(false),
            O::EqFree => info::<EqFreeCmd, ()>(false),
            O::EqAdjustReservedFc => info::<EqAdjustReservedFcCmd, EqAdjustReservedFcResp>(false),
            O::PteAlloc => info::<PteAllocCmd, PteAllocResp>(false),
            O::PteFree => info::<PteFreeCmd, ()>(false),
            O::PteMap => info::<PteMapCmd, PteMapResp>(false),
            O::PteUnmap => info::<PteUnmapCmd, ()>(false),
            O::PteLeInvalidate => info::<PteLeInvalidateCmd, ()>(false),
            O::PteStatus => info::<PteStatusCmd, PteStatus>(false),
            O::PteTransitionSm => info::<PteTransitionSmCmd, ()>(false),
            O::WaitAlloc => info::<WaitAllocCmd, WaitAllocResp>(false),
            O::WaitFree => info::<WaitFreeCmd, ()>(false),
            O::CtAlloc => info::<CtAllocCmd, CtAllocResp>(false),
            O::CtWbUpdate => info::<CtWbUpdateCmd, ()>(false),
            O::CtFree => info::<CtFreeCmd, ()>(false),
            O::MapCsrs => info::<NoArgCmd, MapCsrsResp>(true),
            O::GetDevProperties => info::<NoArgCmd, PropertiesInfo>(false),
            O::DevInfoGet => info::<NoArgCmd, DevInfoUse>(false),
            O::RetryHandlerRunning => info::<NoArgCmd, RetryHandlerRunningResp>(false),
            O::InboundWait => info::<InboundWaitCmd, ()>(false),
            O::SvcAlloc => info::<SvcAllocCmd, SvcAllocResp>(true),
            O::SvcUpdate => info::<SvcUpdateCmd, SvcUpdateResp>(true),
            O::SvcDestroy => info::<SvcDestroyCmd, ()>(true),
            O::SvcEnable => info::<SvcEnableCmd, ()>(true),
            O::SvcGet => info::<SvcIdCmd, SvcDesc>(false),
            O::SvcRsrcGet => info::<SvcIdCmd, RsrcUse>(false),
            O::SvcListGet => info::<SvcListGetCmd, SvcListGetResp>(false),
            O::SvcRsrcListGet => info::<SvcListGetCmd, SvcListGetResp>(false),
            O::SvcSetLpr => info::<SvcLprCmd, ()>(true),
            O::SvcGetLpr => info::<SvcLprCmd, SvcGetValueResp>(false),
            O::SvcSetExclusiveCp => info::<SvcSetExclusiveCpCmd, ()>(true),
            O::SvcGetExclusiveCp => info::<SvcIdCmd, SvcGetExclusiveCpResp>(false),
            O::SvcSetVniRange => info::<SvcVniRangeCmd, ()>(true),
            O::SvcGetVniRange => info::<SvcVniRangeCmd, SvcGetVniRangeResp>(false),
            O::SvcSetNetns => info::<SvcSetNetnsCmd, ()>(true),
            O::SvcGetNetns => info::<SvcIdCmd, SvcGetValueResp>(false),
            _ => return None,
        })
    }
}

/// `union cxi_pte_map_offset` for multicast maps: `mcast_id` (13 bits), `mcast_pte_index`
/// (5 bits).
pub fn pte_map_offset_mcast(mcast_id: u32, pte_index: u32) -> u32 {
    (mcast_id & 0x1fff) | (pte_index & 0x1f) << 13
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_numbers_are_positional() {
        assert_eq!(Opcode::ALL.len() as u32, CXI_OP_MAX);
        for (i, op) in Opcode::ALL.iter().enumerate() {
            assert_eq!(*op as u32, i as u32);
            assert_eq!(Opcode::from_u32(i as u32), Some(*op));
        }
        assert_eq!(Opcode::from_u32(CXI_OP_MAX), None);
        // Spot checks against cxi-abi.h.
        assert_eq!(Opcode::CqAlloc as u32, 8);
        assert_eq!(Opcode::AtuMap as u32, 11);
        assert_eq!(Opcode::EqAdjustReservedFc as u32, 37);
        assert_eq!(Opcode::PteTransitionSm as u32, 48);
        assert_eq!(Opcode::DevInfoGet as u32, 52);
        assert_eq!(Opcode::TrigCpAlloc as u32, 83);
        assert_eq!(Opcode::EthVfMacValidate as u32, 109);
        assert!(Opcode::ObsoleteStopTelemetry.is_obsolete());
        assert_eq!(Opcode::ObsoleteStopTelemetry.info(), None);
    }

    #[test]
    fn sizes_match_the_c_abi() {
        // sizeof() of the C structs (gcc, x86-64).
        let want: &[(Opcode, usize, usize)] = &[
            (Opcode::LniAlloc, 24, 4),
            (Opcode::LniFree, 8, 0),
            (Opcode::DomainReserve, 32, 4),
            (Opcode::DomainAlloc, 32, 12),
            (Opcode::CpAlloc, 32, 8),
            (Opcode::TrigCpAlloc, 40, 8),
            (Opcode::CqAlloc, 48, 40),
            (Opcode::CqAckCounter, 24, 4),
            (Opcode::AtuMap, 88, 48),
            (Opcode::AtuUpdateMd, 32, 0),
            (Opcode::EqAlloc, 80, 24),
            (Opcode::EqAdjustReservedFc, 24, 4),
            (Opcode::PteAlloc, 32, 4),
            (Opcode::PteFree, 24, 0),
            (Opcode::PteMap, 32, 4),
            (Opcode::PteLeInvalidate, 16, 0),
            (Opcode::PteStatus, 24, 32),
            (Opcode::WaitAlloc, 24, 8),
            (Opcode::CtAlloc, 32, 24),
            (Opcode::CtWbUpdate, 16, 0),
            (Opcode::GetDevProperties, 16, 84),
            (Opcode::DevInfoGet, 16, 120),
            (Opcode::SvcAlloc, 88, 24),
            (Opcode::SvcGet, 24, 68),
            (Opcode::InboundWait, 4, 0),
            (Opcode::CqAllocBuf, 72, 40),
            (Opcode::SvcSetExclusiveCp, 12, 0),
            (Opcode::SvcGetExclusiveCp, 24, 1),
            (Opcode::SvcSetVniRange, 32, 0),
            (Opcode::SvcGetVniRange, 32, 8),
            (Opcode::SvcSetNetns, 12, 0),
            (Opcode::SvcGetNetns, 24, 4),
        ];
        for &(op, req, resp) in want {
            let i = op.info().unwrap();
            assert_eq!((i.req_size, i.resp_size), (req, resp), "{}", op.name());
        }
        assert!(Opcode::SvcAlloc.info().unwrap().admin_only);
        for op in [
            Opcode::SvcSetExclusiveCp,
            Opcode::SvcSetVniRange,
            Opcode::SvcSetNetns,
        ] {
            assert!(op.info().unwrap().admin_only, "{}", op.name());
        }
        assert!(!Opcode::CqAlloc.info().unwrap().admin_only);
    }

    #[test]
    fn field_offsets_match_the_c_abi() {
        let mut c = EqAllocCmd::default();
        c.attr.reserved_slots = 0x1122_3344;
        c.queue_md = 0xaabb_ccdd;
        let b = c.as_bytes();
        // offsetof(cxi_eq_alloc_cmd, queue_md) = 20, attr = 32, attr.reserved_slots = 44.
        assert_eq!(&b[20..24], &0xaabb_ccddu32.to_le_bytes());
        assert_eq!(&b[32 + 44..32 + 48], &0x1122_3344u32.to_le_bytes());
        let mut m = AtuMapResp::default();
        m.md.id = 7;
        m.md.lac = 3;
        let b = m.as_bytes();
        // offsetof(cxi_atu_map_resp, md) = 8; md.lac = 24, md.id = 36.
        assert_eq!(b[8 + 24], 3);
        assert_eq!(&b[8 + 36..8 + 40], &7u32.to_le_bytes());
        let s = PteStatus {
            ule_count: 9,
            ..Default::default()
        };
        // offsetof(cxi_pte_status, ule_count) = 24.
        assert_eq!(s.as_bytes()[24], 9);
        let d = SvcDesc {
            svc_id: 5,
            ..Default::default()
        };
        // offsetof(cxi_svc_desc, svc_id) = 64, limits = 32.
        assert_eq!(&d.as_bytes()[64..68], &5u32.to_le_bytes());
        let mut b = CqAllocBufCmd {
            lni: 3,
            ..Default::default()
        };
        b.opts.opts.lcid = 5;
        b.opts.buf = 0x1122_3344_5566_7788;
        b.opts.dmabuf_fd = -1;
        let x = b.as_bytes();
        // offsetof(cxi_cq_alloc_buf_cmd, lni) = 16, opts = 24; opts.buf = 24,
        // opts.dmabuf_fd = 36 (cxi-abi.h compiled on x86-64).
        assert_eq!(&x[16..20], &3u32.to_le_bytes());
        assert_eq!(&x[24 + 16..24 + 20], &5u32.to_le_bytes());
        assert_eq!(
            &x[24 + 24..24 + 32],
            &0x1122_3344_5566_7788u64.to_le_bytes()
        );
        assert_eq!(&x[24 + 36..24 + 40], &(-1i32).to_le_bytes());
        let r = SvcVniRangeCmd {
            svc_id: 2,
            vni_min: 64,
            vni_max: 127,
            ..Default::default()
        };
        // offsetof(cxi_svc_vni_range_cmd, svc_id) = 16, vni_min = 20, vni_max = 24.
        assert_eq!(
            &r.as_bytes()[16..28],
            &[2, 0, 0, 0, 64, 0, 0, 0, 127, 0, 0, 0]
        );
        let n = SvcSetNetnsCmd {
            svc_id: 4,
            netns: 9,
            ..Default::default()
        };
        // offsetof(cxi_svc_set_netns_cmd, svc_id) = 4, netns = 8.
        assert_eq!(&n.as_bytes()[4..12], &[4, 0, 0, 0, 9, 0, 0, 0]);
    }
}
