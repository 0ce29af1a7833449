//! The network modules below the MPI layer (MPICH's netmods): the one interface between the
//! MPI layer and a NIC. Everything above it — communicators, protocol-independent
//! point-to-point semantics, collectives, windows — is written once, in the `mpi` crate; below
//! it each NIC family does what its real stack does:
//!
//! - [`cxi`]: the Cray MPICH / Open MPI path over libfabric's CXI provider on Cassini —
//!   hardware tag matching on a PtlTE (priority and overflow lists, unexpected headers), IDC for
//!   small payloads, eager DMA, hardware rendezvous offload; software and hybrid matching by
//!   `FI_CXI_RX_MATCH_MODE`. The libfabric provider (`ofi-provider`) sits beside the MPI layer
//!   on this transport, as libfabric sits below MPI in the real stack.
//! - [`gni`]: the Cray MPICH GNI netmod / Open MPI ugni path on Gemini — SMSG mailboxes with
//!   credits, eager bounce buffers, GET rendezvous and pipelined PUT, FMA/BTE by size, lazy
//!   connections through datagrams.
//!
//! The MPI layer speaks in world ranks and 64-bit match bits ([`MatchBits`]: tag, context id,
//! and bits the transport keeps for itself); a transport matches receives to messages (in the
//! NIC or in software with [`matching`]) and moves the bytes. Buffers cross this
//! interface by value: on an emulated node, as under a real NIC, the NIC reaches only the
//! node's registered host memory, so a transport stages data in memory it registered.
//!
//! Transports learn their peers through [`pmi::Pmi`] and read their knobs (`FI_CXI_*`,
//! `MPICH_GNI_*`, ...) from an [`Env`]. The crate depends on `userlib` (and `driver`,
//! `firmware-spec`, `pmi`) only, never on an emulator.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

pub mod cxi;
pub mod env;
pub mod error;
pub mod gni;
pub mod matching;
pub mod regcache;

pub use env::Env;
pub use error::{Error, Result};

/// A rank of the whole job (`MPI_COMM_WORLD` numbering).
pub type Rank = u32;

/// The layout of the 64 match bits of a message.
///
/// | bits | field |
/// |---|---|
/// | 0..32 | MPI tag (non-negative `i32`) |
/// | 32..48 | context id of the communicator (point-to-point and collective contexts differ) |
/// | 48..64 | reserved for the transport (protocol flags, e.g. a rendezvous request) |
pub struct MatchBits;

impl MatchBits {
    /// Bits of the tag.
    pub const TAG_MASK: u64 = 0xffff_ffff;
    /// Shift of the context id.
    pub const CONTEXT_SHIFT: u32 = 32;
    /// Bits of the context id.
    pub const CONTEXT_MASK: u64 = 0xffff << 32;
    /// Bits a transport may use for itself; the MPI layer leaves them zero.
    pub const TRANSPORT_MASK: u64 = 0xffff << 48;

    /// The match bits of (`context`, `tag`).
    pub fn of(context: u16, tag: u32) -> u64 {
        (u64::from(context) << Self::CONTEXT_SHIFT) | u64::from(tag)
    }

    /// The tag of `bits`.
    pub fn tag(bits: u64) -> u32 {
        (bits & Self::TAG_MASK) as u32
    }

    /// The context id of `bits`.
    pub fn context(bits: u64) -> u16 {
        ((bits & Self::CONTEXT_MASK) >> Self::CONTEXT_SHIFT) as u16
    }
}

/// What a receive (or probe) accepts: a source (or any), and match bits compared outside
/// `ignore` (a set bit of `ignore` is not compared: `MPI_ANY_TAG` ignores [`MatchBits::TAG_MASK`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchSpec {
    /// The world rank of the sender, or `None` for `MPI_ANY_SOURCE`.
    pub source: Option<Rank>,
    /// The bits to compare.
    pub bits: u64,
    /// The bits not compared.
    pub ignore: u64,
}

impl MatchSpec {
    /// Whether a message from `source` with `bits` matches.
    pub fn matches(&self, source: Rank, bits: u64) -> bool {
        self.source.is_none_or(|s| s == source) && (self.bits ^ bits) & !self.ignore == 0
    }
}

/// Who sent a message, with which bits, and how long it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The world rank of the sender.
    pub source: Rank,
    /// The message's match bits (transport bits cleared).
    pub bits: u64,
    /// The message length in bytes (the full length, even when the receive truncated it).
    pub len: usize,
}

