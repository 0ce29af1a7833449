//! The fabric between processes: each process hosts the NIC of one node (one fabric port);
//! packets its [`Fabric`](crate::fabric::Fabric) routes to ports hosted elsewhere leave
//! through a [`ProcessFabric`], over a shared-memory ring to processes on the same host
//! ([`shm`]) or a TCP stream to other hosts ([`tcp`]), and arrive in the peer's engine
//! through its [`Arrivals`].
//!
//! Where the link model is applied: every process builds the whole topology, and the
//! *sender's* fabric runs [`Fabric::inject`](crate::fabric::Fabric::inject) on the packet as
//! in one process (route, link timing with traffic-class priorities, CRC, seeded fault
//! sites, counters). A delivery time in the future becomes a delay carried in the frame; the
//! receiver delivers no earlier than that delay after it took the frame, and never before an
//! earlier packet of the same (source, traffic class) flow, so per-flow FIFO order holds.
//! What one process cannot see is the other senders' traffic on shared links (the switch's
//! port toward a receiver): contention between senders in different processes is not
//! modelled. See docs/fabric-between-processes.md.
//!
//! Time: every process's threaded engine runs on a [`JobClock`] that this fabric lets run
//! only while every live peer shows that it runs (a heartbeat or a frame within
//! [`RemoteConfig::grace`]). A peer that is stopped, descheduled, swapped or not started
//! yet holds the clocks of the others, so no emulated timeout, retry budget or watchdog
//! expires because of it; the held time is not counted once it runs again.
//!
//! Liveness comes only from facts the host's scheduler cannot fake: the peer's process is
//! gone or a zombie (shared memory: `/proc/<pid>`), its connection ended or was reset, its
//! kernel stopped answering TCP keepalives, or stopped acknowledging the data we sent for
//! [`RemoteConfig::timeout`] (a cable pulled, a host gone). A silence alone is never a
//! death. From then on packets toward it are dropped and counted as network timeouts
//! ([`RemoteCounters::network_timeouts`]), the peer no longer holds the clock (so the NICs'
//! own timeouts report the loss as the hardware does), and [`ProcessFabric::check`]
//! returns the error.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use thiserror::Error;

pub use crate::clock::JobClock;
pub use crate::fabric::{Packet, PortId};
use crate::time::{SimDuration, SimTime};

pub mod frame;
pub mod ring;
pub mod shm;
pub mod tcp;

/// Why an operation of the fabric between processes failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RemoteError {
    /// The peer hosting a port died, stopped answering, or closed.
    #[error("port {port} is unreachable: {why}")]
    PeerGone {
        /// The peer's port.
        port: u32,
        /// What was seen.
        why: String,
    },
    /// No link to this port was set up.
    #[error("no link to port {0}")]
    NoLink(u32),
    /// A port outside the topology.
    #[error("port {port} does not exist (the fabric has {ports} ports)")]
    BadPort {
        /// The port.
        port: u32,
        /// Ports of the fabric.
        ports: u32,
    },
    /// A frame larger than the link carries.
    #[error("a {len}-byte packet exceeds the {max}-byte frame limit of the link")]
    TooLarge {
        /// The packet's data length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A peer's address or segment is malformed, or a stream is out of sync.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// An operating-system call failed.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: String,
    },
}

impl RemoteError {
    pub(crate) fn io(what: impl Into<String>, e: std::io::Error) -> RemoteError {
        RemoteError::Io {
            what: what.into(),
            error: e.to_string(),
        }
    }
}

/// Where a process's engine takes packets that arrive from other processes.
pub trait Arrivals: Send + Sync {
    /// The engine's current time.
    fn now(&self) -> SimTime;
    /// Deliver `pkt` to its destination port at `at` (now if `at` has passed).
    fn arrive(&self, at: SimTime, pkt: Packet);
    /// Whether every packet delivered so far has been handled (nothing the engine took
    /// waits for a thread to run it). A process credits the packets it took from a peer
    /// only then, so the peer's timers wait for the answers as they do for packets in
    /// flight inside one process (see [`Outlet::in_flight`]). When this returns false,
    /// the engine calls [`Outlet::settled`] once it becomes true.
    fn settled(&self) -> bool {
        true
    }
    /// The engine's clock, which the fabric holds while a peer does not run (`None`: the
    /// engine's time is not paced by the job).
    fn clock(&self) -> Option<Arc<JobClock>> {
        None
    }
}

