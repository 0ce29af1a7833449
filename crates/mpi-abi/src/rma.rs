//! One-sided communication (`MPI_Win_*`, `MPI_Put`, ...). The emulated NIC reaches memory of
//! the emulated node only, so each window is a window of the mpi crate (node memory, reached
//! by NIC RDMA and atomics). The node's memory is memory of this process, so:
//!
//! - `MPI_Win_allocate` hands the program the window's own memory (the node memory the NIC
//!   reads and writes): the unified memory model (`MPI_WIN_UNIFIED`, MPI 4.1 §12.4), with no
//!   copies at synchronizations.
//! - `MPI_Win_create` exposes memory the program already has, which the NIC cannot reach: the
//!   program's memory is the window's private copy in the sense of the separate memory model
//!   (`MPI_WIN_SEPARATE`). Every synchronization call first publishes the program's local
//!   stores (the bytes that changed since the last synchronization) into the window, then,
//!   once the window's operations are complete, copies the window back into the program's
//!   memory.
//!
//! - `MPI_Win_create_dynamic` allocates node memory for the memory the program attaches
//!   later ([`attach`]): each attached region gets a place in it and is a private copy in the
//!   separate model, as above. A directory at the start of the window (addresses, lengths,
//!   places of the regions) is what an origin reads from the target's node memory with a NIC
//!   get to turn a target displacement — an address (`MPI_Get_address`, relative to
//!   `MPI_BOTTOM`), as the standard has it for dynamic windows (MPI 4.1 §12.2.4) — into a
//!   place in the window.
//!
//! A get is left in flight on the NIC until a synchronization completes it (`MPI_Win_flush`,
//! `MPI_Win_unlock`, `MPI_Win_fence`, ...), which then writes its bytes into the origin
//! buffer, so the gets of an epoch overlap on the network.

#![forbid(unsafe_code)]

use std::ffi::c_int;
use std::rc::Rc;

use mpi::typemap::Layout;
use mpi::window::{PendingGet, PendingPut};
use mpi::{AccumulateOp, LockType, SimpleCommunicator, Window};

use crate::coll::system_op;
use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::ffi::mem::{Lent, OwnedMem, window_memory};
use crate::state::State;
use crate::types::count;

/// The values behind the window attributes (stable addresses for `MPI_Win_get_attr`).
#[derive(Debug, Default)]
pub(crate) struct WinAttrs {
    pub base: usize,
    pub size: isize,
    pub disp_unit: c_int,
    pub flavor: c_int,
    pub model: c_int,
}

/// How the program's memory of a window relates to the window's memory.
enum Memory {
    /// The program's memory is the window's (`MPI_WIN_UNIFIED`).
    Unified,
    /// The program's memory is a private copy (`MPI_WIN_SEPARATE`); `snapshot` is that copy
    /// as of the last synchronization.
    Separate { snapshot: Vec<u8> },
}

/// An `MPI_Get` in flight: its parts (one per contiguous target run, in the order of the
/// packed data) and where the bytes go.
struct Get {
    /// Names it for a request (`MPI_Rget`).
    id: u64,
    parts: Vec<PendingGet>,
    buf: Lent,
    layout: Rc<Layout>,
    count: usize,
}

/// Regions a dynamic window's directory can name.
const DIR_ENTRIES: usize = 64;
/// Bytes of the directory: a count, then (address, length, place) per region.
const DIR_BYTES: usize = 8 + DIR_ENTRIES * 24;
/// Where the attached regions' places start in a dynamic window.
const ARENA_AT: usize = 2048;
/// Node memory a dynamic window has for attached regions (committed as it is touched).
const ARENA_BYTES: usize = 16 << 20;

/// Memory the program attached to a dynamic window: its private copy at `base`, its place
/// `at` (bytes from the arena's start) in the window, the copy as of the last
/// synchronization.
struct Attached {
    base: Lent,
    len: usize,
    at: usize,
    snapshot: Vec<u8>,
}

