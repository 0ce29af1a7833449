//! The kgni uAPI: what a client passes to `/dev/kgniN` (the `GNI_IOC_*` ioctls of the public
//! kgni driver: NIC_SETATTR, job/NTT/FMA configuration, CQ create/wait, MEM_REGISTER,
//! POST_RDMA, EP_POSTDATA, ...) as one request enum, the answers, and the mmap tokens.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use firmware_spec::gemini::gni::{JobLimits, PostState};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::PostDescriptor;

use super::hw::MmioWindow;
use crate::mem::MemWindow;

/// A communication domain handle (unique on the device).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CdmId(pub u32);

/// A completion queue: its hardware CQ number (0..1024).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqId(pub u32);

/// An endpoint handle (unique on the device).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EpId(pub u32);

/// An FMA descriptor: its hardware number (0..64 general, 64..68 OS).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FmaId(pub u32);

/// What an mmap token maps.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MapKind {
    /// The user alias page of an FMA descriptor (4 KiB).
    FmaUserPage,
    /// The PUT write-combining window of an FMA descriptor.
    FmaPutWc,
    /// The GET window of an FMA descriptor.
    FmaGet,
    /// The PUT uncached window of an FMA descriptor.
    FmaPutUc,
    /// The user alias page of a CQ (4 KiB: read index, status, write index).
    CqAlias,
    /// The entry ring of a CQ in host memory.
    CqRing,
}

impl MapKind {
    const ALL: [MapKind; 6] = [
        MapKind::FmaUserPage,
        MapKind::FmaPutWc,
        MapKind::FmaGet,
        MapKind::FmaPutUc,
        MapKind::CqAlias,
        MapKind::CqRing,
    ];
}

/// An mmap token: the "file offset" a client passes to `mmap` to map an object it owns.
/// Opaque: `kind << 32 | object number`.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct MmapToken(pub u64);

impl MmapToken {
    /// The token for `kind` of object `index`.
    pub fn new(kind: MapKind, index: u32) -> MmapToken {
        let k = MapKind::ALL.iter().position(|x| *x == kind).unwrap_or(0) as u64 + 1;
        MmapToken(k << 32 | u64::from(index))
    }

    /// What the token names, if it is well formed.
    pub fn decode(self) -> Option<(MapKind, u32)> {
        let k = (self.0 >> 32) as usize;
        let kind = *MapKind::ALL.get(k.checked_sub(1)?)?;
        Some((kind, self.0 as u32))
    }
}

impl fmt::Debug for MmapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.decode() {
            Some((k, i)) => write!(f, "MmapToken({k:?}, {i})"),
            None => write!(f, "MmapToken({:#x})", self.0),
        }
    }
}

/// A job (what ALPS programs before launching): its ptag/cookie pair, its resource limits,
/// and its node translation table (physical PE of each logical PE; empty = no NTT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobConfig {
    /// Protection tag.
    pub ptag: u8,
    /// Cookie.
    pub cookie: u32,
    /// Resource limits (`GNI_JOB_INVALID_LIMIT` = none).
    pub limits: JobLimits,
    /// Physical PE of logical PE `k`, for the NTT (empty: the job addresses physical PEs).
    pub ntt: Vec<u32>,
}

