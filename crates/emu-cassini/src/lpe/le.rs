//! List entries (LEs), unexpected headers (ULEs) and the match rule.

use super::hw::{EventType, LeFlags, MATCH_ID_ANY, NID_ANY, PidBits, RANK_ANY};

/// A list entry as carried by an APPEND target command (`c_target_cmd`, cassini.md §2.2).
///
/// The same fields describe the criteria of SEARCH / SEARCH_AND_DELETE (`length` is then the
/// room a matching header must fit in when `NO_TRUNCATE` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Le {
    /// Software tag echoed in events (16 bits).
    pub buffer_id: u16,
    /// Start IOVA of the buffer (57 bits), in the IOVA space of `lac`.
    pub start: u64,
    /// Length of the buffer in bytes (56 bits).
    pub length: u64,
    /// Local address context of `start` (3 bits).
    pub lac: u8,
    /// Counting event bumped per the `EVENT_CT_*` flags (0 = none).
    pub ct: u16,
    /// Match bits.
    pub match_bits: u64,
    /// Bits of `match_bits` that are not compared.
    pub ignore_bits: u64,
    /// Initiator match id (`CXI_MATCH_ID`), with per-field wildcards.
    pub match_id: u32,
    /// For `MANAGE_LOCAL`: auto-unlink when the remaining room drops below this (24 bits,
    /// scaled by the device's `min_free_shift`).
    pub min_free: u32,
    /// `C_LE_*` options.
    pub flags: LeFlags,
}

impl Le {
    /// An entry covering `[start, start + length)` with the given options; it matches only
    /// match bits 0 from any initiator until changed.
    pub fn new(buffer_id: u16, start: u64, length: u64, flags: LeFlags) -> Self {
        Self {
            buffer_id,
            start,
            length,
            flags,
            match_id: MATCH_ID_ANY,
            ..Self::default()
        }
    }

    /// Sets match and ignore bits.
    pub fn with_match(mut self, match_bits: u64, ignore_bits: u64) -> Self {
        self.match_bits = match_bits;
        self.ignore_bits = ignore_bits;
        self
    }

    /// Sets the initiator match id.
    pub fn with_match_id(mut self, match_id: u32) -> Self {
        self.match_id = match_id;
        self
    }

    /// Sets the counting event.
    pub fn with_ct(mut self, ct: u16) -> Self {
        self.ct = ct;
        self
    }

    /// Sets `min_free`.
    pub fn with_min_free(mut self, min_free: u32) -> Self {
        self.min_free = min_free;
        self
    }

    /// Sets the local address context.
    pub fn with_lac(mut self, lac: u8) -> Self {
        self.lac = lac;
        self
    }

    pub(crate) fn has(&self, f: LeFlags) -> bool {
        self.flags.contains(f)
    }
}

/// Operation of an incoming Portals request (the target's view of `enum c_dma_op`; NOMATCH
/// variants arrive as plain Put/Get).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NetOp {
    /// Put (also IDC put and small message).
    #[default]
    Put,
    /// Get.
    Get,
    /// Non-fetching atomic.
    Atomic,
    /// Fetching atomic.
    FetchAtomic,
    /// Rendezvous put: `eager_length` bytes travel with the request, the rest is pulled.
    RendezvousPut,
}

impl NetOp {
    /// Event type of a communication event for this op.
    pub fn event_type(self) -> EventType {
        match self {
            Self::Put | Self::RendezvousPut => EventType::Put,
            Self::Get => EventType::Get,
            Self::Atomic => EventType::Atomic,
            Self::FetchAtomic => EventType::FetchAtomic,
        }
    }

    /// Event type when an appended entry (or search-and-delete) consumes an unexpected header
    /// of this op.
    pub fn overflow_event_type(self) -> EventType {
        match self {
            Self::Put | Self::RendezvousPut => EventType::PutOverflow,
            Self::Get => EventType::GetOverflow,
            Self::Atomic => EventType::AtomicOverflow,
            Self::FetchAtomic => EventType::FetchAtomicOverflow,
        }
    }