/// A window the program holds.
pub(crate) struct WinObj {
    pub win: Window<u8>,
    pub comm: SimpleCommunicator,
    /// The program's memory of the window.
    pub base: Lent,
    pub size: usize,
    pub disp_unit: usize,
    memory: Memory,
    /// Gets issued and not yet written to their origin buffers, oldest first.
    gets: Vec<Get>,
    /// The id of the next get.
    next_get: u64,
    /// A dynamic window (`MPI_Win_create_dynamic`).
    dynamic: bool,
    /// Memory attached to a dynamic window.
    attached: Vec<Attached>,
    /// Memory this library allocated for `MPI_Win_allocate` (when the window's own memory
    /// cannot be handed out), freed after the window.
    _owned: Option<OwnedMem>,
    pub errh: Handle,
    pub attrs: Box<WinAttrs>,
}

impl WinObj {
    /// Publish the program's local stores into this rank's part of the window (separate
    /// model).
    fn publish(&mut self) -> AResult<()> {
        if let Memory::Separate { snapshot } = &mut self.memory {
            publish_region(&self.win, self.base, 0, snapshot)?;
        }
        for a in &mut self.attached {
            publish_region(&self.win, a.base, ARENA_AT + a.at, &mut a.snapshot)?;
        }
        Ok(())
    }

    /// Copy this rank's part of the window into the program's memory (separate model).
    fn refresh(&mut self) -> AResult<()> {
        if let Memory::Separate { snapshot } = &mut self.memory {
            refresh_region(&self.win, self.base, 0, snapshot)?;
        }
        for a in &mut self.attached {
            refresh_region(&self.win, a.base, ARENA_AT + a.at, &mut a.snapshot)?;
        }
        Ok(())
    }

    /// Write the gets that synchronization completed into their origin buffers.
    fn deliver(&mut self) -> AResult<()> {
        let mut i = 0;
        while i < self.gets.len() {
            let g = &self.gets[i];
            if !g.parts.iter().all(|p| self.win.get_ready(p)) {
                i += 1;
                continue;
            }
            let g = self.gets.remove(i);
            let mut data = Vec::new();
            for p in &g.parts {
                data.extend(self.win.take_get(p).unwrap_or_default());
            }
            g.buf.write(&g.layout, g.count, &data)?;
        }
        Ok(())
    }

    /// Run synchronization `f` between a publish and a refresh; then the gets it completed
    /// reach their origin buffers.
    fn sync(&mut self, f: impl FnOnce(&mut Window<u8>) -> mpi::Result<()>) -> AResult<()> {
        self.publish()?;
        f(&mut self.win)?;
        self.refresh()?;
        self.deliver()
    }
}