/// One kgni request.
#[derive(Clone, Debug)]
pub enum Request {
    /// Privileged: set up a job (`GNI_ConfigureJob` + `GNI_ConfigureNTT`).
    ConfigureJob(JobConfig),
    /// Privileged: tear a job down; refused while CDMs are attached to it.
    ReleaseJob {
        /// Its ptag.
        ptag: u8,
        /// Its cookie.
        cookie: u32,
    },
    /// `GNI_CdmCreate`: a communication domain (checked, not yet on a NIC).
    CdmCreate {
        /// Instance id (usually the rank).
        inst_id: u32,
        /// Protection tag.
        ptag: u8,
        /// Cookie.
        cookie: u32,
        /// `GNI_CDM_MODE_*` bits.
        modes: u32,
    },
    /// `GNI_CdmDestroy`: detach and free everything made under the CDM.
    CdmDestroy {
        /// The CDM.
        cdm: CdmId,
    },
    /// `GNI_CdmAttach` (`GNI_IOC_NIC_SETATTR`): the ptag/cookie check against the job table,
    /// and the CDM's FMA descriptor.
    CdmAttach {
        /// The CDM.
        cdm: CdmId,
        /// Device minor (-1: this device).
        device_id: i32,
    },
    /// Privileged FMA configuration: the CQ that receives the local events of the CDM's FMA
    /// descriptor (`None`: no CQ).
    FmaSetCq {
        /// The CDM.
        cdm: CdmId,
        /// A CQ of the same CDM.
        cq: Option<CqId>,
    },
    /// `GNI_CqCreate`.
    CqCreate {
        /// The CDM (NIC handle).
        cdm: CdmId,
        /// Minimum number of events the ring holds.
        entry_count: u32,
        /// Events before an interrupt (blocking CQs).
        delay_count: u32,
        /// `gni_cq_mode_t` bits.
        mode: u32,
    },
    /// `GNI_CqDestroy`: refused while an endpoint uses the CQ; a memory registration that
    /// names it as its destination CQ loses it.
    CqDestroy {
        /// The CQ.
        cq: CqId,
    },
    /// `GNI_CqWaitEvent`'s blocking part: wait until the CQ holds an event (or overran).
    /// Store the ring's read index first (user alias `RD_INDEX`).
    CqWait {
        /// A blocking CQ.
        cq: CqId,
        /// How long (`None`: for ever).
        timeout: Option<Duration>,
    },
    /// `GNI_MemRegister`.
    MemRegister {
        /// The CDM (NIC handle).
        cdm: CdmId,
        /// Start of the region in the client's address space.
        addr: u64,
        /// Length in bytes.
        len: u64,
        /// CQ for remote events into the region.
        dst_cq: Option<CqId>,
        /// `GNI_MEM_*` bits.
        flags: u32,
    },
    /// `GNI_MemDeregister`.
    MemDeregister {
        /// The CDM (NIC handle).
        cdm: CdmId,
        /// The handle `MemRegister` returned.
        handle: MemHandle,
    },
    /// `GNI_EpCreate`.
    EpCreate {
        /// The CDM (NIC handle).
        cdm: CdmId,
        /// Source CQ of the endpoint's posts.
        cq: Option<CqId>,
    },
    /// `GNI_EpBind`.
    EpBind {
        /// The endpoint.
        ep: EpId,
        /// Peer NIC address (physical PE, or logical PE when the job has an NTT).
        remote_addr: u32,
        /// Peer instance id.
        remote_id: u32,
    },
    /// `GNI_EpUnbind`.
    EpUnbind {
        /// The endpoint.
        ep: EpId,
    },
    /// `GNI_EpDestroy`.
    EpDestroy {
        /// The endpoint.
        ep: EpId,
    },
    /// `GNI_EpSetEventData`.
    EpSetEventData {
        /// The endpoint.
        ep: EpId,
        /// Data of local and global events (default: the peer's inst id).
        local: u32,
        /// Data of remote events (default: this CDM's inst id).
        remote: u32,
    },
    /// `GNI_PostRdma`: the OS-mediated BTE path.
    PostRdma {
        /// A bound endpoint.
        ep: EpId,
        /// The post.
        desc: Box<PostDescriptor>,
    },
    /// `GNI_EpPostData` / `GNI_EpPostDataWId`.
    EpPostData {
        /// The endpoint (unbound: a wildcard, which needs an id).
        ep: EpId,
        /// `WId` id (`u64::MAX` is invalid).
        id: Option<u64>,
        /// Payload (≤ 128 bytes).
        data: Vec<u8>,
        /// Most bytes accepted from the peer (≤ 128).
        out_len: usize,
    },
    /// `GNI_EpPostDataTest`: collect a finished exchange (`NotDone` while pending).
    PostDataTest {
        /// The endpoint.
        ep: EpId,
    },
    /// `GNI_EpPostDataTestById`.
    PostDataTestById {
        /// The CDM.
        cdm: CdmId,
        /// The post's id.
        id: u64,
    },
    /// `GNI_EpPostDataWait`: like `Test`, waiting up to `timeout`.
    PostDataWait {
        /// The endpoint.
        ep: EpId,
        /// How long (`None`: for ever).
        timeout: Option<Duration>,
    },
    /// `GNI_PostDataProbe`: the peer of a finished exchange, not collected.
    PostDataProbe {
        /// The CDM.
        cdm: CdmId,
    },
    /// `GNI_PostDataProbeById`.
    PostDataProbeById {
        /// The CDM.
        cdm: CdmId,
    },
    /// `GNI_EpPostDataCancel`.
    PostDataCancel {
        /// The endpoint.
        ep: EpId,
    },
    /// `GNI_EpPostDataCancelById`.
    PostDataCancelById {
        /// The CDM.
        cdm: CdmId,
        /// The post's id.
        id: u64,
    },
    /// `mmap` of a token.
    Mmap {
        /// The token.
        token: MmapToken,
    },
}