    /// Whether the entry's options permit this op. Puts and non-fetching atomics need OP_PUT,
    /// Gets need OP_GET, fetching atomics need both (Portals 4 `check_perm`, anchors.md §1.2).
    pub fn permitted_by(self, flags: LeFlags) -> bool {
        let put = flags.contains(LeFlags::OP_PUT);
        let get = flags.contains(LeFlags::OP_GET);
        match self {
            Self::Put | Self::RendezvousPut | Self::Atomic => put,
            Self::Get => get,
            Self::FetchAtomic => put && get,
        }
    }

    /// Gets and atomics (whose response the target must produce).
    pub fn is_get_or_amo(self) -> bool {
        matches!(self, Self::Get | Self::Atomic | Self::FetchAtomic)
    }
}

/// Atomic operation descriptor echoed in target events (`atomic_op`, `atomic_type`,
/// `cswap_op` of `c_event_target_long`). The LPE does not interpret it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicInfo {
    /// `enum c_atomic_op`.
    pub op: u8,
    /// `enum c_atomic_type`.
    pub ty: u8,
    /// `enum c_cswap_op`.
    pub cswap_op: u8,
}

/// Rendezvous details of a rendezvous put, kept in its unexpected header so that a later
/// append can complete it (cassini.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RendezvousInfo {
    /// `rendezvous_id` (8 bits) of the put.
    pub rendezvous_id: u8,
    /// Source NID (the ULE's `sfa_nid`).
    pub source_nid: u32,
    /// Bytes that travelled with the put.
    pub eager_length: u64,
    /// The put's `use_offset_for_get`.
    pub use_offset_for_get: bool,
}

/// An unexpected header (ULE): what the hardware keeps on the UNEXPECTED list after an overflow
/// match (`c_ule_entry`, cassini.md §4.2). Consumes one list entry of the PtlTE's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnexpectedHeader {
    /// Model-wide unique id; also reported in outcomes so the caller can attach data to it.
    pub id: u64,
    /// Operation.
    pub op: NetOp,
    /// Initiator match id.
    pub initiator: u32,
    /// Match bits.
    pub match_bits: u64,
    /// Header data.
    pub header_data: u64,
    /// Requested length.
    pub rlength: u64,
    /// Bytes stored in the overflow buffer (0 for a delayed Get/AMO).
    pub mlength: u64,
    /// IOVA where the stored bytes start (overflow entry start + its offset).
    pub start: u64,
    /// LAC of `start` (the overflow entry's).
    pub lac: u8,
    /// The request's remote offset.
    pub remote_offset: u64,
    /// VNI of the request.
    pub vni: u16,
    /// Atomic descriptor.
    pub atomic: AtomicInfo,
    /// Rendezvous put details.
    pub rendezvous: Option<RendezvousInfo>,
    /// Buffer id of the overflow entry the data landed in.
    pub overflow_buffer_id: u16,
}

impl UnexpectedHeader {
    /// The value `cxil_pte_status` reports in `ule_offsets` (the ULE's `start_or_offset`):
    /// for a message whose data landed in an overflow buffer, where it landed (`start`:
    /// HPE's libcxi test `pte/pte_status` expects the overflow buffer's IOVA); for a
    /// rendezvous Put, whose data is still at the source, the request's remote offset
    /// (cassini.md §4.2; libfabric's onload turns it into the source offset of its Get).
    pub fn start_or_offset(&self) -> u64 {
        if self.rendezvous.is_some() {
            self.remote_offset
        } else {
            self.start
        }
    }
}

/// A linked entry: the appended LE plus the hardware-kept local offset (manage_local).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkedLe {
    /// The entry as appended.
    pub le: Le,
    /// Bytes consumed so far (only advances for `MANAGE_LOCAL`).
    pub local_offset: u64,
}

impl LinkedLe {
    pub(crate) fn new(le: Le) -> Self {
        Self {
            le,
            local_offset: 0,
        }
    }