/// Write the bytes of the program's memory at `base` that changed since `snapshot` into the
/// window at byte `at`.
fn publish_region(win: &Window<u8>, base: Lent, at: usize, snapshot: &mut Vec<u8>) -> AResult<()> {
    if snapshot.is_empty() {
        return Ok(());
    }
    let now = base.read_bytes(snapshot.len())?;
    let mut i = 0;
    while i < now.len() {
        if now[i] == snapshot[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < now.len() && now[i] != snapshot[i] {
            i += 1;
        }
        win.local_write(at + start, &now[start..i])?;
    }
    *snapshot = now;
    Ok(())
}

/// Copy the window's bytes at `at` into the program's memory at `base` (and `snapshot`).
fn refresh_region(win: &Window<u8>, base: Lent, at: usize, snapshot: &mut [u8]) -> AResult<()> {
    if snapshot.is_empty() {
        return Ok(());
    }
    win.local_read_bytes(at, snapshot)?;
    base.write_bytes(snapshot)
}

/// `MPI_Win_create` (`base` given), `MPI_Win_allocate` (`base` `None`: this library
/// allocates) and `MPI_Win_create_dynamic` (`size` 0): the window handle and its base.
pub(crate) fn create(
    s: &mut State,
    base: Option<Lent>,
    size: i64,
    disp_unit: c_int,
    ch: Handle,
    flavor: c_int,
) -> AResult<(Handle, usize)> {
    let size = usize::try_from(size)
        .map_err(|_| AbiError::new(MPI_ERR_SIZE, format!("window size {size} is negative")))?;
    if disp_unit <= 0 {
        return Err(AbiError::new(
            MPI_ERR_ARG,
            format!("displacement unit {disp_unit} is not positive"),
        ));
    }
    let obj = s.comm(ch)?;
    let comm = obj.comm.clone();
    let errh = obj.errh;
    // Whole 64-bit words, so that every element sits in a word the NIC's compare-and-swap
    // can reach (the program sees `size` bytes).
    let dynamic = flavor == MPI_WIN_FLAVOR_DYNAMIC;
    let bytes = if dynamic {
        ARENA_AT + ARENA_BYTES
    } else {
        size.next_multiple_of(8)
    };
    let win = comm.window_allocate::<u8>(bytes)?;
    let own = match base {
        None if size > 0 => window_memory(&win),
        _ => None,
    };
    let (owned, base, memory) = match (base, own) {
        (Some(b), _) => (
            None,
            b,
            Memory::Separate {
                snapshot: vec![0; size],
            },
        ),
        (None, Some(b)) => (None, b, Memory::Unified),
        (None, None) => {
            let (m, b) = OwnedMem::new(size);
            (
                Some(m),
                b,
                Memory::Separate {
                    snapshot: vec![0; size],
                },
            )
        }
    };
    let model = match memory {
        Memory::Unified => MPI_WIN_UNIFIED,
        Memory::Separate { .. } => MPI_WIN_SEPARATE,
    };
    let mut w = WinObj {
        win,
        comm,
        base,
        size,
        disp_unit: disp_unit as usize,
        memory,
        gets: Vec::new(),
        next_get: 0,
        dynamic,
        attached: Vec::new(),
        _owned: owned,
        errh,
        attrs: Box::new(WinAttrs {
            // A dynamic window's base is MPI_BOTTOM.
            base: if dynamic { 0 } else { base.addr() },
            size: size as isize,
            disp_unit,
            flavor,
            model,
        }),
    };
    // The window starts with the program's memory (MPI_Win_create exposes it as it is).
    w.publish()?;
    let h = s.handle();
    s.wins.insert(h, w);
    Ok((h, base.addr()))
}

pub(crate) fn win(s: &mut State, h: Handle) -> AResult<&mut WinObj> {
    s.wins
        .get_mut(&h)
        .ok_or_else(|| AbiError::new(MPI_ERR_WIN, format!("{h:#x} is not a window handle")))
}

/// `MPI_Win_free`.
pub(crate) fn free(s: &mut State, h: &mut Handle) -> AResult<()> {
    let mut w = s
        .wins
        .remove(h)
        .ok_or_else(|| AbiError::new(MPI_ERR_WIN, format!("{:#x} is not a window handle", *h)))?;
    w.publish()?;
    w.win.flush_all()?;
    w.comm.barrier()?;
    w.refresh()?;
    w.deliver()?;
    *h = MPI_WIN_NULL;
    Ok(())
}

/// `MPI_Win_fence`.
pub(crate) fn fence(s: &mut State, h: Handle) -> AResult<()> {
    win(s, h)?.sync(|w| w.fence())
}

/// `MPI_Win_lock`.
pub(crate) fn lock(s: &mut State, kind: c_int, rank: c_int, h: Handle) -> AResult<()> {
    let k = match kind {
        MPI_LOCK_EXCLUSIVE => LockType::Exclusive,
        MPI_LOCK_SHARED => LockType::Shared,
        _ => return Err(AbiError::new(MPI_ERR_LOCKTYPE, format!("lock type {kind}"))),
    };
    let w = win(s, h)?;
    check_target(w, rank)?;
    w.sync(|w| w.lock(k, rank))
}

fn check_target(w: &WinObj, rank: c_int) -> AResult<()> {
    if (0..w.comm.size()).contains(&rank) {
        Ok(())
    } else {
        Err(AbiError::new(
            MPI_ERR_RANK,
            format!(
                "rank {rank} is not in the window's group of {}",
                w.comm.size()
            ),
        ))
    }
}

/// `MPI_Win_unlock`.
pub(crate) fn unlock(s: &mut State, rank: c_int, h: Handle) -> AResult<()> {
    let w = win(s, h)?;
    check_target(w, rank)?;
    w.sync(|w| w.unlock(rank))
}

/// `MPI_Win_lock_all` / `MPI_Win_unlock_all`.
pub(crate) fn lock_all(s: &mut State, h: Handle, lock: bool) -> AResult<()> {
    win(s, h)?.sync(|w| if lock { w.lock_all() } else { w.unlock_all() })
}

/// `MPI_Win_flush(_local)` (`rank` given) and `MPI_Win_flush(_local)_all`.
pub(crate) fn flush(s: &mut State, rank: Option<c_int>, h: Handle) -> AResult<()> {
    let w = win(s, h)?;
    if let Some(r) = rank {
        check_target(w, r)?;
    }
    w.sync(|w| match rank {
        Some(r) => w.flush(r),
        None => w.flush_all(),
    })
}

/// The ranks of the window's communicator that group `g` holds (`MPI_ERR_GROUP` for a
/// member outside the window's group).
fn group_ranks(s: &State, g: Handle, h: Handle) -> AResult<Vec<c_int>> {
    let grp = s.group(g)?;
    let wg = s
        .wins
        .get(&h)
        .ok_or_else(|| AbiError::new(MPI_ERR_WIN, format!("{h:#x} is not a window handle")))?
        .comm
        .group();
    (0..grp.size())
        .map(|r| {
            grp.translate_rank(r, &wg)?.ok_or_else(|| {
                AbiError::new(
                    MPI_ERR_GROUP,
                    format!("member {r} of the group is not in the window's group"),
                )
            })
        })
        .collect()
}

/// `MPI_Win_post` (`post`) and `MPI_Win_start` (`!post`) with the ranks of group `g`.
pub(crate) fn post_start(s: &mut State, g: Handle, h: Handle, post: bool) -> AResult<()> {
    let ranks = group_ranks(s, g, h)?;
    win(s, h)?.sync(|w| {
        if post {
            w.post(&ranks)
        } else {
            w.start(&ranks)
        }
    })
}

/// `MPI_Win_complete` (`complete`) and `MPI_Win_wait` (`!complete`).
pub(crate) fn complete_wait(s: &mut State, h: Handle, complete: bool) -> AResult<()> {
    win(s, h)?.sync(|w| if complete { w.complete() } else { w.wait() })
}

/// `MPI_Win_test`: whether the exposure epoch ended.
pub(crate) fn test(s: &mut State, h: Handle) -> AResult<bool> {
    let w = win(s, h)?;
    w.publish()?;
    let done = w.win.test()?;
    w.refresh()?;
    w.deliver()?;
    Ok(done)
}

/// `MPI_Win_sync`.
pub(crate) fn win_sync(s: &mut State, h: Handle) -> AResult<()> {
    win(s, h)?.sync(|_| Ok(()))
}

/// The longest run of one NIC operation: a Cassini get is answered by one reply carrying all
/// its bytes, which must land within the initiator's request timeout; on a slow (debug) build
/// of the emulator a 1 MiB reply did not. Longer runs are split; the pieces are in flight
/// together.
const MAX_RUN: usize = 64 << 10;

/// The byte runs of `count` elements of `layout` at `disp` units of the target's part, in
/// the order of the packed data, a run that starts where the previous one ends merged into it
/// (`count` contiguous elements are one run: one NIC operation, not one per element), then
/// cut into pieces of at most [`MAX_RUN`] bytes. On a dynamic window `disp` is an address in
/// memory `rank` attached, and the runs are turned into places of the window.
fn runs(
    w: &mut WinObj,
    rank: c_int,
    disp: isize,
    layout: &Layout,
    n: usize,
) -> AResult<Vec<(usize, usize)>> {
    let merged = if w.dynamic {
        dynamic_runs(w, rank, disp, layout, n)?
    } else {
        merged_runs(w.size, w.disp_unit, disp, layout, n)?
    };
    let mut out = Vec::with_capacity(merged.len());
    for (at, len) in merged {
        let mut done = 0;
        while done < len || (len == 0 && done == 0) {
            let piece = (len - done).min(MAX_RUN);
            out.push((at + done, piece));
            done += piece.max(1);
        }
    }
    Ok(out)
}

fn merged_runs(
    size: usize,
    disp_unit: usize,
    disp: isize,
    layout: &Layout,
    n: usize,
) -> AResult<Vec<(usize, usize)>> {
    let base = disp
        .checked_mul(disp_unit as isize)
        .ok_or_else(|| AbiError::new(MPI_ERR_RMA_RANGE, "displacement overflows"))?;
    let mut out = Vec::new();
    let ext = layout.extent();
    for i in 0..n as isize {
        for &(o, l) in layout.blocks() {
            let at = base + i * ext + o;
            let at = usize::try_from(at).map_err(|_| {
                AbiError::new(
                    MPI_ERR_RMA_RANGE,
                    format!("target offset {at} is before the window"),
                )
            })?;
            if at.checked_add(l).is_none_or(|end| end > size) {
                return Err(AbiError::new(
                    MPI_ERR_RMA_RANGE,
                    format!("{l} bytes at target offset {at} outside a window of {size} bytes"),
                ));
            }
            match out.last_mut() {
                Some((start, len)) if *start + *len == at => *len += l,
                _ => out.push((at, l)),
            }
        }
    }
    Ok(out)
}

/// The runs of an access to a dynamic window: addresses of memory `rank` attached, turned
/// into places of the window with `rank`'s directory.
fn dynamic_runs(
    w: &mut WinObj,
    rank: c_int,
    disp: isize,
    layout: &Layout,
    n: usize,
) -> AResult<Vec<(usize, usize)>> {
    let raw = merged_runs(usize::MAX, 1, disp, layout, n)?;
    if raw.iter().all(|r| r.1 == 0) {
        return Ok(raw.into_iter().map(|(_, l)| (ARENA_AT, l)).collect());
    }
    let dir = directory(w, rank)?;
    raw.into_iter()
        .map(|(addr, len)| {
            dir.iter()
                .find(|e| addr >= e.0 && addr + len <= e.0 + e.1)
                .map(|e| (ARENA_AT + e.2 + (addr - e.0), len))
                .ok_or_else(|| {
                    AbiError::new(
                        MPI_ERR_RMA_RANGE,
                        format!(
                            "{len} bytes at address {addr:#x} are not in memory rank {rank} \
                             attached to the dynamic window ({} regions attached)",
                            dir.len()
                        ),
                    )
                })
        })
        .collect()
}

/// `rank`'s directory of a dynamic window: (address, length, place) of each region; read
/// from its node memory with a NIC get for another rank.
fn directory(w: &mut WinObj, rank: c_int) -> AResult<Vec<(usize, usize, usize)>> {
    let bytes = if rank == w.comm.rank() {
        let mut b = vec![0u8; DIR_BYTES];
        w.win.local_read_bytes(0, &mut b)?;
        b
    } else {
        let g = w.win.get_start(rank, 0, DIR_BYTES)?;
        w.win.get_wait(g)?
    };
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b) as usize
    };
    let n = word(0).min(DIR_ENTRIES);
    Ok((0..n)
        .map(|e| (word(1 + 3 * e), word(2 + 3 * e), word(3 + 3 * e)))
        .collect())
}

