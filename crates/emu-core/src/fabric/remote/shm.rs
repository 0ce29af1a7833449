//! Links between processes on one host: one inbound segment per process, a memfd holding one
//! single-producer/single-consumer [`ring`](super::ring) per sending port.
//!
//! Segment layout (offsets in bytes):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `NICEMUS1` |
//! | 8 | 4 | ports |
//! | 12 | 4 | owner port |
//! | 16 | 8 | ring data bytes `cap` |
//! | 24 | 4 | owner pid |
//! | 64 | 8 | owner heartbeat (atomic) |
//! | 72 | 4 | owner state (atomic: 1 up, 2 closed, 3 crashed: only a test's in-process crash) |
//! | 80 | 4 | doorbell (atomic, a futex word) |
//! | 84 | 4 | the owner's poller is asleep on the doorbell (atomic) |
//! | 88 | 4 | a thread of the owner takes arrivals itself: it is polling (atomic) |
//! | 96 | 8 | when the owner engine's earliest timer falls due, host monotonic ns (atomic; all ones: none) |
//! | 4096 + s × (192 + cap) | 192 + cap | the ring written by port `s` |
//!
//! No name is ever created in `/dev/shm`: the segment is an anonymous memfd; a peer opens it
//! as `/proc/<owner pid>/fd/<fd>` (published through PMI) and maps it, and once every peer
//! has (after the job's connect fence) the owner closes the fd ([`ShmSide::seal`]). The
//! memory then lives exactly as long as some process maps it, so nothing is left behind
//! whoever dies when.
//!
//! One poller thread per process drains every inbound ring into the engine, flushes the
//! frames its senders could not push into a full ring, beats the heartbeats, watches the
//! peers (pid gone or a zombie) and paces the engine's clock (a peer whose heartbeat has
//! not moved for the grace period holds it; see [`super::Core::pace`]). A host thread that waits for its
//! device (the rank polling its completion queue) drains the rings itself through the
//! engine's progress ([`ShmSide::poll`]), so on a ping-pong an arrival is handled in the
//! thread that waits for it, with no hand-off. Such a thread announces itself in the
//! segment's header (`AWAKE`) when it polls, and withdraws before it sleeps on its NIC's
//! interrupt ([`ShmSide::before_sleep`]). While a thread of the owner polls, the poller
//! sleeps and producers do not ring the doorbell: a sender pays no futex wake per message
//! when the receiver is awake. Otherwise the poller spins briefly when idle, then yields a
//! few times, then sleeps on the segment's doorbell, a futex word in the shared mapping
//! (woken by a producer that pushed a frame, or after a heartbeat period). Lost wake-ups are
//! excluded Dekker-style: the poller announces it sleeps (a polling thread that it withdraws),
//! then (after a SeqCst fence) looks at the rings once more before waiting; a producer
//! stores its ring's tail, then (after a SeqCst fence) looks whether the poller sleeps and
//! nobody polls before ringing. One of the two sees the other. A polling thread that stops
//! polling without withdrawing (it went back to computing) is withdrawn by the poller the
//! first time the poller finds frames it left in the rings (after at most a heartbeat
//! period).

#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memmap2::{MmapMut, MmapOptions};

use super::frame::{self, Header};
use super::ring::{self, Consumer, Producer, RingState};
use super::{Core, LinkKind, PeerLink, PeerState, RemoteError, pid_alive};
use crate::fabric::Packet;
use crate::time::{SimDuration, SimTime};