/// Where a process's engine sends packets whose destination port it does not host.
pub trait Outlet: Send + Sync {
    /// `pkt` is due at its destination `delay` from now (as the local fabric computed it).
    fn forward(&self, delay: SimDuration, pkt: Packet);
    /// Whether packets are on their way between this process and another: sent and not yet
    /// handled by the peer (taken and delivered, deferred work included: see
    /// [`Arrivals::settled`]), or arrived and not yet handed to the engine. The threaded engine
    /// holds due timers back meanwhile, as it does for packets in flight inside one
    /// process: a request timeout that fires because the emulator (or another process)
    /// has not run yet would turn the emulator's slowness into a hardware error.
    fn in_flight(&self) -> bool {
        false
    }
    /// Take packets that arrived from other processes and hand them to the engine in the
    /// calling thread (a host thread that waits for the device calls this through the
    /// engine's progress). Returns whether any were taken. The fabric's own receiving
    /// threads take them when nobody calls this; calling it only saves the hand-off from
    /// one of those threads to the engine (and, on a busy host, the wait for that thread to
    /// be scheduled).
    fn poll(&self) -> bool {
        false
    }
    /// The engine has handled every packet delivered to it (see [`Arrivals::settled`]):
    /// credits held back meanwhile may go to the peers now.
    fn settled(&self) {}
    /// A host thread that took arrivals through [`Outlet::poll`] is about to sleep until
    /// the device interrupts it: from now on senders must wake the fabric's own receiving
    /// thread for what they send. False when arrivals already wait (poll again instead).
    fn before_sleep(&self) -> bool {
        true
    }
    /// The engine's earliest timer (or delayed packet) not run yet falls due at `host_ns` on
    /// the host's monotonic clock (`None`: it has none). Peers on this host read it (see
    /// [`Outlet::peer_behind`]).
    fn next_timer(&self, _host_ns: Option<u64>) {}
    /// Whether this engine's earliest timer (as last given to [`Outlet::next_timer`]) must
    /// wait for a peer on this host that has not yet run a timer due before it (its engine
    /// thread did not get a CPU, or the process is stopped). Such a timer may send this
    /// engine the packets it is waiting for: a retransmission timeout must not fire because
    /// the peer's acknowledgement, owed by the peer's timer, is late for the host's sake.
    /// Every process compares the times as published (ties: the lower port first), one
    /// total order, so the timer due first in the whole host never waits and the processes
    /// cannot wait for each other in a circle.
    fn peer_behind(&self) -> bool {
        false
    }
}

/// One direction toward one peer process: a shared-memory ring or a TCP stream.
pub trait PeerLink: Send + Sync {
    /// Send `pkt`, to be delivered `delay` after the peer takes it. Never blocks for long:
    /// a full ring or socket queues the frame locally (and a peer that does not drain it
    /// within the timeout is declared gone).
    fn send(&self, delay: SimDuration, pkt: &Packet) -> Result<(), RemoteError>;
    /// Close cleanly: the peer learns that nothing more comes.
    fn close(&self);
    /// Which kind of link this is.
    fn kind(&self) -> LinkKind;
    /// Whether frames sent on this link have not been handled by the peer yet (as far as
    /// this side can tell).
    fn pending(&self) -> bool;
}

/// Which transport a link uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// A ring in shared memory (same host).
    Shm,
    /// A TCP stream (another host, or forced).
    Tcp,
}

/// Settings of a [`ProcessFabric`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteConfig {
    /// The port this process hosts.
    pub port: PortId,
    /// Ports of the whole fabric.
    pub ports: u32,
    /// How long a TCP peer's kernel may leave the data we sent unacknowledged, or its
    /// keepalives unanswered, before the peer is declared gone (a cable pulled, a host
    /// gone). A silent peer process is never declared gone for its silence: it holds the
    /// job's clock instead ([`RemoteConfig::grace`]).
    pub timeout: Duration,
    /// Data bytes of each inbound ring (a power of two, at least 4 KiB).
    pub ring_bytes: usize,
    /// The address the TCP listener binds to.
    pub tcp_bind: IpAddr,
}