/// Write this rank's directory of dynamic window `w` into its node memory.
fn write_directory(w: &WinObj) -> AResult<()> {
    let mut b = Vec::with_capacity(DIR_BYTES);
    b.extend((w.attached.len() as u64).to_le_bytes());
    for a in &w.attached {
        for v in [a.base.addr(), a.len, a.at] {
            b.extend((v as u64).to_le_bytes());
        }
    }
    w.win.local_write(0, &b)?;
    Ok(())
}

/// `MPI_Win_attach`: expose `size` bytes of the program's memory at `base` through dynamic
/// window `h`. The memory gets a place in the window's node memory, aligned as the address
/// is (mod 8, so that the NIC's atomics reach its 64-bit words), and a directory entry.
pub(crate) fn attach(s: &mut State, h: Handle, base: Lent, size: isize) -> AResult<()> {
    let w = win(s, h)?;
    if !w.dynamic {
        return Err(AbiError::new(
            MPI_ERR_RMA_FLAVOR,
            "MPI_Win_attach needs a window made by MPI_Win_create_dynamic",
        ));
    }
    let len = usize::try_from(size)
        .map_err(|_| AbiError::new(MPI_ERR_SIZE, format!("attaching {size} bytes")))?;
    let addr = base.addr();
    if addr == 0 && len > 0 {
        return Err(AbiError::new(
            MPI_ERR_ARG,
            "attaching memory at a null address",
        ));
    }
    if let Some(a) = w
        .attached
        .iter()
        .find(|a| addr < a.base.addr() + a.len && a.base.addr() < addr + len)
    {
        return Err(AbiError::new(
            MPI_ERR_RMA_ATTACH,
            format!(
                "{len} bytes at {addr:#x} overlap the {} bytes attached at {:#x}",
                a.len,
                a.base.addr()
            ),
        ));
    }
    if w.attached.len() == DIR_ENTRIES {
        return Err(AbiError::unsupported(&format!(
            "MPI_Win_attach of more than {DIR_ENTRIES} regions to one dynamic window"
        )));
    }
    // First fit among the places in use, in order.
    let mut used: Vec<(usize, usize)> = w.attached.iter().map(|a| (a.at, a.len)).collect();
    used.sort_unstable();
    let fit = |from: usize| from.next_multiple_of(8) + addr % 8;
    let mut at = fit(0);
    for (u, l) in used {
        if at + len <= u {
            break;
        }
        at = at.max(fit(u + l));
    }
    if at + len > ARENA_BYTES {
        return Err(AbiError::unsupported(&format!(
            "MPI_Win_attach of {len} bytes: a dynamic window holds {} MiB of attached memory \
             ({} bytes attached)",
            ARENA_BYTES >> 20,
            w.attached.iter().map(|a| a.len).sum::<usize>()
        )));
    }
    // The window exposes the memory as it is.
    let snapshot = if len > 0 {
        base.read_bytes(len)?
    } else {
        Vec::new()
    };
    w.win.local_write(ARENA_AT + at, &snapshot)?;
    w.attached.push(Attached {
        base,
        len,
        at,
        snapshot,
    });
    write_directory(w)
}