const MAGIC: &[u8; 8] = b"NICEMUS1";
const SEG_HEADER: usize = 4096;
const OWNER_BEAT: usize = 64;
const OWNER_STATE: usize = 72;
const BELL: usize = 80;
const SLEEPING: usize = 84;
const AWAKE: usize = 88;
const NEXT_TIMER: usize = 96;
/// Idle rounds the poller spins, then yields, before it sleeps on the doorbell.
const IDLE_SPINS: u32 = 64;
const IDLE_YIELDS: u32 = 16;
/// How often the poller looks whether the peers' processes still exist (`/proc`).
const PID_CHECK: Duration = Duration::from_millis(100);
/// Owner state of a segment whose owner was made to crash inside a test process.
const CRASHED: u32 = 3;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A mapped segment (ours or a peer's).
struct Segment {
    /// Keeps the mapping (which `base` points into) alive.
    _map: MmapMut,
    base: *mut u8,
    ports: u32,
    cap: usize,
}

// SAFETY: `base` points into `map`, which lives as long as the segment; every access to the
// shared bytes goes through atomics or the ring protocol.
unsafe impl Send for Segment {}
// SAFETY: as for Send.
unsafe impl Sync for Segment {}

fn seg_len(ports: u32, cap: usize) -> usize {
    SEG_HEADER + ports as usize * ring::ring_bytes(cap)
}

impl Segment {
    fn map(file: &File, len: usize) -> Result<(MmapMut, *mut u8), RemoteError> {
        // SAFETY: the file is a memfd of at least `len` bytes that no process truncates
        // (owners never resize it after creation); the mapping is shared on purpose and
        // accessed only through raw pointers under the ring protocol, never as `&mut`.
        let mut map = unsafe { MmapOptions::new().len(len).map_mut(file) }
            .map_err(|e| RemoteError::io("mapping the fabric segment", e))?;
        let base = map.as_mut_ptr();
        Ok((map, base))
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is an 8-aligned header offset inside the mapping (page aligned);
        // the word is only accessed atomically.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast::<u64>()) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as in `u64_at`.
        unsafe { AtomicU32::from_ptr(self.base.add(off).cast::<u32>()) }
    }

    /// Wake the owner's poller if it sleeps (after a frame was pushed into one of the
    /// segment's rings).
    fn ring_bell(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.u32_at(SLEEPING).load(Ordering::Relaxed) != 0
            && self.u32_at(AWAKE).load(Ordering::Relaxed) == 0
        {
            let bell = self.u32_at(BELL);
            bell.fetch_add(1, Ordering::Release);
            let _ = rustix::thread::futex::wake(bell, rustix::thread::futex::Flags::empty(), 1);
        }
    }

    fn ring_base(&self, sender: u32) -> *mut u8 {
        debug_assert!(sender < self.ports);
        // SAFETY: ring `sender` lies inside the mapping (`seg_len`).
        unsafe {
            self.base
                .add(SEG_HEADER + sender as usize * ring::ring_bytes(self.cap))
        }
    }

    /// Read the fixed header fields (written once by the owner before publication).
    fn read_header(&self) -> ([u8; 8], u32, u32, u64, u32) {
        let mut h = [0u8; 32];
        // SAFETY: the first 32 bytes are inside the mapping and only written by the owner
        // before it published the segment's address.
        unsafe { std::ptr::copy_nonoverlapping(self.base, h.as_mut_ptr(), 32) };
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&h[0..8]);
        let mut cap = [0u8; 8];
        cap.copy_from_slice(&h[16..24]);
        (
            magic,
            u32_at(8),
            u32_at(12),
            u64::from_le_bytes(cap),
            u32_at(24),
        )
    }
}

/// One inbound ring and what the poller tracks of its producer.
struct Inbound {
    port: u32,
    ring: Consumer,
    flows: Box<[SimTime; 256]>,
    beat: u64,
}

/// This process's shared-memory side: its segment, the poller, the outbound links.
pub(crate) struct ShmSide {
    seg: Arc<Segment>,
    /// The memfd, open until [`ShmSide::seal`].
    fd: Mutex<Option<File>>,
    inbound: Arc<Mutex<Vec<Inbound>>>,
    outbound: Arc<Mutex<Vec<Arc<ShmLink>>>>,
    poller: Mutex<Option<JoinHandle<()>>>,
}

