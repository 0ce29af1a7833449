//! Links between hosts: one TCP stream per direction. The sending process connects to the
//! receiver's listener and opens with a hello frame naming its port; after that it only
//! writes packet frames, heartbeats when idle (every [`RemoteConfig::beat`]), and a goodbye
//! when it closes. A writer thread per link takes frames from an unbounded queue, so an
//! engine thread never blocks on a socket; a reader thread per inbound stream delivers into
//! the engine.
//!
//! In flight: each side counts the packet frames it took from a stream and, when its reader
//! runs out of buffered bytes, sends the count back as a credit frame on its own stream to
//! that peer; a link is in flight while it sent more packets than the peer credited (bytes
//! in the kernel's socket buffers included).
//!
//! Liveness comes from the kernel, which answers for its host even while the peer process
//! is stopped or descheduled: a stream that ends without a goodbye or is reset, TCP
//! keepalives left unanswered (an idle stream), or data we sent left unacknowledged by the
//! peer's kernel for the fabric timeout (`tcpi_unacked`, `tcpi_last_ack_recv` of
//! `TCP_INFO`, looked at every heartbeat period) declare the peer gone. A reader with
//! nothing to read waits without limit, and a writer blocked by a peer that does not read
//! (its receive window closed) waits too: neither is a death. (`TCP_USER_TIMEOUT` is not
//! used: Linux aborts a connection whose peer keeps its window closed for that long even
//! though the peer's kernel answers every probe.) Frames and heartbeats are the peer's
//! signs of life that pace the engine's clock.
//!
//! [`RemoteConfig::beat`]: super::RemoteConfig::beat

use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::frame::{self, Header, Kind};
use super::{Arrivals, Core, LinkKind, PeerLink, PeerState, RemoteError, Watch};
use crate::fabric::Packet;
use crate::time::{SimDuration, SimTime};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This process's TCP side: the listener, its acceptor, the readers, the links.
pub(crate) struct TcpSide {
    addr: SocketAddr,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Every stream (inbound and outbound), to cut them at shutdown.
    streams: Arc<Mutex<Vec<TcpStream>>>,
    links: Arc<Mutex<Vec<Arc<TcpLink>>>>,
    /// Reader threads handing a frame to the engine, or holding read-ahead frames.
    busy: Arc<AtomicUsize>,
    /// Writer threads still running.
    writers: Arc<AtomicUsize>,
    /// How long a clean shutdown waits for the writers to say goodbye.
    timeout: Duration,
}