/// `MPI_Win_detach`: stop exposing the memory attached at `base`.
pub(crate) fn detach(s: &mut State, h: Handle, base: Lent) -> AResult<()> {
    let w = win(s, h)?;
    if !w.dynamic {
        return Err(AbiError::new(
            MPI_ERR_RMA_FLAVOR,
            "MPI_Win_detach needs a window made by MPI_Win_create_dynamic",
        ));
    }
    let i = w
        .attached
        .iter()
        .position(|a| a.base == base)
        .ok_or_else(|| {
            AbiError::new(
                MPI_ERR_RMA_ATTACH,
                format!("no memory is attached at {:#x}", base.addr()),
            )
        })?;
    w.attached.remove(i);
    write_directory(w)
}

/// Origin-side arguments of an RMA call.
pub(crate) struct Origin {
    pub buf: Lent,
    pub count: c_int,
    pub dtype: Handle,
}

/// Target-side arguments of an RMA call.
pub(crate) struct Target {
    pub rank: c_int,
    pub disp: isize,
    pub count: c_int,
    pub dtype: Handle,
}

fn target_layout(s: &State, t: &Target) -> AResult<(std::rc::Rc<Layout>, usize)> {
    Ok((s.layout(t.dtype)?, count(t.count)?))
}

/// What an RMA call does at the target.
pub(crate) enum Access {
    Put,
    Get,
    Acc(Handle),
}

