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
    /// Not supported by this driver.
    #[error("EOPNOTSUPP: operation not supported")]
    Eopnotsupp = 95,
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

    /// LNI_ALLOC.
    pub struct LniAllocCmd("cxi_lni_alloc_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service.
        pub svc_id: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// LNI_ALLOC response.
    pub struct LniAllocResp("cxi_lni_alloc_resp", 4) {
        /// The LNI.
        pub lni: u32,
    }
    /// LNI_FREE.
    pub struct LniFreeCmd("cxi_lni_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// The LNI.
        pub lni: u32,
    }

    /// DOMAIN_RESERVE: reserve `count` contiguous PIDs for the LNI.
    pub struct DomainReserveCmd("cxi_domain_reserve_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// VNI.
        pub vni: u32,
        /// First PID, or `C_PID_ANY`.
        pub pid: u32,
        /// How many.
        pub count: u32,
    }
    /// DOMAIN_RESERVE response.
    pub struct DomainReserveResp("cxi_domain_reserve_resp", 4) {
        /// First PID reserved.
        pub pid: u32,
    }
    /// DOMAIN_ALLOC.
    pub struct DomainAllocCmd("cxi_domain_alloc_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// VNI.
        pub vni: u32,
        /// PID, or `C_PID_ANY`.
        pub pid: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// DOMAIN_ALLOC response.
    pub struct DomainAllocResp("cxi_domain_alloc_resp", 12) {
        /// Domain handle.
        pub domain: u32,
        /// VNI.
        pub vni: u32,
        /// PID given.
        pub pid: u32,
    }
    /// DOMAIN_FREE.
    pub struct DomainFreeCmd("cxi_domain_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// Domain handle.
        pub domain: u32,
    }

    /// CP_ALLOC.
    pub struct CpAllocCmd("cxi_cp_alloc_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// VNI.
        pub vni: u32,
        /// `enum cxi_traffic_class`.
        pub tc: u32,
        /// `enum cxi_traffic_class_type`.
        pub tc_type: u32,
    }
    /// CP_ALLOC / TRIG_CP_ALLOC response.
    pub struct CpAllocResp("cxi_cp_alloc_resp", 8) {
        /// CP handle.
        pub cp_hndl: u32,
        /// The LCID commands and CQs name.
        pub lcid: u32,
    }
    /// CP_FREE.
    pub struct CpFreeCmd("cxi_cp_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// CP handle.
        pub cp_hndl: u32,
    }
    /// CP_MODIFY.
    pub struct CpModifyCmd("cxi_cp_modify_cmd", 12) {
        /// Opcode.
        pub op: u32,
        /// CP handle.
        pub cp_hndl: u32,
        /// New VNI.
        pub vni: u32,
    }
    /// TRIG_CP_ALLOC.
    pub struct TrigCpAllocCmd("cxi_trig_cp_alloc_cmd", 40) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// VNI.
        pub vni: u32,
        /// `enum cxi_traffic_class`.
        pub tc: u32,
        /// `enum cxi_traffic_class_type`.
        pub tc_type: u32,
        /// `enum cxi_trig_cp`: TRIG_LCID 0, NON_TRIG_LCID 1, ANY_LCID 2.
        pub cp_type: u32,
        /// Padding.
        pub pad1: u32,
    }

    /// `struct cxi_cq_alloc_opts`.
    pub struct CqAllocOpts("cxi_cq_alloc_opts", 24) {
        /// Requested 64 B slots (up to `CXI_MAX_CQ_COUNT`).
        pub count: u32,
        /// `enum cxi_cq_update_policy`.
        pub policy: u32,
        /// Statistics counter pool.
        pub stat_cnt_pool: u32,
        /// `CXI_CQ_*`.
        pub flags: u32,
        /// Initial LCID (transmit only).
        pub lcid: u32,
        /// LPE credit threshold id (0..3).
        pub lpe_cdt_thresh_id: u32,
    }
    /// CQ_ALLOC.
    pub struct CqAllocCmd("cxi_cq_alloc_cmd", 48) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// EQ for errors (`C_EQ_NONE` = 0).
        pub eq: u32,
        /// Options.
        pub opts: CqAllocOpts,
    }
    /// CQ_ALLOC response.
    pub struct CqAllocResp("cxi_cq_alloc_resp", 40) {
        /// CQ handle: transmit 0..1023, target 1024 + n.
        pub cq: u32,
        /// Slots in the ring.
        pub count: u32,
        /// The command ring.
        pub cmds: MmInfo,
        /// The launch page.
        pub wp_addr: MmInfo,
    }
    /// CQ_FREE.
    pub struct CqFreeCmd("cxi_cq_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// CQ handle.
        pub cq: u32,
    }
    /// CQ_ACK_COUNTER.
    pub struct CqAckCounterCmd("cxi_cq_ack_counter_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// CQ handle.
        pub cq: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// CQ_ACK_COUNTER response.
    pub struct CqAckCounterResp("cxi_cq_ack_counter_resp", 4) {
        /// The counter.
        pub ack_counter: u32,
    }

    /// `struct cxi_md_hints`.
    pub struct MdHints("cxi_md_hints", 40) {
        /// Base page shift (0 = default).
        pub page_shift: i32,
        /// Huge page shift.
        pub huge_shift: i32,
        /// `enum c_ptg_mode`.
        pub ptg_mode: i32,
        /// `ptg_mode` is valid.
        pub ptg_mode_valid: u8,
        /// Padding.
        pub pad0: [u8; 3],
        /// dmabuf fd.
        pub dmabuf_fd: i32,
        /// Padding.
        pub pad1: u32,
        /// dmabuf offset.
        pub dmabuf_offset: u64,
        /// dmabuf is valid.
        pub dmabuf_valid: u8,
        /// Padding.
        pub pad2: [u8; 7],
    }
    /// ATU_MAP.
    pub struct AtuMapCmd("cxi_atu_map_cmd", 88) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// Padding.
        pub pad1: u32,
        /// User virtual address.
        pub va: u64,
        /// Length.
        pub len: u64,
        /// `CXI_MAP_*`.
        pub flags: u32,
        /// Padding.
        pub pad2: u32,
        /// Hints.
        pub hints: MdHints,
    }
    /// `struct cxi_md`: a memory descriptor.
    pub struct Md("cxi_md", 40) {
        /// IOVA of `va` (page aligned).
        pub iova: u64,
        /// Page-aligned virtual address.
        pub va: u64,
        /// Page-aligned length.
        pub len: u64,
        /// The LAC commands and LEs name.
        pub lac: u8,
        /// Padding.
        pub pad0: [u8; 3],
        /// Base page shift.
        pub page_shift: i32,
        /// Huge page shift.
        pub huge_shift: i32,
        /// MD id.
        pub id: u32,
    }
    /// ATU_MAP response.
    pub struct AtuMapResp("cxi_atu_map_resp", 48) {
        /// MD id.
        pub id: u32,
        /// Padding.
        pub pad0: u32,
        /// The descriptor.
        pub md: Md,
    }
    /// ATU_UNMAP.
    pub struct AtuUnmapCmd("cxi_atu_unmap_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// MD id.
        pub id: u32,
    }
    /// ATU_UPDATE_MD.
    pub struct AtuUpdateMdCmd("cxi_atu_update_md_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// MD id.
        pub id: u32,
        /// User virtual address (inside the MD).
        pub va: u64,
        /// Length.
        pub len: u64,
        /// `CXI_MAP_*`.
        pub flags: u32,
        /// Padding.
        pub pad0: u32,
    }

    /// `struct cxi_eq_attr`.
    pub struct EqAttr("cxi_eq_attr", 48) {
        /// User virtual address of the event buffer.
        pub queue: u64,
        /// Its length.
        pub queue_len: u64,
        /// `CXI_EQ_*`.
        pub flags: u64,
        /// First status threshold, percent.
        pub status_thresh_base: u32,
        /// Threshold step, percent.
        pub status_thresh_delta: u32,
        /// Number of thresholds (0..4).
        pub status_thresh_count: u32,
        /// Event-combining delay in ns (0 = default).
        pub ec_delay: u32,
        /// CPU affinity hint.
        pub cpu_affinity: u32,
        /// Event slots reserved for flow control.
        pub reserved_slots: u32,
    }
    /// EQ_ALLOC.
    pub struct EqAllocCmd("cxi_eq_alloc_cmd", 80) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// MD covering the buffer (`CXI_MD_NONE` = 0 with `CXI_EQ_PASSTHROUGH`).
        pub queue_md: u32,
        /// Wait object for events (`CXI_WAIT_NONE` = 0).
        pub event_wait: u32,
        /// Wait object for status write-backs.
        pub status_wait: u32,
        /// Attributes.
        pub attr: EqAttr,
    }
    /// EQ_ALLOC response.
    pub struct EqAllocResp("cxi_eq_alloc_resp", 24) {
        /// EQ handle (its hardware number).
        pub eq: u32,
        /// Padding.
        pub pad0: u32,
        /// The EE software-state page.
        pub csr: MmInfo,
    }
    /// EQ_FREE.
    pub struct EqFreeCmd("cxi_eq_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// EQ handle.
        pub eq: u32,
    }
    /// EQ_RESIZE.
    pub struct EqResizeCmd("cxi_eq_resize_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// EQ handle.
        pub eq_hndl: u32,
        /// New buffer.
        pub queue: u64,
        /// New length.
        pub queue_len: u64,
        /// MD of the new buffer.
        pub queue_md: u32,
        /// Padding.
        pub pad0: u32,
    }
    /// EQ_RESIZE_COMPLETE.
    pub struct EqResizeCompleteCmd("cxi_eq_resize_complete_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// EQ handle.
        pub eq_hndl: u32,
    }
    /// EQ_ADJUST_RESERVED_FC.
    pub struct EqAdjustReservedFcCmd("cxi_eq_adjust_reserved_fc_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// EQ handle.
        pub eq_hndl: u32,
        /// Change (may be negative).
        pub value: i32,
    }
    /// EQ_ADJUST_RESERVED_FC response.
    pub struct EqAdjustReservedFcResp("cxi_eq_adjust_reserved_fc_resp", 4) {
        /// The new reservation.
        pub reserved_fc: i32,
    }

    /// PTE_ALLOC.
    pub struct PteAllocCmd("cxi_pte_alloc_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni_hndl: u32,
        /// EQ for its events (0 = none).
        pub evtq_hndl: u32,
        /// `struct cxi_pt_alloc_opts` (`firmware_spec::cassini::le::PtAllocOpts`).
        pub opts: u64,
    }
    /// PTE_ALLOC response.
    pub struct PteAllocResp("cxi_pte_alloc_resp", 4) {
        /// PtlTE number.
        pub pte_number: u32,
    }
    /// PTE_FREE.
    pub struct PteFreeCmd("cxi_pte_free_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_number: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// PTE_MAP.
    pub struct PteMapCmd("cxi_pte_map_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_number: u32,
        /// Domain handle.
        pub domain_hndl: u32,
        /// Index in the PID granule, or a `union cxi_pte_map_offset` for multicast.
        pub pid_offset: u32,
        /// Multicast mapping (C `bool`).
        pub is_multicast: u8,
        /// Padding.
        pub pad1: [u8; 3],
    }
    /// PTE_MAP response.
    pub struct PteMapResp("cxi_pte_map_resp", 4) {
        /// The mapping's handle (its RMU entry).
        pub pte_index: u32,
    }
    /// PTE_UNMAP.
    pub struct PteUnmapCmd("cxi_pte_unmap_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Mapping handle.
        pub pte_index: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// PTE_LE_INVALIDATE.
    pub struct PteLeInvalidateCmd("cxi_pte_le_invalidate_cmd", 16) {
        /// Opcode.
        pub op: u32,
        /// PtlTE number.
        pub pte_index: u32,
        /// Buffer id of the LE.
        pub buffer_id: u32,
        /// `enum c_ptl_list`.
        pub list: u32,
    }
    /// `struct cxi_pte_status`; also the PTE_STATUS response. `ule_offsets`/`ule_count` are
    /// read from the caller's response buffer first (an array in user memory to fill).
    pub struct PteStatus("cxi_pte_status", 32) {
        /// Drop count.
        pub drop_count: u32,
        /// `enum c_ptlte_state`.
        pub state: u8,
        /// Padding.
        pub pad0: u8,
        /// LEs reserved in its pool.
        pub les_reserved: u16,
        /// LEs allocated in its pool.
        pub les_allocated: u16,
        /// Pool limit.
        pub les_max: u16,
        /// Padding.
        pub pad1: u32,
        /// User address of a `u64` array for the unexpected headers' offsets (0 = none).
        pub ule_offsets: u64,
        /// In: the array's length. Out: offsets written.
        pub ule_count: u16,
        /// Padding.
        pub pad2: [u8; 6],
    }
    /// PTE_STATUS.
    pub struct PteStatusCmd("cxi_pte_status_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_index: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// PTE_TRANSITION_SM.
    pub struct PteTransitionSmCmd("cxi_pte_transition_sm_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_index: u32,
        /// Expected drop count.
        pub drop_count: u32,
    }

    /// WAIT_ALLOC.
    pub struct WaitAllocCmd("cxi_wait_alloc_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// WAIT_ALLOC response.
    pub struct WaitAllocResp("cxi_wait_alloc_resp", 8) {
        /// The client.
        pub client_id: u32,
        /// Wait object handle.
        pub wait: u32,
    }
    /// WAIT_FREE.
    pub struct WaitFreeCmd("cxi_wait_free_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Wait object handle.
        pub wait: u32,
        /// Padding.
        pub pad1: u32,
    }

    /// CT_ALLOC.
    pub struct CtAllocCmd("cxi_ct_alloc_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// Padding.
        pub pad1: u32,
        /// User address of the 8 B write-back buffer (8-aligned).
        pub wb: u64,
    }
    /// CT_ALLOC response.
    pub struct CtAllocResp("cxi_ct_alloc_resp", 24) {
        /// CT number.
        pub ctn: u32,
        /// Padding.
        pub pad0: u32,
        /// The doorbell page.
        pub doorbell: MmInfo,
    }
    /// CT_WB_UPDATE.
    pub struct CtWbUpdateCmd("cxi_ct_wb_update_cmd", 16) {
        /// Opcode.
        pub op: u32,
        /// CT number.
        pub ctn: u32,
        /// New write-back buffer.
        pub wb: u64,
    }
    /// CT_FREE.
    pub struct CtFreeCmd("cxi_ct_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// CT number.
        pub ctn: u32,
    }

    /// A request with no argument but the response slot (MAP_CSRS, GET_DEV_PROPERTIES,
    /// DEV_INFO_GET, RETRY_HANDLER_RUNNING).
    pub struct NoArgCmd("cxi_map_csrs_cmd", 16) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
    }
    /// MAP_CSRS response.
    pub struct MapCsrsResp("cxi_map_csrs_resp", 16) {
        /// The CSR region.
        pub csr: MmInfo,
    }
    /// INBOUND_WAIT.
    pub struct InboundWaitCmd("cxi_inbound_wait_cmd", 4) {
        /// Opcode.
        pub op: u32,
    }
    /// RETRY_HANDLER_RUNNING response.
    pub struct RetryHandlerRunningResp("cxi_retry_handler_running_resp", 1) {
        /// Whether the retry handler runs (C `bool`).
        pub running: u8,
    }

    /// `struct cxi_limits`.
    pub struct Limits("cxi_limits", 4) {
        /// Most a service may use.
        pub max: u16,
        /// Reserved for the service.
        pub res: u16,
    }
    /// One member of a restricted service.
    pub struct SvcMember("cxi_svc_desc.members[]", 8) {
        /// uid or gid.
        pub value: u32,
        /// `enum cxi_svc_member_type`: IGNORE 0, UID 1, GID 2, NET_NS 3.
        pub kind: u32,
    }
    /// `struct cxi_svc_desc`.
    pub struct SvcDesc("cxi_svc_desc", 68) {
        /// Bit-field: restricted_members 0, restricted_vnis 1, restricted_tcs 2,
        /// resource_limits 3, enable 4, is_system_svc 5, cntr_pool_id 6..8.
        pub bits: u8,
        /// VNIs valid in `vnis`.
        pub num_vld_vnis: u8,
        /// Allowed VNIs.
        pub vnis: [u16; 4],
        /// Allowed traffic classes (C `bool`s).
        pub tcs: [u8; 5],
        /// Padding.
        pub pad0: u8,
        /// Members.
        pub members: [SvcMember; 2],
        /// Limits by `enum cxi_rsrc_type`: PTE, TXQ, TGQ, EQ, CT, LE, TLE, AC.
        pub limits: [Limits; 8],
        /// Service id.
        pub svc_id: u32,
    }
    /// `struct cxi_svc_fail_info`.
    pub struct SvcFailInfo("cxi_svc_fail_info", 20) {
        /// Available count of each resource whose reservation failed.
        pub rsrc_avail: [u16; 8],
        /// No LE pool was available.
        pub no_le_pools: u8,
        /// No TLE pool was available.
        pub no_tle_pools: u8,
        /// No counter pool was available.
        pub no_cntr_pools: u8,
        /// Padding.
        pub pad0: u8,
    }
    /// SVC_ALLOC / SVC_UPDATE.
    pub struct SvcAllocCmd("cxi_svc_alloc_cmd", 88) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// The description.
        pub svc_desc: SvcDesc,
        /// Padding.
        pub pad1: u32,
    }
    /// SVC_ALLOC response.
    pub struct SvcAllocResp("cxi_svc_alloc_resp", 24) {
        /// New service id.
        pub svc_id: u32,
        /// Why a reservation failed.
        pub fail_info: SvcFailInfo,
    }
    /// SVC_UPDATE (same layout as SVC_ALLOC).
    pub struct SvcUpdateCmd("cxi_svc_update_cmd", 88) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// The description (`svc_id` names the service).
        pub svc_desc: SvcDesc,
        /// Padding.
        pub pad1: u32,
    }
    /// SVC_UPDATE response.
    pub struct SvcUpdateResp("cxi_svc_update_resp", 20) {
        /// Why a reservation failed.
        pub fail_info: SvcFailInfo,
    }
    /// SVC_DESTROY.
    pub struct SvcDestroyCmd("cxi_svc_destroy_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// Service id.
        pub svc_id: u32,
    }
    /// SVC_GET, SVC_RSRC_GET, SVC_GET_EXCLUSIVE_CP: a service id.
    pub struct SvcIdCmd("cxi_svc_get_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service id.
        pub svc_id: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// SVC_LIST_GET / SVC_RSRC_LIST_GET: fill a user array.
    pub struct SvcListGetCmd("cxi_svc_list_get_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Entries the array holds.
        pub count: u32,
        /// Padding.
        pub pad1: u32,
        /// User address of the array (`cxi_svc_desc` or `cxi_rsrc_use` entries).
        pub list: u64,
    }
    /// SVC_LIST_GET / SVC_RSRC_LIST_GET response.
    pub struct SvcListGetResp("cxi_svc_list_get_resp", 4) {
        /// Number of services.
        pub count: u32,
    }
    /// `struct cxi_rsrc_use`: a service's use of each resource.
    pub struct RsrcUse("cxi_rsrc_use", 24) {
        /// Service id.
        pub svc_id: u32,
        /// TLE pool.
        pub tle_pool_id: u32,
        /// In use, by `enum cxi_rsrc_type`.
        pub in_use: [u16; 8],
    }
    /// SVC_ENABLE.
    pub struct SvcEnableCmd("cxi_svc_enable_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service id.
        pub svc_id: u32,
        /// Enable (C `bool`).
        pub enable: u8,
        /// Padding.
        pub pad1: [u8; 3],
    }
    /// SVC_SET_LPR / SVC_GET_LPR.
    pub struct SvcLprCmd("cxi_svc_lpr_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service id.
        pub svc_id: u32,
        /// LNIs per RGID.
        pub lnis_per_rgid: u32,
    }
    /// A service value (SVC_GET_LPR).
    pub struct SvcGetValueResp("cxi_svc_get_value_resp", 4) {
        /// The value.
        pub value: u32,
    }

    /// `struct cxi_properties_info` (GET_DEV_PROPERTIES response).
    pub struct PropertiesInfo("cxi_properties_info", 84) {
        /// NID.
        pub nid: u32,
        /// NID configured explicitly (C `bool`).
        pub nid_configured: u8,
        /// Padding.
        pub pad0: [u8; 3],
        /// PID width.
        pub pid_bits: u32,
        /// PIDs per VNI.
        pub pid_count: u32,
        /// PtlTE indices per PID.
        pub pid_granule: u32,
        /// `min_free` shift.
        pub min_free_shift: u32,
        /// PtlTE index of rendezvous Gets.
        pub rdzv_get_idx: u32,
        /// Device resources by `enum cxi_rsrc_type`.
        pub rsrcs: [Limits; 8],
        /// `c_mb_sts_rev.rev`.
        pub device_rev: u32,
        /// `c_mb_sts_rev.proto`.
        pub device_proto: u32,
        /// `c_mb_sts_rev.platform`.
        pub device_platform: u32,
        /// `enum cassini_version`.
        pub cassini_version: u32,
        /// Rendezvous Gets enabled (C `bool`).
        pub rdzv_get_en: u8,
        /// Padding.
        pub pad1: [u8; 3],
        /// AMO opcode remapped to PCIe fetch-add (-1 = none).
        pub amo_remap_to_pcie_fadd: i32,
    }
    /// `struct cxi_dev_info_use` (DEV_INFO_GET response).
    pub struct DevInfoUse("cxi_dev_info_use", 120) {
        /// NID.
        pub nid: u32,
        /// PID width.
        pub pid_bits: u32,
        /// PIDs per VNI.
        pub pid_count: u32,
        /// PtlTE indices per PID.
        pub pid_granule: u32,
        /// `min_free` shift.
        pub min_free_shift: u32,
        /// PtlTE index of rendezvous Gets.
        pub rdzv_get_idx: u32,
        /// PCI vendor id.
        pub vendor_id: u32,
        /// PCI device id.
        pub device_id: u32,
        /// Revision.
        pub device_rev: u32,
        /// Protocol.
        pub device_proto: u32,
        /// Platform.
        pub device_platform: u32,
        /// Retry handler EQ (0 = none running).
        pub pct_eq: u32,
        /// Micro-controller NIC index.
        pub uc_nic: i32,
        /// Padding.
        pub pad0: u32,
        /// Link MTU.
        pub link_mtu: u64,
        /// Link speed.
        pub link_speed: u64,
        /// Link state.
        pub link_state: u8,
        /// Padding.
        pub pad1: u8,
        /// PtlTEs.
        pub num_ptes: u16,
        /// Transmit CQs.
        pub num_txqs: u16,
        /// Target CQs.
        pub num_tgqs: u16,
        /// EQs.
        pub num_eqs: u16,
        /// CTs.
        pub num_cts: u16,
        /// ACs.
        pub num_acs: u16,
        /// TLEs.
        pub num_tles: u16,
        /// LEs.
        pub num_les: u16,
        /// FRU description.
        pub fru_description: [u8; 16],
        /// Padding.
        pub pad2: [u8; 2],
        /// `enum cassini_version`.
        pub cassini_version: u32,
        /// `enum system_type_identifier`.
        pub system_type_identifier: u32,
        /// Padding.
        pub pad3: u32,
    }
}

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
        ];
        for &(op, req, resp) in want {
            let i = op.info().unwrap();
            assert_eq!((i.req_size, i.resp_size), (req, resp), "{}", op.name());
        }
        assert!(Opcode::SvcAlloc.info().unwrap().admin_only);
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
    }
}