impl TcpSide {
    pub(crate) fn new(core: &Arc<Core>) -> Result<TcpSide, RemoteError> {
        let listener = TcpListener::bind(SocketAddr::new(core.cfg.tcp_bind, 0))
            .map_err(|e| RemoteError::io("binding the fabric listener", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| RemoteError::io("reading the listener's address", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| RemoteError::io("configuring the listener", e))?;
        let side = TcpSide {
            addr,
            threads: Arc::new(Mutex::new(Vec::new())),
            streams: Arc::new(Mutex::new(Vec::new())),
            links: Arc::new(Mutex::new(Vec::new())),
            busy: Arc::new(AtomicUsize::new(0)),
            writers: Arc::new(AtomicUsize::new(0)),
            timeout: core.cfg.timeout,
        };
        let ctx = Readers {
            core: Arc::clone(core),
            threads: Arc::clone(&side.threads),
            streams: Arc::clone(&side.streams),
            busy: Arc::clone(&side.busy),
            links: Arc::clone(&side.links),
        };
        let h = std::thread::Builder::new()
            .name(format!("fabric-tcp-accept-{}", core.cfg.port.0))
            .spawn(move || accept_loop(&ctx, &listener))
            .map_err(|e| RemoteError::io("spawning the acceptor", e))?;
        lock(&side.threads).push(h);
        Ok(side)
    }

    pub(crate) fn address(&self) -> SocketAddr {
        self.addr
    }

    /// The engine has handled what it was given: send the credits held back.
    pub(crate) fn settled(&self) {
        for l in lock(&self.links).iter() {
            l.settle();
        }
    }

    /// Whether a reader is handing frames to the engine or holds read-ahead bytes, or
    /// bytes from a peer wait in the kernel's socket buffers for a reader that has not run
    /// yet (a response the peer sent before our timer came due is on its way, not lost).
    pub(crate) fn receiving(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0 || self.unread()
    }

    /// Whether any stream has bytes the kernel holds for us (peeked, not taken: the
    /// readers still get them). A stream list held by another thread counts as yes.
    fn unread(&self) -> bool {
        let Ok(streams) = self.streams.try_lock() else {
            return true;
        };
        streams.iter().any(unread)
    }

    pub(crate) fn connect(
        &self,
        core: &Arc<Core>,
        port: u32,
        addr: SocketAddr,
    ) -> Result<Arc<dyn PeerLink>, RemoteError> {
        let what = |e| RemoteError::io(format!("connecting to port {port} at {addr}"), e);
        let s = TcpStream::connect_timeout(&addr, core.cfg.timeout).map_err(what)?;
        s.set_nodelay(true).map_err(what)?;
        keepalive(&s, core.cfg.timeout).map_err(what)?;
        let mut w = s.try_clone().map_err(what)?;
        w.write_all(&Header::control(Kind::Hello, core.cfg.port.0).encode())
            .map_err(what)?;
        lock(&self.streams).push(s.try_clone().map_err(what)?);
        let watched = s.try_clone().map_err(what)?;
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let c = Arc::clone(core);
        let queued = Arc::new(AtomicUsize::new(0));
        let taken = Arc::new(AtomicU64::new(0));
        let (q, t) = (Arc::clone(&queued), Arc::clone(&taken));
        let writing = Arc::clone(&self.writers);
        writing.fetch_add(1, Ordering::AcqRel);
        let h = std::thread::Builder::new()
            .name(format!("fabric-tcp-w{}-{port}", core.cfg.port.0))
            .spawn(move || {
                write_loop(&c, port, w, &rx, &q, &t);
                writing.fetch_sub(1, Ordering::AcqRel);
            })
            .map_err(|e| {
                self.writers.fetch_sub(1, Ordering::AcqRel);
                RemoteError::io("spawning a writer", e)
            })?;
        lock(&self.threads).push(h);
        let link = Arc::new(TcpLink {
            port,
            core: Arc::clone(core),
            tx: Mutex::new(Some(tx)),
            queued: Arc::clone(&queued),
            sent: AtomicU64::new(0),
            credited: AtomicU64::new(0),
            taken: Arc::clone(&taken),
            took: AtomicU64::new(0),
            owed: AtomicBool::new(false),
            stream: watched,
        });
        lock(&self.links).push(Arc::clone(&link));
        super::lock(&core.watchers).push(Arc::clone(&link) as Arc<dyn Watch>);
        Ok(link)
    }

    /// Stop every thread. Clean close: writers say goodbye, readers are unblocked by
    /// cutting the read side of every stream. Crash: every stream is cut first, so the
    /// peers see their connections end without a goodbye.
    pub(crate) fn shutdown(&self, crashed: bool) {
        if crashed {
            for s in lock(&self.streams).iter() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        for l in lock(&self.links).drain(..) {
            lock(&l.tx).take();
        }
        // A writer blocked by a peer that stopped reading gets the timeout to finish its
        // goodbye; then its stream is cut.
        let until = std::time::Instant::now() + self.timeout;
        while self.writers.load(Ordering::Acquire) > 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        for s in lock(&self.streams).iter() {
            let how = if self.writers.load(Ordering::Acquire) > 0 {
                Shutdown::Both
            } else {
                Shutdown::Read
            };
            let _ = s.shutdown(how);
        }
        let threads: Vec<JoinHandle<()>> = lock(&self.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
        for s in lock(&self.streams).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// The link toward one peer on another host (or forced TCP).
pub(crate) struct TcpLink {
    port: u32,
    core: Arc<Core>,
    tx: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    /// Frames queued and not yet written to the socket.
    queued: Arc<AtomicUsize>,
    /// Packet frames sent, and how many of them the peer credited.
    sent: AtomicU64,
    credited: AtomicU64,
    /// Packet frames our reader took from the peer's stream and our engine has handled:
    /// the value the writer sends back as a credit.
    taken: Arc<AtomicU64>,
    /// Packet frames our reader took, and whether a credit for them is owed (held back
    /// while our engine still had deferred deliveries; see [`Arrivals::settled`]).
    took: AtomicU64,
    owed: AtomicBool,
    /// The stream we write, to ask its kernel whether the peer's acknowledges our data.
    stream: TcpStream,
}

impl Watch for TcpLink {
    /// The peer's kernel left data we sent unacknowledged for the timeout: its host is
    /// unreachable (a cable pulled, a host gone). A peer process that is stopped still has
    /// a kernel that acknowledges (or answers window probes with a closed window), so this
    /// never fires for it.
    fn watch(&self, core: &Core) {
        if core.state(self.port) != PeerState::Up {
            return;
        }
        let Some((unacked, last_ack_ms)) = tcp_info(&self.stream) else {
            return;
        };
        if unacked > 0 && u128::from(last_ack_ms) > core.cfg.timeout.as_millis() {
            core.set_dead(
                self.port,
                format!(
                    "its host left our data unacknowledged for {:?} (link down or host gone)",
                    core.cfg.timeout
                ),
            );
            // Unblock a writer waiting for room that will never come.
            let _ = self.stream.shutdown(Shutdown::Both);
        }
    }
}

/// `TCP_INFO` of a stream: segments sent and not acknowledged, and milliseconds since the
/// last acknowledgement arrived.
#[allow(unsafe_code)]
fn tcp_info(s: &TcpStream) -> Option<(u32, u32)> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero `tcp_info` is a valid value of this plain C struct.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>()).ok()?;
    // SAFETY: `info` is a writable buffer of `len` bytes that outlives the call, the
    // descriptor is an open TCP socket owned by `s`, and the kernel writes at most `len`
    // bytes (and stores how many in `len`).
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::from_mut(&mut info).cast(),
            &raw mut len,
        )
    };
    (rc == 0).then_some((info.tcpi_unacked, info.tcpi_last_ack_recv))
}

/// Kernel keepalives on `s`: an idle stream whose peer host stops answering is ended by
/// the kernel after about `timeout` (probes every second after an idle period).
fn keepalive(s: &TcpStream, timeout: Duration) -> std::io::Result<()> {
    use rustix::net::sockopt;
    let secs = u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX).max(3);
    sockopt::set_socket_keepalive(s, true)?;
    sockopt::set_tcp_keepidle(s, Duration::from_secs(u64::from(secs / 3).max(1)))?;
    sockopt::set_tcp_keepintvl(s, Duration::from_secs(1))?;
    sockopt::set_tcp_keepcnt(s, (secs - secs / 3).max(1))?;
    Ok(())
}

impl TcpLink {
    /// Ask the writer to send a credit (an empty frame in the queue means "credit").
    fn credit(&self) {
        if let Some(tx) = lock(&self.tx).as_ref() {
            let _ = tx.send(Vec::new());
        }
    }