/// The send modes of MPI point-to-point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// `MPI_Send`: complete when the buffer may be reused.
    Standard,
    /// `MPI_Ssend`: complete only once the receiver has matched the message.
    Synchronous,
    /// `MPI_Rsend`: the receiver promised a posted receive (treated as standard).
    Ready,
}

/// The handle of an operation in flight on a transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// A send (or put, or non-fetching atomic) is complete: its buffer may be reused and, for a
    /// synchronous send, the receiver matched it.
    Sent,
    /// A receive matched `envelope`; `data` holds the first `min(envelope.len, capacity)` bytes
    /// (a longer message is an `MPI_ERR_TRUNCATE` for the MPI layer to report).
    Received {
        /// Who sent it.
        envelope: Envelope,
        /// The bytes delivered.
        data: Vec<u8>,
    },
    /// A receive matched `envelope`, and its first `len` bytes (`min(envelope.len,
    /// capacity)`) are already in the buffer given to [`Transport::test_into`]: the transport
    /// copied them there from the memory the NIC filled, with no vector in between. Only
    /// `test_into` returns it.
    Landed {
        /// Who sent it.
        envelope: Envelope,
        /// The bytes written at the start of the buffer.
        len: usize,
    },
    /// A receive was cancelled before anything matched it.
    Cancelled,
    /// A get or fetching atomic finished with these bytes.
    Fetched(Vec<u8>),
}

/// A window of registered memory on every rank (RMA), as the transport names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WinId(pub u32);

/// The element types of NIC atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmoType {
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl AmoType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            AmoType::I32 | AmoType::U32 | AmoType::F32 => 4,
            _ => 8,
        }
    }
}

/// The operations of NIC atomics (MPI_Accumulate's predefined operations, `MPI_REPLACE`,
/// `MPI_NO_OP`, and compare-and-swap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmoOp {
    /// `MPI_SUM`.
    Sum,
    /// `MPI_MIN`.
    Min,
    /// `MPI_MAX`.
    Max,
    /// `MPI_BAND`.
    Band,
    /// `MPI_BOR`.
    Bor,
    /// `MPI_BXOR`.
    Bxor,
    /// `MPI_LAND`.
    Land,
    /// `MPI_LOR`.
    Lor,
    /// `MPI_LXOR`.
    Lxor,
    /// `MPI_REPLACE` (swap when fetching).
    Replace,
    /// `MPI_NO_OP` (a fetch).
    NoOp,
    /// Compare-and-swap: the operand is stored when the target equals `compare`.
    CompareSwap,
}

/// One element-wise NIC atomic on a window.
#[derive(Clone, Debug, PartialEq)]
pub struct Atomic {
    /// The operation.
    pub op: AmoOp,
    /// The element type.
    pub ty: AmoType,
    /// The operand, one element, little-endian.
    pub operand: Vec<u8>,
    /// For [`AmoOp::CompareSwap`]: the value compared with, one element.
    pub compare: Vec<u8>,
    /// Whether the old value comes back ([`Completion::Fetched`]).
    pub fetch: bool,
}

/// Per-protocol statistics: how many messages took each path (e.g. `idc`, `eager`,
/// `rendezvous` on cxi; `E0`, `E1`, `R0`, `R1` on gni), and anything else a transport counts.
pub type Stats = BTreeMap<&'static str, u64>;

/// `NICEMU_TRANSPORT_STATS=1`: each rank prints its transport's statistics ([`Stats`]) as one
/// line on standard error at finalize, `transport stats: rank R (cxi): name=value ...`: how
/// a job of processes shows which protocol each message took (zero copy or staged, the
/// registration cache's hits and misses), as the in-process tests read them with
/// `Transport::stats`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatsReport {
    on: bool,
}

impl StatsReport {
    /// From `NICEMU_TRANSPORT_STATS` (default off).
    pub fn from_env(env: &Env) -> Result<Self> {
        Ok(StatsReport {
            on: env.flag("NICEMU_TRANSPORT_STATS", false)?,
        })
    }

    /// Print rank `rank`'s `stats` of transport `name`, if asked for.
    pub fn print(&self, rank: Rank, name: &str, stats: &Stats) {
        if !self.on {
            return;
        }
        let mut line = format!("transport stats: rank {rank} ({name}):");
        for (k, v) in stats {
            line.push_str(&format!(" {}={v}", k.replace(' ', "_")));
        }
        env::eprint_line(&line);
    }
}