fn acc_op(op: Handle) -> AResult<AccumulateOp> {
    match op {
        MPI_REPLACE => Ok(AccumulateOp::Replace),
        MPI_NO_OP => Ok(AccumulateOp::NoOp),
        _ => system_op(op).map(AccumulateOp::Op).ok_or_else(|| {
            AbiError::new(
                MPI_ERR_OP,
                format!("{op:#x} is not a predefined operation (RMA takes predefined ones only)"),
            )
        }),
    }
}

/// `MPI_Put` and `MPI_Accumulate`; with `track` (`MPI_Rput`), the puts in flight.
pub(crate) fn put(
    s: &mut State,
    o: Origin,
    t: Target,
    what: Access,
    h: Handle,
    track: bool,
) -> AResult<Vec<PendingPut>> {
    let ol = s.layout(o.dtype)?;
    let data = o.buf.read(&ol, count(o.count)?)?;
    let (tl, tn) = target_layout(s, &t)?;
    let w = win(s, h)?;
    let mut tracked = Vec::new();
    if t.rank == MPI_PROC_NULL {
        return Ok(tracked);
    }
    check_target(w, t.rank)?;
    if data.len() != tl.size() * tn {
        return Err(AbiError::new(
            MPI_ERR_COUNT,
            format!(
                "{} origin bytes for {} target bytes",
                data.len(),
                tl.size() * tn
            ),
        ));
    }
    let mut at = 0;
    for (off, len) in runs(w, t.rank, t.disp, &tl, tn)? {
        let chunk = &data[at..at + len];
        match what {
            Access::Put | Access::Get if track => {
                tracked.push(w.win.put_start(chunk, t.rank, off)?);
            }
            Access::Put | Access::Get => w.win.put(chunk, t.rank, off)?,
            Access::Acc(op) => {
                let kind = tl.kind().ok_or_else(|| {
                    AbiError::new(
                        MPI_ERR_TYPE,
                        "accumulate needs a datatype of one basic type",
                    )
                })?;
                w.win
                    .accumulate_kind(kind, chunk, t.rank, off, acc_op(op)?)?;
            }
        }
        at += len;
    }
    Ok(tracked)
}