impl ShmSide {
    pub(crate) fn new(core: &Arc<Core>) -> Result<ShmSide, RemoteError> {
        let cfg = &core.cfg;
        let name = format!("nicemu-fabric-port{}", cfg.port.0);
        let fd = rustix::fs::memfd_create(name.as_str(), rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| RemoteError::io("memfd_create", e.into()))?;
        let file = File::from(fd);
        let len = seg_len(cfg.ports, cfg.ring_bytes);
        file.set_len(len as u64)
            .map_err(|e| RemoteError::io("sizing the fabric segment", e))?;
        let (map, base) = Segment::map(&file, len)?;
        let seg = Arc::new(Segment {
            _map: map,
            base,
            ports: cfg.ports,
            cap: cfg.ring_bytes,
        });
        let mut h = [0u8; 32];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&cfg.ports.to_le_bytes());
        h[12..16].copy_from_slice(&cfg.port.0.to_le_bytes());
        h[16..24].copy_from_slice(&(cfg.ring_bytes as u64).to_le_bytes());
        h[24..28].copy_from_slice(&std::process::id().to_le_bytes());
        // SAFETY: the header is inside the fresh mapping nobody else has yet.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), seg.base, 32) };
        seg.u32_at(OWNER_STATE).store(1, Ordering::Release);
        seg.u64_at(NEXT_TIMER).store(u64::MAX, Ordering::Release);
        let mut inbound = Vec::new();
        for s in 0..cfg.ports {
            let base = seg.ring_base(s);
            // SAFETY: ring `s` of our segment: aligned (page + multiples of 64), inside the
            // mapping that `seg` keeps alive as long as the consumer (both are owned by this
            // side); we are its only consumer, and no producer can attach before the
            // address is published.
            unsafe { ring::init(base, cfg.ring_bytes) };
            if s == cfg.port.0 {
                continue;
            }
            inbound.push(Inbound {
                port: s,
                // SAFETY: as above.
                ring: unsafe { Consumer::new(base, cfg.ring_bytes) },
                flows: Box::new([SimTime::ZERO; 256]),
                beat: 0,
            });
        }
        let side = ShmSide {
            seg,
            fd: Mutex::new(Some(file)),
            inbound: Arc::new(Mutex::new(inbound)),
            outbound: Arc::new(Mutex::new(Vec::new())),
            poller: Mutex::new(None),
        };
        let (c, seg, inb, out) = (
            Arc::clone(core),
            Arc::clone(&side.seg),
            Arc::clone(&side.inbound),
            Arc::clone(&side.outbound),
        );
        let h = std::thread::Builder::new()
            .name(format!("fabric-shm-{}", cfg.port.0))
            .spawn(move || poll_loop(&c, &seg, &inb, &out))
            .map_err(|e| RemoteError::io("spawning the shm poller", e))?;
        *lock(&side.poller) = Some(h);
        Ok(side)
    }

    pub(crate) fn address(&self) -> String {
        let fd = lock(&self.fd).as_ref().map_or(-1, |f| f.as_raw_fd());
        format!("{}:{}", std::process::id(), fd)
    }

    pub(crate) fn seal(&self) {
        lock(&self.fd).take();
    }

    pub(crate) fn connect(
        &self,
        core: &Arc<Core>,
        port: u32,
        addr: &str,
    ) -> Result<Arc<dyn PeerLink>, RemoteError> {
        let bad = || RemoteError::Protocol(format!("bad shm address {addr:?} for port {port}"));
        let (pid, fd) = addr.split_once(':').ok_or_else(bad)?;
        let pid: u32 = pid.parse().map_err(|_| bad())?;
        let fd: i32 = fd.parse().map_err(|_| bad())?;
        let path = format!("/proc/{pid}/fd/{fd}");
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| RemoteError::io(format!("opening port {port}'s segment {path}"), e))?;
        let len = file
            .metadata()
            .map_err(|e| RemoteError::io("reading the segment size", e))?
            .len() as usize;
        if len < SEG_HEADER {
            return Err(RemoteError::Protocol(format!(
                "port {port}'s segment is only {len} bytes"
            )));
        }
        let (map, base) = Segment::map(&file, len)?;
        let mut seg = Segment {
            _map: map,
            base,
            ports: 0,
            cap: 0,
        };
        let (magic, ports, owner, cap, _) = seg.read_header();
        let me = core.cfg.port.0;
        if &magic != MAGIC
            || owner != port
            || ports != core.cfg.ports
            || !(cap as usize).is_power_of_two()
            || len < seg_len(ports, cap as usize)
        {
            return Err(RemoteError::Protocol(format!(
                "{path} is not port {port}'s fabric segment of a {}-port fabric",
                core.cfg.ports
            )));
        }
        seg.ports = ports;
        seg.cap = cap as usize;
        let seg = Arc::new(seg);
        // SAFETY: ring `me` of the peer's segment, inside the mapping `seg` keeps alive for
        // the producer's lifetime (the link owns both); this process is the only one that
        // writes as port `me`, and the owner initialised the header before publishing.
        let producer = unsafe { Producer::new(seg.ring_base(me), seg.cap, std::process::id()) };
        let link = Arc::new(ShmLink {
            port,
            core: Arc::clone(core),
            inner: Mutex::new(LinkInner {
                producer,
                backlog: VecDeque::new(),
            }),
            max: ring::max_frame(seg.cap) - frame::HEADER,
            owner_beat: AtomicU64::new(0),
            seg,
        });
        lock(&self.outbound).push(Arc::clone(&link));
        Ok(link)
    }

    /// Whether inbound frames wait in a ring, or the poller is handing some to the engine.
    pub(crate) fn receiving(&self) -> bool {
        match self.inbound.try_lock() {
            Ok(inb) => inb.iter().any(|r| r.ring.pending()),
            Err(_) => true,
        }
    }

    /// The engine has handled what it was given: declare the frames taken so far handled,
    /// if that was held back. Re-checks under the lock (another deferral may have begun
    /// since); when the engine is busy again, its next notification does it.
    pub(crate) fn settled(&self, core: &Core) {
        loop {
            if !core.shm_owed.swap(false, Ordering::SeqCst) {
                return;
            }
            {
                let inb = lock(&self.inbound);
                if core.arrivals.settled() {
                    settle(&inb);
                    return;
                }
            }
            core.shm_owed.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            if !core.arrivals.settled() {
                return;
            }
        }
    }

    /// Drain the inbound rings in the calling thread, unless the poller is at it (then it
    /// hands the frames over itself). Returns whether any frame was taken. The caller is
    /// marked as polling (`AWAKE`): producers stop ringing the doorbell.
    pub(crate) fn poll(&self, core: &Core) -> bool {
        let awake = self.seg.u32_at(AWAKE);
        if awake.load(Ordering::Relaxed) == 0 {
            awake.store(1, Ordering::SeqCst);
        }
        match self.inbound.try_lock() {
            Ok(mut inb) => {
                if !inb.iter().any(|r| r.ring.pending()) {
                    return false;
                }
                drain(core, &mut inb)
            }
            Err(_) => false,
        }
    }

    /// The polling thread is about to sleep on its NIC's interrupt: producers must ring the
    /// doorbell again. False (and still marked polling) when frames already wait.
    pub(crate) fn before_sleep(&self) -> bool {
        let awake = self.seg.u32_at(AWAKE);
        awake.store(0, Ordering::SeqCst);
        // Pairs with the producers' fence in `ring_bell`: either a producer sees the thread
        // gone, or this sees its frame.
        std::sync::atomic::fence(Ordering::SeqCst);
        let pending = match self.inbound.try_lock() {
            Ok(inb) => inb.iter().any(|r| r.ring.pending()),
            // The poller is draining: it hands the frames over.
            Err(_) => false,
        };
        if pending {
            awake.store(1, Ordering::SeqCst);
        }
        !pending
    }

    /// Publish when this process's earliest timer falls due (see
    /// [`Outlet::next_timer`](super::Outlet::next_timer)).
    pub(crate) fn publish_next_timer(&self, host_ns: Option<u64>) {
        self.seg
            .u64_at(NEXT_TIMER)
            .store(host_ns.unwrap_or(u64::MAX), Ordering::Release);
    }

    /// Whether a live peer on this host has a timer due before ours, both as published
    /// (ties: the lower port first), that it has not run (see
    /// [`Outlet::peer_behind`](super::Outlet::peer_behind)).
    pub(crate) fn peer_behind(&self, core: &Core) -> bool {
        let host_ns = self.seg.u64_at(NEXT_TIMER).load(Ordering::Acquire);
        let Ok(links) = self.outbound.try_lock() else {
            // Links are being added (only while the job starts).
            return false;
        };
        let me = core.cfg.port.0;
        links.iter().any(|l| {
            let due = l.seg.u64_at(NEXT_TIMER).load(Ordering::Acquire);
            (due < host_ns || (due == host_ns && l.port < me))
                && core.state(l.port) == PeerState::Up
        })
    }

    /// Tell producers this segment's owner closed.
    pub(crate) fn close(&self) {
        self.seg.u32_at(OWNER_STATE).store(2, Ordering::Release);
    }

    /// Play a crash inside one test process (the pid cannot vanish there): peers take the
    /// crashed state for the pid gone.
    pub(crate) fn crash(&self) {
        self.seg
            .u32_at(OWNER_STATE)
            .store(CRASHED, Ordering::Release);
    }

    pub(crate) fn join(&self) {
        // Wake our poller so it sees the stop flag now.
        self.seg.u32_at(BELL).fetch_add(1, Ordering::Release);
        let _ = rustix::thread::futex::wake(
            self.seg.u32_at(BELL),
            rustix::thread::futex::Flags::empty(),
            1,
        );
        if let Some(h) = lock(&self.poller).take() {
            let _ = h.join();
        }
        lock(&self.outbound).clear();
    }
}