/// What `test` and `test_into` do on every transport: `look` for the completion of an
/// operation, and if there is none yet, make one round of progress and look again.
pub(crate) fn look_around_progress<T: Transport + ?Sized>(
    t: &mut T,
    mut look: impl FnMut(&mut T) -> Result<Option<Completion>>,
) -> Result<Option<Completion>> {
    if let Some(c) = look(t)? {
        return Ok(Some(c));
    }
    t.progress()?;
    look(t)
}

/// A NIC as the MPI layer sees it. One per rank; not shared between threads.
pub trait Transport {
    /// `cxi` or `gni`.
    fn name(&self) -> &'static str;

    /// This rank.
    fn rank(&self) -> Rank;

    /// The number of ranks.
    fn size(&self) -> u32;

    /// Start sending `data` to `dest` with match `bits`. The transport copies or stages the
    /// bytes before returning, so the caller's buffer is free at once; the operation completes
    /// with [`Completion::Sent`] (for [`SendMode::Synchronous`], once the receiver matched it).
    fn send(&mut self, dest: Rank, bits: u64, data: &[u8], mode: SendMode) -> Result<OpId>;

    /// Post a receive of at most `capacity` bytes for messages matching `spec`. Receives match
    /// messages in the order they are posted, messages from one sender in the order they were
    /// sent (MPI's non-overtaking rule).
    fn recv(&mut self, spec: MatchSpec, capacity: usize) -> Result<OpId>;

    /// Cancel a posted receive; `true` when it was cancelled (it then completes with
    /// [`Completion::Cancelled`]), `false` when it had already matched.
    fn cancel(&mut self, op: OpId) -> Result<bool>;

    /// Whether a message matching `spec` has arrived and is not yet received (`MPI_Iprobe`);
    /// makes progress.
    fn probe(&mut self, spec: MatchSpec) -> Result<Option<Envelope>>;

    /// Like [`probe`](Self::probe), but the message found is taken out of matching
    /// (`MPI_Improbe`): no other receive can match it, and the returned operation completes
    /// with it as [`Completion::Received`] (`MPI_Mrecv`) with room for the whole message.
    fn claim(&mut self, spec: MatchSpec) -> Result<Option<(Envelope, OpId)>>;

    /// Make progress and tell whether `op` is complete. Once it returns `Some`, `op` is gone.
    fn test(&mut self, op: OpId) -> Result<Option<Completion>>;

    /// Like [`test`](Self::test), for a receive whose buffer is `out` (as long as the
    /// capacity the receive was posted with): a transport may write the received bytes
    /// straight into `out` and complete with [`Completion::Landed`] instead of handing them
    /// over in a [`Completion::Received`] vector. The default is `test`.
    fn test_into(&mut self, op: OpId, _out: &mut [u8]) -> Result<Option<Completion>> {
        self.test(op)
    }
    /// The smallest message this transport sends from, and receives into, the caller's own
    /// memory without a copy ([`send_zero_copy`](Self::send_zero_copy),
    /// [`recv_zero_copy`](Self::recv_zero_copy)); `None` when it cannot (its NIC does not
    /// reach this process's memory: the node is not hosted in this process). Default `None`.
    fn zero_copy_min(&self) -> Option<usize> {
        None
    }

    /// Start sending the `len` bytes at address `va` of this process to `dest`, read by the
    /// NIC where they are (the buffer is registered through the transport's registration
    /// cache). Unlike [`send`](Self::send), the caller leaves the memory mapped and unchanged
    /// until the operation completes — MPI's rule for the buffer of a nonblocking send.
    /// Only when [`zero_copy_min`](Self::zero_copy_min) is `Some`; memory that is not mapped
    /// is an [`Error::Arg`].
    fn send_zero_copy(
        &mut self,
        _dest: Rank,
        _bits: u64,
        _va: u64,
        _len: usize,
        _mode: SendMode,
    ) -> Result<OpId> {
        Err(Error::Transport(format!(
            "{}: no zero-copy sends on this node",
            self.name()
        )))
    }

    /// Post a receive of at most `capacity` bytes for messages matching `spec`, landing
    /// where the NIC puts them: `[va, va + capacity)` of this process. It completes with
    /// [`Completion::Landed`] (the bytes are there), or [`Completion::Cancelled`]. The caller
    /// leaves the memory mapped and does not touch it until then. Only when
    /// [`zero_copy_min`](Self::zero_copy_min) is `Some`.
    fn recv_zero_copy(&mut self, _spec: MatchSpec, _va: u64, _capacity: usize) -> Result<OpId> {
        Err(Error::Transport(format!(
            "{}: no zero-copy receives on this node",
            self.name()
        )))
    }