    /// Room left for a locally managed entry, else the whole length.
    pub fn room(&self) -> u64 {
        if self.le.has(LeFlags::MANAGE_LOCAL) {
            self.le.length.saturating_sub(self.local_offset)
        } else {
            self.le.length
        }
    }
}

/// Match bits rule: `((incoming ^ le) & !ignore) == 0` (libfabric `tag_match`, Portals 4).
#[inline]
pub fn bits_match(incoming: u64, le_bits: u64, ignore: u64) -> bool {
    (incoming ^ le_bits) & !ignore == 0
}

/// Initiator rule (cassini.md §4.2). `le_id == CXI_MATCH_ID_ANY` matches anyone. Otherwise the
/// PID field matches if it is the all-ones PID wildcard of `pid_bits` or equal; the endpoint
/// field, for logical PtlTEs, matches if it is `C_RANK_ANY` (or all ones) or equal, and for
/// physical PtlTEs if its low 20 bits are `C_NID_ANY` or it is equal.
pub fn initiator_matches(le_id: u32, initiator: u32, pid_bits: PidBits, logical: bool) -> bool {
    if le_id == MATCH_ID_ANY {
        return true;
    }
    let ep_bits = 32 - pid_bits.get();
    let ep_mask = (1u32 << ep_bits) - 1;
    let pid_any = pid_bits.pid_mask();
    let (le_pid, in_pid) = (le_id >> ep_bits, initiator >> ep_bits);
    if le_pid != pid_any && le_pid != in_pid {
        return false;
    }
    let (le_ep, in_ep) = (le_id & ep_mask, initiator & ep_mask);
    let ep_any = if logical {
        le_ep == RANK_ANY & ep_mask || le_ep == ep_mask
    } else {
        le_ep & NID_ANY == NID_ANY
    };
    ep_any || le_ep == in_ep
}

#[cfg(test)]
mod tests {
    use super::super::hw::{PID_ANY, match_id};

    const B9: PidBits = PidBits::DEFAULT;
    use super::*;

    #[test]
    fn bits_rule() {
        assert!(bits_match(0xAB, 0xAB, 0));
        assert!(!bits_match(0xAB, 0xAA, 0));
        assert!(bits_match(0xAB, 0xAA, 0x1));
        assert!(bits_match(u64::MAX, 0, u64::MAX));
    }

    #[test]
    fn initiator_wildcards() {
        let src = match_id(B9, 7, 0x42);
        assert!(initiator_matches(MATCH_ID_ANY, src, B9, false));
        assert!(initiator_matches(src, src, B9, false));
        assert!(!initiator_matches(match_id(B9, 7, 0x43), src, B9, false));
        assert!(!initiator_matches(match_id(B9, 8, 0x42), src, B9, false));
        // PID any, exact NID.
        assert!(initiator_matches(
            match_id(B9, PID_ANY, 0x42),
            src,
            B9,
            false
        ));
        // exact PID, NID any.
        assert!(initiator_matches(match_id(B9, 7, NID_ANY), src, B9, false));
        assert!(!initiator_matches(match_id(B9, 6, NID_ANY), src, B9, false));
        // logical: rank any.
        assert!(initiator_matches(match_id(B9, 7, RANK_ANY), src, B9, true));
        // NID_ANY is not a rank wildcard on a logical PtlTE.
        assert!(!initiator_matches(match_id(B9, 7, NID_ANY), src, B9, true));
    }

    #[test]
    fn fetch_atomic_needs_both() {
        assert!(!NetOp::FetchAtomic.permitted_by(LeFlags::OP_PUT));
        assert!(NetOp::FetchAtomic.permitted_by(LeFlags::OP_PUT | LeFlags::OP_GET));
        assert!(NetOp::Atomic.permitted_by(LeFlags::OP_PUT));
        assert!(!NetOp::Get.permitted_by(LeFlags::OP_PUT));
    }
}