struct LinkInner {
    producer: Producer,
    /// Frames that did not fit in the ring, oldest first. A peer that does not drain its
    /// ring (stopped, descheduled) is not a dead peer: the frames wait.
    backlog: VecDeque<Vec<u8>>,
}

/// The link toward one peer on this host: the producer side of our ring in its segment.
pub(crate) struct ShmLink {
    port: u32,
    core: Arc<Core>,
    seg: Arc<Segment>,
    inner: Mutex<LinkInner>,
    max: usize,
    /// The peer's heartbeat as last seen.
    owner_beat: AtomicU64,
}

impl ShmLink {
    /// Push what the backlog holds. Returns whether anything moved. A peer that is gone
    /// never takes the rest: it is dropped and counted.
    fn flush(&self) -> bool {
        let mut g = lock(&self.inner);
        let LinkInner { producer, backlog } = &mut *g;
        let mut moved = false;
        while let Some(f) = backlog.front() {
            if !producer.try_push(&[f]) {
                break;
            }
            backlog.pop_front();
            moved = true;
        }
        if moved {
            self.seg.ring_bell();
        }
        if !backlog.is_empty() && self.core.state(self.port) == PeerState::Dead {
            let n = backlog.len() as u64;
            backlog.clear();
            drop(g);
            self.core.count_timeouts(n);
        }
        moved
    }