    /// Our reader took `took` packet frames from the peer so far: credit them now if the
    /// engine has handled them, else once it has ([`TcpLink::settle`] from
    /// [`TcpSide::settled`]). A credit tells the peer its packets are no longer in flight,
    /// so it must not come before their handling (and the answers it sends) has run.
    fn offer_credit(&self, took: u64, arrivals: &dyn Arrivals) {
        self.took.store(took, Ordering::SeqCst);
        self.owed.store(true, Ordering::SeqCst);
        // Pairs with the fence in the engine's settle notification: either it sees the
        // debt, or this sees the engine settled.
        std::sync::atomic::fence(Ordering::SeqCst);
        if arrivals.settled() {
            self.settle();
        }
    }

    /// Send the credit owed, if any.
    fn settle(&self) {
        if self.owed.swap(false, Ordering::SeqCst) {
            self.taken
                .store(self.took.load(Ordering::SeqCst), Ordering::Release);
            self.credit();
        }
    }
}

impl PeerLink for TcpLink {
    fn send(&self, delay: SimDuration, pkt: &Packet) -> Result<(), RemoteError> {
        if matches!(
            self.core.state(self.port),
            PeerState::Dead | PeerState::Closed
        ) {
            return Err(self.core.gone(self.port));
        }
        let h = Header::packet(pkt, delay).encode();
        let mut f = Vec::with_capacity(h.len() + pkt.data.len());
        f.extend_from_slice(&h);
        f.extend_from_slice(&pkt.data);
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.sent.fetch_add(1, Ordering::AcqRel);
        let sent = lock(&self.tx).as_ref().is_some_and(|tx| tx.send(f).is_ok());
        if !sent {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            self.sent.fetch_sub(1, Ordering::AcqRel);
            return Err(self.core.gone(self.port));
        }
        self.core.count_sent(pkt.data.len());
        Ok(())
    }