impl RemoteConfig {
    /// Defaults: 10 s timeout, 1 MiB rings, TCP on every interface.
    pub fn new(port: PortId, ports: u32) -> Self {
        RemoteConfig {
            port,
            ports,
            timeout: Duration::from_secs(10),
            ring_bytes: 1 << 20,
            tcp_bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }

    /// The heartbeat period: a tenth of the timeout, between 1 ms and 10 ms.
    pub fn beat(&self) -> Duration {
        (self.timeout / 10).clamp(Duration::from_millis(1), Duration::from_millis(10))
    }

    /// How long a peer may show no sign of life (heartbeat, frame) before this process's
    /// engine clock stands still waiting for it: five heartbeat periods.
    pub fn grace(&self) -> Duration {
        self.beat() * 5
    }
}

/// Counters of a [`ProcessFabric`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteCounters {
    /// Packets sent to other processes.
    pub sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Packets received from other processes.
    pub received: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Packets that never reached their peer because it was gone or stopped draining its
    /// link within the timeout (what an MPI library reports as network timeouts).
    pub network_timeouts: u64,
    /// Peers declared gone (died or timed out, not closed cleanly).
    pub dead_peers: u64,
    /// Received packets whose wire CRC failed (delivered so the device sees them corrupt).
    pub wire_crc_errors: u64,
    /// Packets to a port no link was set up for.
    pub no_link: u64,
    /// Times the engine's clock was held because a peer showed no sign of life for
    /// [`RemoteConfig::grace`] (stopped, descheduled, or not started yet).
    pub clock_holds: u64,
    /// Real time the clock was held for silent peers, in milliseconds (at most: the clock
    /// stands still once it reaches the grace it was allowed).
    pub clock_held_ms: u64,
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    bytes_sent: AtomicU64,
    received: AtomicU64,
    bytes_received: AtomicU64,
    network_timeouts: AtomicU64,
    dead_peers: AtomicU64,
    wire_crc_errors: AtomicU64,
    no_link: AtomicU64,
    clock_holds: AtomicU64,
}

/// What is known of a peer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// No link yet (or this process's own port).
    Unknown,
    /// Linked and alive.
    Up,
    /// It said goodbye.
    Closed,
    /// It died or stopped answering.
    Dead,
}

struct PeerSlot {
    state: AtomicU8,
    why: Mutex<Option<String>>,
    /// When it last showed life (nanoseconds since the fabric started).
    life: AtomicU64,
}

/// What the fabric's poller checks every heartbeat period besides the rings (a TCP link's
/// kernel-level liveness).
pub(crate) trait Watch: Send + Sync {
    fn watch(&self, core: &Core);
}

/// What the links and their threads share.
pub(crate) struct Core {
    pub(crate) cfg: RemoteConfig,
    peers: Vec<PeerSlot>,
    c: Counters,
    pub(crate) arrivals: Arc<dyn Arrivals>,
    /// Set by close/abandon: threads stop.
    pub(crate) stop: AtomicBool,
    /// Set by abandon: no goodbyes.
    pub(crate) crashed: AtomicBool,
    /// Frames taken from the inbound rings are not declared handled yet (the engine still
    /// had deferred deliveries when they were taken).
    pub(crate) shm_owed: AtomicBool,
    /// The engine's clock, held while a peer shows no life.
    clock: Option<Arc<JobClock>>,
    /// Since when the clock has been held for a silent peer (`None`: it is not).
    holding: Mutex<Option<Instant>>,
    /// Real time the clock stood still for silent peers, finished holds (nanoseconds).
    held_ns: AtomicU64,
    start: Instant,
    pub(crate) watchers: Mutex<Vec<Arc<dyn Watch>>>,
}

impl Core {
    pub(crate) fn state(&self, port: u32) -> PeerState {
        match self
            .peers
            .get(port as usize)
            .map(|p| p.state.load(Ordering::Acquire))
        {
            Some(1) => PeerState::Up,
            Some(2) => PeerState::Closed,
            Some(3) => PeerState::Dead,
            _ => PeerState::Unknown,
        }
    }