    /// Beat our heartbeat, and look at the peer's: a moved heartbeat is a sign of life; a
    /// pid gone (looked at when `pids`) is a death. A heartbeat that stands still is
    /// neither: the peer holds the clock ([`Core::pace`](super::Core::pace)).
    fn watch(&self, pids: bool) {
        lock(&self.inner).producer.beat();
        match self.seg.u32_at(OWNER_STATE).load(Ordering::Acquire) {
            2 => {
                self.core.set_closed(self.port);
                return;
            }
            CRASHED => {
                self.core
                    .set_dead(self.port, "its process crashed (in-process test)".into());
                return;
            }
            _ => {}
        }
        if pids {
            let (_, _, _, _, pid) = self.seg.read_header();
            if !pid_alive(pid) {
                self.core
                    .set_dead(self.port, format!("its process (pid {pid}) exited"));
                return;
            }
        }
        let beat = self.seg.u64_at(OWNER_BEAT).load(Ordering::Relaxed);
        if self.owner_beat.swap(beat, Ordering::Relaxed) != beat {
            self.core.alive(self.port);
        }
    }
}

impl PeerLink for ShmLink {
    fn send(&self, delay: SimDuration, pkt: &Packet) -> Result<(), RemoteError> {
        if pkt.data.len() > self.max {
            return Err(RemoteError::TooLarge {
                len: pkt.data.len(),
                max: self.max,
            });
        }
        if matches!(
            self.core.state(self.port),
            PeerState::Dead | PeerState::Closed
        ) {
            return Err(self.core.gone(self.port));
        }
        let h = Header::packet(pkt, delay).encode();
        let mut g = lock(&self.inner);
        if g.backlog.is_empty() && g.producer.try_push(&[&h, &pkt.data]) {
            drop(g);
            self.seg.ring_bell();
        } else {
            let mut f = Vec::with_capacity(h.len() + pkt.data.len());
            f.extend_from_slice(&h);
            f.extend_from_slice(&pkt.data);
            g.backlog.push_back(f);
            drop(g);
        }
        self.core.count_sent(pkt.data.len());
        Ok(())
    }