/// `MPI_Get`: the id of the get in flight (`None` for `MPI_PROC_NULL`).
pub(crate) fn get(s: &mut State, o: Origin, t: Target, h: Handle) -> AResult<Option<u64>> {
    let ol = s.layout(o.dtype)?;
    let on = count(o.count)?;
    let (tl, tn) = target_layout(s, &t)?;
    let w = win(s, h)?;
    if t.rank == MPI_PROC_NULL {
        return Ok(None);
    }
    check_target(w, t.rank)?;
    let parts = runs(w, t.rank, t.disp, &tl, tn)?
        .into_iter()
        .map(|(off, len)| w.win.get_start(t.rank, off, len))
        .collect::<mpi::Result<Vec<_>>>()?;
    // Completed (and written to the origin buffer) by the synchronization that ends the
    // access: MPI lets the program use the buffer only after it.
    let id = w.next_get;
    w.next_get += 1;
    w.gets.push(Get {
        id,
        parts,
        buf: o.buf,
        layout: ol,
        count: on,
    });
    Ok(Some(id))
}

/// The operations of a request-based RMA call (`MPI_Rput`, `MPI_Rget`) on window `win`.
pub(crate) struct RmaReq {
    pub win: Handle,
    pub puts: Vec<PendingPut>,
    pub get: Option<u64>,
}