    /// Register `[va, va + len)` of this process now and keep it registered until
    /// [`forget_registered`](Self::forget_registered) (`MPI_Alloc_mem` hands out such
    /// memory): zero-copy messages in it find it registered. A no-op where there is no zero
    /// copy.
    fn keep_registered(&mut self, _va: u64, _len: usize) -> Result<()> {
        Ok(())
    }

    /// Stop keeping the memory registered by [`keep_registered`](Self::keep_registered) at
    /// `va` (`MPI_Free_mem`).
    fn forget_registered(&mut self, _va: u64) {}

    /// Make progress on everything in flight; `true` if anything happened.
    fn progress(&mut self) -> Result<bool>;

    /// Put on the wire what a transport holds back for the next [`progress`](Self::progress)
    /// (sends written without their doorbell, like libfabric's `FI_MORE`). A caller that may
    /// not make progress on this transport soon (a libfabric application waiting on another
    /// endpoint) calls it after posting. The default holds nothing back.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    /// Nothing to do until the NIC reports something: block until it interrupts this rank
    /// (an event arrived) or `limit` passes. True if the thread slept; false when it must
    /// poll instead (the device needs the caller to progress it, the transport has timed
    /// work of its own, or something already waits), and the caller polls again. The
    /// default never sleeps.
    fn sleep(&mut self, _limit: std::time::Duration) -> Result<bool> {
        Ok(false)
    }

    /// Per-protocol statistics since init.
    fn stats(&self) -> Stats;

    /// Register `len` bytes of window memory on this rank (zeroed); returns the window and the
    /// key the other ranks need to reach it (exchanged by the MPI layer).
    fn win_create(&mut self, len: usize) -> Result<(WinId, Vec<u8>)>;

    /// Give `win` the keys of every rank (indexed by rank) so that RMA can target them.
    fn win_connect(&mut self, win: WinId, keys: Vec<Vec<u8>>) -> Result<()>;

    /// Read this rank's part of `win` at `offset` (local load).
    fn win_read(&mut self, win: WinId, offset: usize, out: &mut [u8]) -> Result<()>;

    /// Write this rank's part of `win` at `offset` (local store).
    fn win_write(&mut self, win: WinId, offset: usize, data: &[u8]) -> Result<()>;

    /// Where this rank's part of `win` lives in this process (byte 0 of it), when its memory
    /// is this process's own and stays put until [`win_free`](Self::win_free): a program may
    /// then load and store the window directly (the unified memory model) instead of through
    /// [`win_read`](Self::win_read) / [`win_write`](Self::win_write). `None` otherwise.
    fn win_memory(&mut self, _win: WinId) -> Option<*mut u8> {
        None
    }

    /// Put `data` into `target`'s part of `win` at `offset` (NIC RDMA write). Completes with
    /// [`Completion::Sent`] once the data is at the target (remote completion).
    fn put(&mut self, win: WinId, target: Rank, offset: usize, data: &[u8]) -> Result<OpId>;

    /// Get `len` bytes of `target`'s part of `win` at `offset` (NIC RDMA read); completes
    /// with [`Completion::Fetched`].
    fn get(&mut self, win: WinId, target: Rank, offset: usize, len: usize) -> Result<OpId>;

    /// One NIC atomic on the element at `offset` of `target`'s part of `win`. Completes with
    /// [`Completion::Fetched`] when `atomic.fetch`, else [`Completion::Sent`] at remote
    /// completion. An operation/type pair the NIC cannot do is an `MPI_ERR_OP`.
    fn atomic(&mut self, win: WinId, target: Rank, offset: usize, atomic: &Atomic) -> Result<OpId>;

    /// Release `win` on this rank.
    fn win_free(&mut self, win: WinId) -> Result<()>;

    /// `MPI_Finalize`'s part: wait until everything this rank sent has been delivered and
    /// every rank has got that far, so that no peer still writes into memory this rank is
    /// about to release. Collective over the job.
    fn finalize(&mut self) -> Result<()> {
        Ok(())
    }

    /// A fatal error on this rank: abort the whole job (MPI's default error handler,
    /// `MPI_ERRORS_ARE_FATAL`, for network failures), so no peer waits for this rank forever.
    fn abort(&mut self, _why: &str) {}

    /// Why the job was aborted by some rank, if it was.
    fn aborted(&self) -> Option<String> {
        None
    }
}