    fn close(&self) {
        lock(&self.tx).take();
    }

    fn kind(&self) -> LinkKind {
        LinkKind::Tcp
    }

    fn pending(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
            || self.credited.load(Ordering::Acquire) < self.sent.load(Ordering::Acquire)
    }
}

fn write_loop(
    core: &Core,
    port: u32,
    stream: TcpStream,
    rx: &mpsc::Receiver<Vec<u8>>,
    queued: &AtomicUsize,
    taken: &AtomicU64,
) {
    // An empty frame from the queue asks for a credit: how many packets we took so far.
    let credit = || {
        let mut h = Header::control(Kind::Credit, me_of(core));
        h.delay = SimDuration(taken.load(Ordering::Acquire));
        h.encode()
    };
    let beat = core.cfg.beat();
    let me = core.cfg.port.0;
    let mut w = BufWriter::with_capacity(256 << 10, stream);
    let fail = |e: std::io::Error, rx: &mpsc::Receiver<Vec<u8>>| {
        core.set_dead(port, format!("writing to it failed: {e}"));
        // Whatever is queued (and comes later) never arrives.
        let mut n = 1;
        while rx.recv().is_ok() {
            n += 1;
        }
        queued.store(0, Ordering::Release);
        core.count_timeouts(n);
    };
    loop {
        if core.crashed.load(Ordering::Acquire) {
            return;
        }
        let r = match rx.recv_timeout(beat) {
            Ok(f) => {
                let mut n = 0;
                let mut next = Some(f);
                let mut r = Ok(());
                while let Some(f) = next.take() {
                    r = if f.is_empty() {
                        w.write_all(&credit())
                    } else {
                        n += 1;
                        w.write_all(&f)
                    };
                    if r.is_err() {
                        break;
                    }
                    next = rx.try_recv().ok();
                }
                let r = r.and_then(|()| w.flush());
                queued.fetch_sub(n, Ordering::AcqRel);
                r
            }
            Err(RecvTimeoutError::Timeout) => w
                .write_all(&Header::control(Kind::Heartbeat, me).encode())
                .and_then(|()| w.flush()),
            Err(RecvTimeoutError::Disconnected) => {
                if !core.crashed.load(Ordering::Acquire) {
                    let _ = w
                        .write_all(&Header::control(Kind::Bye, me).encode())
                        .and_then(|()| w.flush());
                }
                let _ = w.get_ref().shutdown(Shutdown::Write);
                return;
            }
        };
        if let Err(e) = r {
            if core.stop.load(Ordering::Acquire) {
                return;
            }
            fail(e, rx);
            return;
        }
    }
}

/// Whether the kernel holds bytes received on `s` that nobody has read yet (a peek that
/// neither blocks nor takes them).
fn unread(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    matches!(rustix::net::recv(s, &mut b[..], flags), Ok((got, _)) if got > 0)
}

fn me_of(core: &Core) -> u32 {
    core.cfg.port.0
}

/// What the acceptor hands every reader thread.
#[derive(Clone)]
struct Readers {
    core: Arc<Core>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    busy: Arc<AtomicUsize>,
    links: Arc<Mutex<Vec<Arc<TcpLink>>>>,
}

impl Readers {
    fn link(&self, port: u32) -> Option<Arc<TcpLink>> {
        lock(&self.links).iter().find(|l| l.port == port).cloned()
    }
}

fn accept_loop(ctx: &Readers, listener: &TcpListener) {
    let core = &ctx.core;
    while !core.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((s, _)) => {
                let Ok(clone) = s.try_clone() else { continue };
                lock(&ctx.streams).push(clone);
                let c = ctx.clone();
                if let Ok(h) = std::thread::Builder::new()
                    .name(format!("fabric-tcp-r{}", core.cfg.port.0))
                    .spawn(move || read_loop(&c, s))
                {
                    lock(&ctx.threads).push(h);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// Counts a reader as busy while it lives.
struct Busy<'a>(&'a AtomicUsize, bool);

impl Busy<'_> {
    fn set(&mut self, on: bool) {
        if on != self.1 {
            self.1 = on;
            if on {
                self.0.fetch_add(1, Ordering::AcqRel);
            } else {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}

fn read_loop(ctx: &Readers, s: TcpStream) {
    let core = &*ctx.core;
    let mut busy = Busy(&ctx.busy, false);
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(None);
    let _ = keepalive(&s, core.cfg.timeout);
    let mut r = BufReader::with_capacity(256 << 10, s);
    let mut hb = [0u8; frame::HEADER];
    let port = match r
        .read_exact(&mut hb)
        .map_err(|e| e.to_string())
        .and_then(|()| Header::decode(&hb).map_err(|e| e.to_string()))
    {
        Ok(h) if h.kind == Kind::Hello && h.src < core.cfg.ports => h.src,
        _ => return,
    };
    let mut flows = Box::new([SimTime::ZERO; 256]);
    let mut link = None;
    let mut taken = 0u64;
    let mut credited = 0u64;
    loop {
        // Idle only when no read-ahead bytes are buffered (the next read blocks); then
        // tell the peer how many of its packets we took.
        let idle = r.buffer().is_empty();
        if idle && taken != credited {
            if link.is_none() {
                link = ctx.link(port);
            }
            if let Some(l) = &link {
                l.offer_credit(taken, &*core.arrivals);
                credited = taken;
            }
        }
        busy.set(!idle);
        let res = r.read_exact(&mut hb);
        busy.set(true);
        if core.stop.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = res {
            let why = match e.kind() {
                ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                    "its host stopped answering TCP keepalives (link down or host gone)".into()
                }
                ErrorKind::UnexpectedEof => "its connection closed without a goodbye".into(),
                _ => format!("reading from it failed: {e}"),
            };
            core.set_dead(port, why);
            return;
        }
        let h = match Header::decode(&hb) {
            Ok(h) => h,
            Err(e) => {
                core.set_dead(port, e.to_string());
                return;
            }
        };
        // Any frame (a heartbeat included) shows the peer runs.
        core.alive(port);
        match h.kind {
            Kind::Packet => {
                let mut data = vec![0u8; h.len as usize];
                if let Err(e) = r.read_exact(&mut data) {
                    if !core.stop.load(Ordering::Acquire) {
                        core.set_dead(port, format!("a frame from it was cut short: {e}"));
                    }
                    return;
                }
                core.deliver(h, data, &mut flows);
                taken += 1;
            }
            Kind::Credit => {
                if link.is_none() {
                    link = ctx.link(port);
                }
                if let Some(l) = &link {
                    l.credited.fetch_max(h.delay.0, Ordering::AcqRel);
                }
            }
            Kind::Heartbeat => {}
            Kind::Bye => {
                core.set_closed(port);
                return;
            }
            Kind::Hello => {
                core.set_dead(port, "it sent a second hello".into());
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unread_bytes_are_seen_without_being_taken() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut rx, _) = listener.accept().unwrap();
        assert!(!unread(&rx), "nothing sent yet");
        tx.write_all(&[1, 2, 3]).unwrap();
        tx.flush().unwrap();
        let t0 = std::time::Instant::now();
        while !unread(&rx) && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(unread(&rx), "sent bytes wait in the kernel");
        // Peeking took nothing: the reader still gets every byte.
        let mut got = [0u8; 3];
        rx.read_exact(&mut got).unwrap();
        assert_eq!(got, [1, 2, 3]);
        assert!(!unread(&rx), "all read");
        // A stream whose peer closed has nothing unread either.
        drop(tx);
        assert!(!unread(&rx));
    }
}