/// What `CdmAttach` returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachInfo {
    /// This NIC's physical PE (`local_addr` of `GNI_CdmAttach`).
    pub nic_addr: u32,
    /// The device minor.
    pub device_id: u32,
    /// The CDM's FMA descriptor.
    pub fma: FmaId,
    /// Token of the descriptor's user alias page.
    pub fma_page: MmapToken,
    /// Token of the PUT write-combining window.
    pub put_wc: MmapToken,
    /// Token of the GET window.
    pub get: MmapToken,
    /// Token of the PUT uncached window.
    pub put_uc: MmapToken,
    /// Bytes of each mapped window (1 GiB, or 32 KiB with `FMA_SMALL_WINDOW`).
    pub window_size: u64,
    /// The job's NTT group `(first logical PE, number of PEs)`, if it has one.
    pub ntt: Option<(u32, u32)>,
}

/// What `CqCreate` returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CqInfo {
    /// The CQ.
    pub cq: CqId,
    /// Entries of the ring (`entry_count + 1`: one slot stays empty).
    pub ring_entries: u32,
    /// Token of the ring.
    pub ring: MmapToken,
    /// Token of the user alias page.
    pub alias: MmapToken,
    /// MSI-X vector the CQ interrupts on.
    pub vector: u32,
}

/// Where `PostRdma` put the TXD.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PostInfo {
    /// BTE channel.
    pub channel: u32,
    /// Ring position on the channel.
    pub position: u16,
}

/// The outcome of a datagram exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatagramResult {
    /// `gni_post_state_t`.
    pub state: PostState,
    /// Peer NIC address (physical PE), when completed.
    pub remote_addr: u32,
    /// Peer instance id, when completed.
    pub remote_id: u32,
    /// The peer's payload, when completed.
    pub data: Vec<u8>,
    /// The post's `WId` id, if it had one.
    pub id: Option<u64>,
}

/// A mapping returned by `Mmap`.
#[derive(Clone, Debug)]
pub enum Mapping {
    /// Device registers or an FMA window.
    Mmio(Arc<MmioWindow>),
    /// Host memory (a CQ ring).
    Memory(MemWindow),
}

/// One kgni answer.
#[derive(Clone, Debug)]
pub enum Response {
    /// Done, nothing to return.
    Done,
    /// A CDM handle.
    Cdm(CdmId),
    /// A CDM attached.
    Attached(AttachInfo),
    /// A CQ.
    Cq(CqInfo),
    /// A memory handle.
    MemHandle(MemHandle),
    /// An endpoint.
    Ep(EpId),
    /// A BTE post.
    Posted(PostInfo),
    /// A datagram collected (or cancelled).
    Datagram(DatagramResult),
    /// A probe's peer.
    Probe {
        /// Peer NIC address.
        remote_addr: u32,
        /// Peer instance id.
        remote_id: u32,
    },
    /// A probe's post id.
    ProbeId(u64),
    /// A mapping.
    Mapping(Mapping),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        for k in MapKind::ALL {
            let t = MmapToken::new(k, 77);
            assert_eq!(t.decode(), Some((k, 77)));
        }
        assert_eq!(MmapToken(0).decode(), None);
        assert_eq!(MmapToken(99 << 32).decode(), None);
        assert_eq!(
            format!("{:?}", MmapToken::new(MapKind::CqRing, 3)),
            "MmapToken(CqRing, 3)"
        );
    }
}