/// Test request-based operations once: complete when every put is complete at its target
/// and the get's bytes are in the origin buffer (then written there). A synchronization
/// completes them too, and a freed window has completed them all.
pub(crate) fn req_done(s: &mut State, r: &mut RmaReq) -> AResult<bool> {
    let Some(w) = s.wins.get_mut(&r.win) else {
        return Ok(true);
    };
    while let Some(p) = r.puts.last() {
        if !w.win.put_done(p)? {
            return Ok(false);
        }
        r.puts.pop();
    }
    let Some(id) = r.get else {
        return Ok(true);
    };
    let Some(i) = w.gets.iter().position(|g| g.id == id) else {
        // A synchronization delivered it.
        return Ok(true);
    };
    for p in &w.gets[i].parts {
        if !w.win.get_done(p)? {
            return Ok(false);
        }
    }
    let g = w.gets.remove(i);
    let mut data = Vec::new();
    for p in &g.parts {
        data.extend(w.win.take_get(p).unwrap_or_default());
    }
    g.buf.write(&g.layout, g.count, &data)?;
    r.get = None;
    Ok(true)
}

/// `MPI_Get_accumulate` (and `MPI_Fetch_and_op`, one element): `result` gets the old target
/// elements.
pub(crate) fn get_accumulate(
    s: &mut State,
    o: Origin,
    result: Origin,
    t: Target,
    op: Handle,
    h: Handle,
) -> AResult<()> {
    let (tl, tn) = target_layout(s, &t)?;
    let aop = acc_op(op)?;
    let data = if aop == AccumulateOp::NoOp {
        vec![0u8; tl.size() * tn]
    } else {
        o.buf.read(&*s.layout(o.dtype)?, count(o.count)?)?
    };
    let rl = s.layout(result.dtype)?;
    let rn = count(result.count)?;
    let kind = tl.kind().ok_or_else(|| {
        AbiError::new(
            MPI_ERR_TYPE,
            "get_accumulate needs a datatype of one basic type",
        )
    })?;
    let w = win(s, h)?;
    if t.rank == MPI_PROC_NULL {
        return Ok(());
    }
    check_target(w, t.rank)?;
    if data.len() != tl.size() * tn {
        return Err(AbiError::new(
            MPI_ERR_COUNT,
            "origin and target sizes differ",
        ));
    }
    let mut old = Vec::with_capacity(data.len());
    let mut at = 0;
    for (off, len) in runs(w, t.rank, t.disp, &tl, tn)? {
        old.extend(
            w.win
                .get_accumulate_kind(kind, &data[at..at + len], t.rank, off, aop)?,
        );
        at += len;
    }
    result.buf.write(&rl, rn, &old)?;
    Ok(())
}

/// `MPI_Compare_and_swap`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compare_and_swap(
    s: &mut State,
    origin: Lent,
    compare: Lent,
    result: Lent,
    dt: Handle,
    rank: c_int,
    disp: isize,
    h: Handle,
) -> AResult<()> {
    let l = s.layout(dt)?;
    let kind = l
        .kind()
        .filter(|_| l.is_contiguous())
        .ok_or_else(|| AbiError::new(MPI_ERR_TYPE, "compare-and-swap needs a basic datatype"))?;
    let v = origin.read(&l, 1)?;
    let c = compare.read(&l, 1)?;
    let w = win(s, h)?;
    if rank == MPI_PROC_NULL {
        return Ok(());
    }
    check_target(w, rank)?;
    let off = runs(w, rank, disp, &l, 1)?.first().map_or(0, |r| r.0);
    let old = w.win.compare_and_swap_kind(kind, &v, &c, rank, off)?;
    result.write(&l, 1, &old)?;
    Ok(())
}