    fn close(&self) {
        lock(&self.inner).producer.close();
    }

    fn kind(&self) -> LinkKind {
        LinkKind::Shm
    }

    fn pending(&self) -> bool {
        let g = lock(&self.inner);
        !g.backlog.is_empty() || g.producer.unsettled()
    }
}

/// The poller: drain inbound rings, flush outbound backlogs, heartbeats and liveness.
fn poll_loop(
    core: &Core,
    seg: &Segment,
    inbound: &Mutex<Vec<Inbound>>,
    outbound: &Mutex<Vec<Arc<ShmLink>>>,
) {
    let beat = core.cfg.beat();
    let mut last_beat = Instant::now() - beat;
    let mut last_pids = Instant::now();
    let mut idle = 0u32;
    let awake = seg.u32_at(AWAKE);
    while !core.stop.load(Ordering::Acquire) {
        let mut work = drain(core, &mut lock(inbound));
        if work && awake.load(Ordering::Relaxed) != 0 && idle > 0 {
            // A thread said it polls, yet frames waited for the poller after its sleep:
            // it went back to computing. Producers ring the doorbell again.
            awake.store(0, Ordering::SeqCst);
        }
        let links: Vec<Arc<ShmLink>> = lock(outbound).clone();
        for l in &links {
            work |= l.flush();
        }
        if last_beat.elapsed() >= beat {
            last_beat = Instant::now();
            let pids = last_pids.elapsed() >= PID_CHECK;
            if pids {
                last_pids = last_beat;
            }
            seg.u64_at(OWNER_BEAT).fetch_add(1, Ordering::Relaxed);
            for l in &links {
                l.watch(pids);
            }
            {
                let mut inb = lock(inbound);
                for r in inb.iter_mut() {
                    watch_producer(core, r, pids);
                }
            }
            core.pace();
        }
        if work {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            // A short spin, a few yields, then sleep: on a host with fewer cores than
            // busy threads, a poller that yields for long only takes turns from the rank
            // threads, which drain the rings themselves while they wait (`ShmSide::poll`).
            if awake.load(Ordering::Relaxed) != 0 {
                // A thread of this process takes arrivals itself: stay out of its way until
                // the next heartbeat (or a producer rings for a thread gone to sleep).
                sleep_on_bell(core, seg, None, beat.saturating_sub(last_beat.elapsed()));
            } else if idle < IDLE_SPINS {
                std::hint::spin_loop();
            } else if idle < IDLE_SPINS + IDLE_YIELDS {
                std::thread::yield_now();
            } else if links.iter().any(|l| !lock(&l.inner).backlog.is_empty()) {
                // Waiting for a peer to make room: look again shortly.
                std::thread::sleep(Duration::from_micros(20));
            } else {
                sleep_on_bell(
                    core,
                    seg,
                    Some(inbound),
                    beat.saturating_sub(last_beat.elapsed()),
                );
            }
        }
    }
    if !core.crashed.load(Ordering::Acquire) {
        // A clean close: push what is still queued (bounded by the timeout).
        let links: Vec<Arc<ShmLink>> = lock(outbound).clone();
        let until = Instant::now() + core.cfg.timeout;
        for l in &links {
            while !lock(&l.inner).backlog.is_empty() && Instant::now() < until {
                if !l.flush() {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        }
    }
}

/// Declare every frame taken from the inbound rings handled (see [`Consumer::settle`]).
fn settle(inb: &[Inbound]) {
    for r in inb {
        r.ring.settle();
    }
}

/// Hand what the inbound rings hold to the engine (at most 256 frames a ring), then
/// declare them handled if the engine has finished with them, else leave that to its
/// notification ([`ShmSide::settled`]): a producer counts its frames in flight until then,
/// so its timers wait for the answers. Returns whether any frame was taken.
fn drain(core: &Core, inb: &mut [Inbound]) -> bool {
    let work = take(core, inb);
    if work {
        core.shm_owed.store(true, Ordering::SeqCst);
        // Pairs with the fence of the engine's notification: either it sees the debt, or
        // this sees the engine settled.
        std::sync::atomic::fence(Ordering::SeqCst);
        if core.arrivals.settled() && core.shm_owed.swap(false, Ordering::SeqCst) {
            settle(inb);
        }
    }
    work
}

fn take(core: &Core, inb: &mut [Inbound]) -> bool {
    let mut work = false;
    for r in inb.iter_mut() {
        for _ in 0..256 {
            let got = r.ring.pop(|b| {
                Header::decode(b).map(|h| {
                    let end = (frame::HEADER + h.len as usize).min(b.len());
                    (h, b[frame::HEADER..end].to_vec())
                })
            });
            match got {
                None => break,
                Some(Ok((h, data))) if h.kind == frame::Kind::Packet => {
                    core.deliver(h, data, &mut r.flows);
                    work = true;
                }
                Some(_) => {
                    core.set_dead(r.port, "its ring holds a malformed frame".into());
                    break;
                }
            }
        }
    }
    work
}

/// Sleep until a producer rings the segment's doorbell, or `limit` passed. With `inbound`,
/// not if a frame already waits (without: a polling thread of the process takes them).
fn sleep_on_bell(
    core: &Core,
    seg: &Segment,
    inbound: Option<&Mutex<Vec<Inbound>>>,
    limit: Duration,
) {
    let bell = seg.u32_at(BELL);
    let sleeping = seg.u32_at(SLEEPING);
    let v = bell.load(Ordering::Acquire);
    sleeping.store(1, Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::SeqCst);
    let ready = core.stop.load(Ordering::Acquire)
        || inbound.is_some_and(|inb| lock(inb).iter().any(|r| r.ring.pending()));
    if !ready && !limit.is_zero() {
        let t = rustix::thread::futex::Timespec {
            tv_sec: limit.as_secs() as i64,
            tv_nsec: i64::from(limit.subsec_nanos()),
        };
        // Returns early when rung (or the word already moved, or a signal): all fine.
        let _ =
            rustix::thread::futex::wait(bell, rustix::thread::futex::Flags::empty(), v, Some(&t));
    }
    sleeping.store(0, Ordering::Relaxed);
}

/// Check the producer of an inbound ring: closed, pid gone (looked at when `pids`), a
/// heartbeat that moved (a sign of life).
fn watch_producer(core: &Core, r: &mut Inbound, pids: bool) {
    if core.state(r.port) != PeerState::Up {
        // Not linked yet (it links once its own connect ran) or already judged.
        return;
    }
    match r.ring.producer_state() {
        RingState::Closed => {
            core.set_closed(r.port);
            return;
        }
        RingState::Empty => return,
        RingState::Attached => {}
    }
    let pid = r.ring.producer_pid();
    if pids && !pid_alive(pid) {
        core.set_dead(r.port, format!("its process (pid {pid}) exited"));
        return;
    }
    let b = r.ring.producer_beat();
    if b != r.beat {
        r.beat = b;
        core.alive(r.port);
    }
}