    pub(crate) fn set_up(&self, port: u32) {
        if let Some(p) = self.peers.get(port as usize) {
            // Its silence is measured from now, when it attached, not from when this
            // process started.
            p.life.store(self.elapsed_ns(), Ordering::Release);
            let _ = p
                .state
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The peer showed that it runs (a heartbeat moved, a frame arrived).
    pub(crate) fn alive(&self, port: u32) {
        if let Some(p) = self.peers.get(port as usize) {
            p.life.fetch_max(self.elapsed_ns(), Ordering::AcqRel);
        }
    }

    /// Every heartbeat period: let the engine's clock run [`RemoteConfig::grace`] further
    /// if every linked peer showed life within that long; otherwise leave it to stand still
    /// at its limit. With no live peer (none linked yet, or all closed or gone) the clock is
    /// not held at all, so the NICs' timeouts report a lost peer.
    pub(crate) fn pace(&self) {
        let watchers: Vec<Arc<dyn Watch>> = lock(&self.watchers).clone();
        for w in &watchers {
            w.watch(self);
        }
        let Some(clock) = &self.clock else {
            return;
        };
        let grace = self.cfg.grace();
        let now = self.elapsed_ns();
        let grace_ns = u64::try_from(grace.as_nanos()).unwrap_or(u64::MAX);
        let mut linked = false;
        let mut stale = false;
        for p in &self.peers {
            if p.state.load(Ordering::Acquire) == 1 {
                linked = true;
                stale |= now.saturating_sub(p.life.load(Ordering::Acquire)) > grace_ns;
            }
        }
        let mut holding = lock(&self.holding);
        if linked && stale {
            if holding.is_none() {
                *holding = Some(Instant::now());
                self.c.clock_holds.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        if let Some(since) = holding.take() {
            let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.held_ns.fetch_add(ns, Ordering::Relaxed);
        }
        if linked {
            clock.allow(grace);
        } else {
            clock.release();
        }
    }

    /// Real time the clock has stood still for silent peers so far.
    fn held_for_peers(&self) -> Duration {
        let ongoing = lock(&self.holding).map_or(Duration::ZERO, |t| t.elapsed());
        Duration::from_nanos(self.held_ns.load(Ordering::Relaxed)) + ongoing
    }

    /// The peer closed cleanly (unless it was already declared dead).
    pub(crate) fn set_closed(&self, port: u32) {
        if let Some(p) = self.peers.get(port as usize) {
            let _ = p
                .state
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                    (s < 2).then_some(2)
                });
        }
    }

    /// Declare the peer gone (once), with the reason.
    pub(crate) fn set_dead(&self, port: u32, why: String) {
        let Some(p) = self.peers.get(port as usize) else {
            return;
        };
        if self.stop.load(Ordering::Acquire) {
            return;
        }
        if p.state.swap(3, Ordering::AcqRel) != 3 {
            tracing::warn!(port, why = %why, "fabric peer gone");
            *p.why.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
            self.c.dead_peers.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn gone(&self, port: u32) -> RemoteError {
        let why = self
            .peers
            .get(port as usize)
            .and_then(|p| p.why.lock().unwrap_or_else(PoisonError::into_inner).clone())
            .unwrap_or_else(|| "it closed its end".into());
        RemoteError::PeerGone { port, why }
    }

    pub(crate) fn count_timeouts(&self, n: u64) {
        self.c.network_timeouts.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn count_sent(&self, bytes: usize) {
        self.c.sent.fetch_add(1, Ordering::Relaxed);
        self.c.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Hand a received packet frame to the engine, no earlier than its delay from now nor
    /// than the previous packet of its flow (`flows`: last delivery time by traffic class,
    /// of this one source).
    pub(crate) fn deliver(&self, h: frame::Header, data: Vec<u8>, flows: &mut [SimTime; 256]) {
        let len = data.len();
        let (pkt, intact) = h.into_packet(data);
        if !intact {
            self.c.wire_crc_errors.fetch_add(1, Ordering::Relaxed);
        }
        self.c.received.fetch_add(1, Ordering::Relaxed);
        self.alive(h.src);
        self.c
            .bytes_received
            .fetch_add(len as u64, Ordering::Relaxed);
        let now = self.arrivals.now();
        let last = &mut flows[usize::from(h.tc)];
        let at = (now + h.delay).max(*last);
        *last = at;
        self.arrivals.arrive(at, pkt);
    }
}

/// The fabric between this process and the others: one [`PeerLink`] per peer port, an
/// inbound shared-memory segment and a TCP listener. Implements [`Outlet`] for the engine.
pub struct ProcessFabric {
    core: Arc<Core>,
    links: Vec<OnceLock<Arc<dyn PeerLink>>>,
    shm: shm::ShmSide,
    tcp: tcp::TcpSide,
    closed: AtomicBool,
}

impl std::fmt::Debug for ProcessFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessFabric")
            .field("config", &self.core.cfg)
            .field("counters", &self.counters())
            .finish_non_exhaustive()
    }
}

impl ProcessFabric {
    /// Create this process's end: its inbound shared-memory segment (a memfd) and its TCP
    /// listener, with the threads that take arriving packets to `arrivals`.
    pub fn new(cfg: RemoteConfig, arrivals: Arc<dyn Arrivals>) -> Result<Self, RemoteError> {
        if cfg.port.0 >= cfg.ports {
            return Err(RemoteError::BadPort {
                port: cfg.port.0,
                ports: cfg.ports,
            });
        }
        if !cfg.ring_bytes.is_power_of_two() || cfg.ring_bytes < 4096 {
            return Err(RemoteError::Protocol(format!(
                "ring size {} is not a power of two of at least 4096",
                cfg.ring_bytes
            )));
        }
        let core = Arc::new(Core {
            peers: (0..cfg.ports)
                .map(|_| PeerSlot {
                    state: AtomicU8::new(0),
                    why: Mutex::new(None),
                    life: AtomicU64::new(0),
                })
                .collect(),
            c: Counters::default(),
            clock: arrivals.clock(),
            arrivals,
            stop: AtomicBool::new(false),
            crashed: AtomicBool::new(false),
            shm_owed: AtomicBool::new(false),
            holding: Mutex::new(None),
            held_ns: AtomicU64::new(0),
            start: Instant::now(),
            watchers: Mutex::new(Vec::new()),
            cfg,
        });
        let shm = shm::ShmSide::new(&core)?;
        let tcp = tcp::TcpSide::new(&core)?;
        Ok(ProcessFabric {
            links: (0..core.cfg.ports).map(|_| OnceLock::new()).collect(),
            core,
            shm,
            tcp,
            closed: AtomicBool::new(false),
        })
    }

    /// The port this process hosts.
    pub fn port(&self) -> PortId {
        self.core.cfg.port
    }

    /// What a peer on this host opens to map the inbound segment (`<pid>:<fd>`, opened as
    /// `/proc/<pid>/fd/<fd>`), until [`ProcessFabric::seal`].
    pub fn shm_address(&self) -> String {
        self.shm.address()
    }

    /// The TCP listener's address.
    pub fn tcp_address(&self) -> SocketAddr {
        self.tcp.address()
    }

    fn check_peer(&self, port: PortId) -> Result<(), RemoteError> {
        if port.0 >= self.core.cfg.ports || port == self.core.cfg.port {
            return Err(RemoteError::BadPort {
                port: port.0,
                ports: self.core.cfg.ports,
            });
        }
        Ok(())
    }

    fn install(&self, port: PortId, link: Arc<dyn PeerLink>) -> Result<(), RemoteError> {
        self.links[port.0 as usize]
            .set(link)
            .map_err(|_| RemoteError::Protocol(format!("port {} is already linked", port.0)))?;
        self.core.set_up(port.0);
        Ok(())
    }

    /// Link to the peer hosting `port` through its shared-memory segment at `addr` (its
    /// [`ProcessFabric::shm_address`]).
    pub fn connect_shm(&self, port: PortId, addr: &str) -> Result<(), RemoteError> {
        self.check_peer(port)?;
        let link = self.shm.connect(&self.core, port.0, addr)?;
        self.install(port, link)
    }

    /// Link to the peer hosting `port` through TCP at `addr`.
    pub fn connect_tcp(&self, port: PortId, addr: SocketAddr) -> Result<(), RemoteError> {
        self.check_peer(port)?;
        let link = self.tcp.connect(&self.core, port.0, addr)?;
        self.install(port, link)
    }

    /// Every peer has mapped this process's segment: close the memfd, so nothing can open
    /// it any more (the mappings keep the memory until the last one goes).
    pub fn seal(&self) {
        self.shm.seal();
    }

    /// Send `pkt` to its destination's process, due `delay` after it takes it.
    pub fn send(&self, delay: SimDuration, pkt: &Packet) -> Result<(), RemoteError> {
        let port = pkt.dst.0;
        let Some(link) = self.links.get(port as usize).and_then(OnceLock::get) else {
            self.core.c.no_link.fetch_add(1, Ordering::Relaxed);
            return Err(RemoteError::NoLink(port));
        };
        match self.core.state(port) {
            PeerState::Dead | PeerState::Closed => {
                self.core.count_timeouts(1);
                return Err(self.core.gone(port));
            }
            _ => {}
        }
        link.send(delay, pkt).inspect_err(|e| {
            if let RemoteError::PeerGone { .. } = e {
                self.core.count_timeouts(1);
            }
        })
    }

    /// What is known of the peer hosting `port`.
    pub fn peer_state(&self, port: PortId) -> PeerState {
        self.core.state(port.0)
    }

    /// The kind of link to `port`, if one was set up.
    pub fn link_kind(&self, port: PortId) -> Option<LinkKind> {
        self.links
            .get(port.0 as usize)
            .and_then(OnceLock::get)
            .map(|l| l.kind())
    }

    /// Fails with the first peer found dead (or closed while this process still runs).
    pub fn check(&self) -> Result<(), RemoteError> {
        for p in 0..self.core.cfg.ports {
            if self.core.state(p) == PeerState::Dead {
                return Err(self.core.gone(p));
            }
        }
        Ok(())
    }

    /// Counters.
    pub fn counters(&self) -> RemoteCounters {
        let c = &self.core.c;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RemoteCounters {
            sent: g(&c.sent),
            bytes_sent: g(&c.bytes_sent),
            received: g(&c.received),
            bytes_received: g(&c.bytes_received),
            network_timeouts: g(&c.network_timeouts),
            dead_peers: g(&c.dead_peers),
            wire_crc_errors: g(&c.wire_crc_errors),
            no_link: g(&c.no_link),
            clock_holds: g(&c.clock_holds),
            clock_held_ms: u64::try_from(self.core.held_for_peers().as_millis())
                .unwrap_or(u64::MAX),
        }
    }

    /// Close cleanly: say goodbye on every link, stop the threads. Idempotent.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        for l in self.links.iter().filter_map(OnceLock::get) {
            l.close();
        }
        self.shm.close();
        self.core.stop.store(true, Ordering::Release);
        self.shm.join();
        self.tcp.shutdown(false);
    }

    /// Stop as a crashed process would: no goodbyes, heartbeats stop, sockets are cut.
    /// Tests use it to play a killed process inside one test process, where the pid
    /// cannot vanish: the segment is marked crashed (a state a real process never writes:
    /// peers on this host see its pid gone instead), which peers take for the pid gone.
    /// Over TCP the peers see the connections cut.
    pub fn abandon(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.core.crashed.store(true, Ordering::Release);
        self.core.stop.store(true, Ordering::Release);
        self.shm.crash();
        self.shm.join();
        self.tcp.shutdown(true);
    }
}

impl Outlet for ProcessFabric {
    fn forward(&self, delay: SimDuration, pkt: Packet) {
        // Failures are counted (network timeouts, no link); the NIC sees a lost packet.
        let _ = self.send(delay, &pkt);
    }

    fn poll(&self) -> bool {
        !self.closed.load(Ordering::Acquire) && self.shm.poll(&self.core)
    }

    fn before_sleep(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.shm.before_sleep()
    }

    fn next_timer(&self, host_ns: Option<u64>) {
        self.shm.publish_next_timer(host_ns);
    }

    fn peer_behind(&self) -> bool {
        self.shm.peer_behind(&self.core)
    }

    fn settled(&self) {
        self.shm.settled(&self.core);
        self.tcp.settled();
    }

    fn in_flight(&self) -> bool {
        self.shm.receiving()
            || self.tcp.receiving()
            || self.links.iter().enumerate().any(|(port, l)| {
                // A peer that is gone never takes its frames: stop waiting for it.
                l.get().is_some_and(|l| {
                    l.pending()
                        && !matches!(
                            self.core.state(port as u32),
                            PeerState::Dead | PeerState::Closed
                        )
                })
            })
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for ProcessFabric {
    fn drop(&mut self) {
        self.close();
    }
}

/// Whether process `pid` is alive (it exists and is not a zombie), from `/proc`.
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid == std::process::id() {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            s.rsplit_once(')')
                .and_then(|(_, r)| r.trim_start().chars().next()),
            Some('Z' | 'X')
        ),
        Err(_) => false,
    }
}
