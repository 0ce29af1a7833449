//! A PMI-1 server over TCP (the `PMI_PORT` side of the protocol, as hydra's `-pmi-port` mode
//! serves it): one job of `size` ranks, one key-value space, barriers, abort.
//!
//! It serves the commands a PMI-1 client sends (`initack`, `init`, `get_maxes`,
//! `get_appnum`, `get_universe_size`, `get_my_kvsname`, `put`, `barrier_in`, `get`,
//! `finalize`, `abort`) with the replies hydra 4.0.2 gives (see docs/launch.md). Like hydra's
//! proxy, it holds a rank's puts until that rank enters a barrier, so a program that gets
//! before the barrier fails here as it would there.
//!
//! Failures end the job instead of hanging it: a rank that calls `abort`, closes its
//! connection without `finalize`, sends a line that is not PMI-1, or leaves while others wait
//! in a barrier makes the server *abort*: every rank waiting in a barrier, and every later
//! request, gets an error reply (`rc=-1 msg=job_aborted:<why>`), and the launcher hears of it
//! through [`Server::events`].

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};

use crate::wire::{self, Message};

/// The server's limits, published by `get_maxes` (hydra 4.0.2's values by default).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `kvsname_max`.
    pub kvsname: usize,
    /// `keylen_max`.
    pub keylen: usize,
    /// `vallen_max`.
    pub vallen: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            kvsname: 256,
            keylen: 64,
            vallen: 1024,
        }
    }
}

/// What the server tells the launcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The job was aborted; `why` says by whom and why. Sent once.
    Aborted {
        /// The message for the user.
        why: String,
        /// The rank whose connection ended without `finalize`, when that was the cause.
        lost: Option<u32>,
    },
    /// A rank called PMI abort (sent for every call, also when the job was aborted
    /// already; the first abort is also an [`Event::Aborted`]).
    AbortCalled {
        /// The rank (its `initack` id), if it said.
        rank: Option<u32>,
        /// Its message, as in [`Event::Aborted`].
        why: String,
    },
    /// `rank` sent `finalize`.
    Finalized {
        /// The rank (its `initack` id), if it said.
        rank: Option<u32>,
    },
}

/// One client connection.
struct Client {
    rank: Option<u32>,
    writer: TcpStream,
    /// Puts not yet committed (committed when the client enters a barrier).
    pending: Vec<(String, String)>,
    in_barrier: bool,
    finalized: bool,
}

#[derive(Default)]
struct State {
    clients: HashMap<u64, Client>,
    next_id: u64,
    kvs: HashMap<String, String>,
    /// Ranks that said who they are (`initack`).
    known: HashSet<u32>,
    /// Ranks that can no longer join a barrier: finalized, or reported gone by the launcher.
    departed: HashSet<u32>,
    /// Clients without an id that finalized.
    departed_anonymous: u32,
    aborted: Option<String>,
}

struct Shared {
    size: u32,
    limits: Limits,
    kvsname: String,
    state: Mutex<State>,
    events: Mutex<Sender<Event>>,
    stopping: AtomicBool,
}

/// A running PMI-1 server. Dropping it stops accepting connections.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    events: Receiver<Event>,
}

fn send(w: &mut TcpStream, msg: &Message) {
    // A client that vanished is noticed by its reader (end of stream), not here.
    if let Ok(line) = msg.format() {
        let _ = w.write_all(line.as_bytes());
    }
}

/// The reply command of each request (hydra's names).
fn reply_cmd(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "initack" => "initack",
        "init" => "response_to_init",
        "get_maxes" => "maxes",
        "get_appnum" => "appnum",
        "get_universe_size" => "universe_size",
        "get_my_kvsname" => "my_kvsname",
        "put" => "put_result",
        "get" => "get_result",
        "barrier_in" => "barrier_out",
        "finalize" => "finalize_ack",
        _ => return None,
    })
}

fn aborted_reply(cmd: &str, why: &str) -> Message {
    Message::new(cmd)
        .with("rc", -1)
        .with("msg", format!("job_aborted:{}", wire::squeeze(why)))
}

impl Server {
    /// Listen on an ephemeral port of 127.0.0.1 for a job of `size` ranks.
    pub fn start(size: u32, limits: Limits) -> io::Result<Server> {
        Server::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST), size, limits)
    }

    /// Listen on an ephemeral port of `ip` (the unspecified address: every interface, for
    /// ranks on other hosts) for a job of `size` ranks.
    pub fn start_on(ip: IpAddr, size: u32, limits: Limits) -> io::Result<Server> {
        let listener = TcpListener::bind((ip, 0))?;
        let addr = listener.local_addr()?;
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            size,
            limits,
            kvsname: format!("kvs_{}_0", std::process::id()),
            state: Mutex::new(State::default()),
            events: Mutex::new(tx),
            stopping: AtomicBool::new(false),
        });
        let acceptor = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("pmi-accept".into())
            .spawn(move || accept_loop(&listener, &acceptor))?;
        Ok(Server {
            addr,
            shared,
            events: rx,
        })
    }

    /// The value of `PMI_PORT` for the ranks on this host.
    pub fn port(&self) -> String {
        if self.addr.ip().is_unspecified() {
            format!("127.0.0.1:{}", self.addr.port())
        } else {
            self.addr.to_string()
        }
    }

    /// The value of `PMI_PORT` for ranks that reach this host at `ip`.
    pub fn port_at(&self, ip: IpAddr) -> String {
        SocketAddr::new(ip, self.addr.port()).to_string()
    }

    /// The name of the job's key-value space.
    pub fn kvsname(&self) -> &str {
        &self.shared.kvsname
    }

    /// What happened since the last look (aborts, finalizes).
    pub fn events(&self) -> &Receiver<Event> {
        &self.events
    }

    /// Abort the job: ranks waiting in a barrier, and every later request, get an error.
    pub fn abort(&self, why: &str) {
        self.shared.abort(why);
    }

    /// Wait until every connection has ended (its last requests handled), at most `limit`.
    /// Whether they all did.
    pub fn wait_closed(&self, limit: std::time::Duration) -> bool {
        let end = std::time::Instant::now() + limit;
        loop {
            if self.shared.lock().clients.is_empty() {
                return true;
            }
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The launcher saw `rank` exit: if it still holds a connection without `finalize`, that
    /// connection's end is reported when it closes; if it never joined or finalized, it can
    /// no longer join a barrier, which ends one that others wait in.
    pub fn rank_exited(&self, rank: u32) {
        let mut st = self.shared.lock();
        if !st.known.contains(&rank) {
            st.departed.insert(rank);
            self.shared.check_barrier(&mut st);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor so it sees the flag; it exits on the next connection.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        let _ = TcpStream::connect(wake);
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn event(&self, e: Event) {
        // The launcher may be gone already (the job ended); nobody left to tell.
        let _ = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(e);
    }

    fn abort(&self, why: &str) {
        let mut st = self.lock();
        self.abort_locked(&mut st, why);
    }

    fn abort_locked(&self, st: &mut State, why: &str) {
        self.abort_lost(st, why, None);
    }

    fn abort_lost(&self, st: &mut State, why: &str, lost: Option<u32>) {
        if st.aborted.is_some() {
            return;
        }
        st.aborted = Some(why.to_string());
        tracing::debug!("PMI job aborted: {why}");
        for c in st.clients.values_mut() {
            if c.in_barrier {
                c.in_barrier = false;
                send(&mut c.writer, &aborted_reply("barrier_out", why));
            }
        }
        self.event(Event::Aborted {
            why: why.to_string(),
            lost,
        });
    }

    /// Complete the barrier if every rank is in it; abort it if a rank that is not can no
    /// longer come.
    fn check_barrier(&self, st: &mut State) {
        if st.aborted.is_some() {
            return;
        }
        let waiting = st.clients.values().filter(|c| c.in_barrier).count() as u64;
        if waiting == 0 {
            return;
        }
        if waiting == u64::from(self.size) {
            for c in st.clients.values_mut() {
                c.in_barrier = false;
                send(&mut c.writer, &Message::new("barrier_out").with("rc", 0));
            }
            return;
        }
        let departed = st.departed.len() as u64 + u64::from(st.departed_anonymous);
        if departed > 0 {
            let mut gone: Vec<u32> = st.departed.iter().copied().collect();
            gone.sort_unstable();
            let names = gone
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let why = format!(
                "{waiting} rank(s) wait in a PMI barrier that cannot complete: rank(s) {names} \
                 finalized or exited without joining it"
            );
            self.abort_locked(st, &why);
        }
    }

    /// Handle one request of client `id`.
    fn handle(&self, id: u64, msg: &Message) -> Result<(), String> {
        let mut st = self.lock();
        let st = &mut *st;
        let who = rank_name(st.clients.get(&id).and_then(|c| c.rank));
        let Some(reply_to) = reply_cmd(msg.cmd()) else {
            if msg.cmd() == "abort" {
                let code = msg.get("exitcode").unwrap_or("?");
                let why = msg.get("msg").map(|m| m.replace('_', " "));
                let why = format!(
                    "{who} called PMI abort (exit code {code}){}",
                    why.map(|w| format!(": {w}")).unwrap_or_default()
                );
                self.abort_locked(st, &why);
                let rank = st.clients.get(&id).and_then(|c| c.rank);
                self.event(Event::AbortCalled { rank, why });
                return Ok(());
            }
            return Err(format!("{who} sent an unsupported PMI command: {msg}"));
        };
        if let Some(why) = st.aborted.clone()
            && msg.cmd() != "finalize"
        {
            let c = st.clients.get_mut(&id).ok_or("unknown client")?;
            send(&mut c.writer, &aborted_reply(reply_to, &why));
            return Ok(());
        }
        let mut reply = Message::new(reply_to);
        match msg.cmd() {
            "initack" => {
                let rank = msg
                    .get("pmiid")
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|&r| r < self.size)
                    .ok_or_else(|| {
                        format!(
                            "a client sent {msg}: pmiid must be a rank below {}",
                            self.size
                        )
                    })?;
                if !st.known.insert(rank) {
                    return Err(format!("two clients claim PMI_ID={rank}"));
                }
                let c = st.clients.get_mut(&id).ok_or("unknown client")?;
                c.rank = Some(rank);
                for m in [
                    Message::new("initack").with("rc", 0),
                    Message::new("set").with("size", self.size),
                    Message::new("set").with("rank", rank),
                    Message::new("set").with("debug", 0),
                ] {
                    send(&mut c.writer, &m);
                }
                return Ok(());
            }
            "init" => {
                if msg.get("pmi_version") != Some("1") {
                    reply = reply.with("rc", -1).with("msg", "only_PMI-1_is_served");
                } else {
                    reply = reply
                        .with("pmi_version", 1)
                        .with("pmi_subversion", 1)
                        .with("rc", 0);
                }
            }
            "get_maxes" => {
                reply = reply
                    .with("rc", 0)
                    .with("kvsname_max", self.limits.kvsname)
                    .with("keylen_max", self.limits.keylen)
                    .with("vallen_max", self.limits.vallen);
            }
            "get_appnum" => reply = reply.with("rc", 0).with("appnum", 0),
            "get_universe_size" => reply = reply.with("rc", 0).with("size", self.size),
            "get_my_kvsname" => reply = reply.with("rc", 0).with("kvsname", &self.kvsname),
            "put" => {
                reply = match self.check_put(msg) {
                    Ok((k, v)) => {
                        let c = st.clients.get_mut(&id).ok_or("unknown client")?;
                        c.pending.push((k, v));
                        reply.with("rc", 0).with("msg", "success")
                    }
                    Err(why) => reply.with("rc", -1).with("msg", why),
                };
            }
            "get" => {
                let key = msg.get("key").unwrap_or_default();
                let value = if msg.get("kvsname") != Some(self.kvsname.as_str()) {
                    Err("unknown_kvsname".to_string())
                } else if key == "PMI_process_mapping" {
                    // Every rank on this one host.
                    Ok(format!("(vector,(0,1,{}))", self.size))
                } else {
                    st.kvs
                        .get(key)
                        .cloned()
                        .ok_or_else(|| format!("key_{key}_not_found"))
                };
                reply = match value {
                    Ok(v) => reply.with("rc", 0).with("msg", "success").with("value", v),
                    Err(why) => reply
                        .with("rc", -1)
                        .with("msg", why)
                        .with("value", "unknown"),
                };
            }
            "barrier_in" => {
                let c = st.clients.get_mut(&id).ok_or("unknown client")?;
                c.in_barrier = true;
                let pending = std::mem::take(&mut c.pending);
                st.kvs.extend(pending);
                self.check_barrier(st);
                return Ok(());
            }
            "finalize" => {
                let c = st.clients.get_mut(&id).ok_or("unknown client")?;
                c.finalized = true;
                let rank = c.rank;
                send(&mut c.writer, &reply);
                match rank {
                    Some(r) => {
                        st.departed.insert(r);
                    }
                    None => st.departed_anonymous += 1,
                }
                self.event(Event::Finalized { rank });
                self.check_barrier(st);
                return Ok(());
            }
            _ => return Err(format!("{who} sent an unsupported PMI command: {msg}")),
        }
        let c = st.clients.get_mut(&id).ok_or("unknown client")?;
        send(&mut c.writer, &reply);
        Ok(())
    }

    /// The key and value of a `put`, or the reason it is refused.
    fn check_put(&self, msg: &Message) -> Result<(String, String), String> {
        if msg.get("kvsname") != Some(self.kvsname.as_str()) {
            return Err("unknown_kvsname".into());
        }
        let (Some(key), Some(value)) = (msg.get("key"), msg.get("value")) else {
            return Err("put_needs_key_and_value".into());
        };
        if key.is_empty() || key.len() >= self.limits.keylen {
            return Err(format!(
                "key_length_must_be_1_to_{}",
                self.limits.keylen - 1
            ));
        }
        if value.len() >= self.limits.vallen {
            return Err(format!("value_longer_than_{}", self.limits.vallen - 1));
        }
        Ok((key.to_string(), value.to_string()))
    }

    /// Client `id`'s connection ended (`error`: how, if not by a clean end of stream).
    fn closed(&self, id: u64, error: Option<String>) {
        let mut st = self.lock();
        let Some(c) = st.clients.remove(&id) else {
            return;
        };
        let _ = c.writer.shutdown(Shutdown::Both);
        if c.finalized {
            return;
        }
        let who = rank_name(c.rank);
        let why = match error {
            Some(e) => format!("{who}: {e}"),
            None => format!("{who} closed its PMI connection without finalize (it exited or died)"),
        };
        if let Some(r) = c.rank {
            st.departed.insert(r);
        }
        self.abort_lost(&mut st, &why, c.rank);
    }
}

fn rank_name(rank: Option<u32>) -> String {
    match rank {
        Some(r) => format!("rank {r}"),
        None => "a rank (no PMI_ID)".to_string(),
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("PMI server: accept failed: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (writer, reader) = match stream.try_clone() {
            Ok(w) => (w, stream),
            Err(e) => {
                tracing::warn!("PMI server: cannot clone a connection: {e}");
                continue;
            }
        };
        let id = {
            let mut st = shared.lock();
            let id = st.next_id;
            st.next_id += 1;
            st.clients.insert(
                id,
                Client {
                    rank: None,
                    writer,
                    pending: Vec::new(),
                    in_barrier: false,
                    finalized: false,
                },
            );
            id
        };
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name(format!("pmi-client-{id}"))
            .spawn({
                let shared = Arc::clone(&shared);
                move || serve(&shared, id, reader)
            });
        if let Err(e) = spawned {
            shared.closed(id, Some(format!("the PMI server cannot serve it: {e}")));
        }
    }
}

/// Read and handle client `id`'s requests until its connection ends.
fn serve(shared: &Shared, id: u64, stream: TcpStream) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let error = loop {
        line.clear();
        match (&mut reader)
            .take(wire::MAX_READ_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => break None,
            Ok(_) => {}
            Err(e) => break Some(format!("reading its PMI connection failed: {e}")),
        }
        let msg = match Message::parse(&line) {
            Ok(m) => m,
            Err(e) => break Some(format!("sent a line that is not PMI-1: {e}")),
        };
        if let Err(why) = shared.handle(id, &msg) {
            break Some(why);
        }
    };
    shared.closed(id, error);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct Raw {
        reader: BufReader<TcpStream>,
        writer: TcpStream,
    }

    impl Raw {
        fn new(server: &Server) -> Raw {
            let s = TcpStream::connect(server.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            Raw {
                reader: BufReader::new(s.try_clone().unwrap()),
                writer: s,
            }
        }
        fn send(&mut self, line: &str) {
            self.writer.write_all(line.as_bytes()).unwrap();
            self.writer.write_all(b"\n").unwrap();
        }
        fn recv(&mut self) -> Message {
            let mut l = Vec::new();
            self.reader.read_until(b'\n', &mut l).unwrap();
            Message::parse(&l).unwrap()
        }
        fn call(&mut self, line: &str) -> Message {
            self.send(line);
            self.recv()
        }
    }

    #[test]
    fn puts_are_seen_after_the_barrier_and_missing_keys_fail() {
        let server = Server::start(2, Limits::default()).unwrap();
        let kvs = server.kvsname().to_string();
        let mut a = Raw::new(&server);
        let mut b = Raw::new(&server);
        let r = a.call("cmd=init pmi_version=1 pmi_subversion=1");
        assert_eq!((r.cmd(), r.rc()), ("response_to_init", Ok(0)));
        let r = a.call("cmd=get_maxes");
        assert_eq!(r.get("vallen_max"), Some("1024"));
        let r = a.call("cmd=get_my_kvsname");
        assert_eq!(r.get("kvsname"), Some(kvs.as_str()));
        let r = a.call(&format!("cmd=put kvsname={kvs} key=k value=v0"));
        assert_eq!((r.cmd(), r.rc()), ("put_result", Ok(0)));
        // Not visible before the barrier, as with hydra's proxy.
        let r = b.call(&format!("cmd=get kvsname={kvs} key=k"));
        assert_eq!(r.rc(), Ok(-1));
        a.send("cmd=barrier_in");
        b.send("cmd=barrier_in");
        assert_eq!(a.recv().cmd(), "barrier_out");
        assert_eq!(b.recv().cmd(), "barrier_out");
        let r = b.call(&format!("cmd=get kvsname={kvs} key=k"));
        assert_eq!((r.rc(), r.get("value")), (Ok(0), Some("v0")));
        let r = b.call("cmd=get kvsname=other key=k");
        assert_eq!(r.rc(), Ok(-1));
        let r = b.call(&format!("cmd=get kvsname={kvs} key=PMI_process_mapping"));
        assert_eq!(r.get("value"), Some("(vector,(0,1,2))"));
        let long = "x".repeat(1024);
        let r = a.call(&format!("cmd=put kvsname={kvs} key=big value={long}"));
        assert_eq!(r.rc(), Ok(-1));
        assert_eq!(a.call("cmd=finalize").cmd(), "finalize_ack");
        assert_eq!(b.call("cmd=finalize").cmd(), "finalize_ack");
        drop((a, b));
        // Two clean finalizes: no abort.
        let events: Vec<Event> = std::iter::from_fn(|| {
            server
                .events()
                .recv_timeout(Duration::from_millis(200))
                .ok()
        })
        .collect();
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            events
                .iter()
                .all(|e| matches!(e, Event::Finalized { rank: None }))
        );
    }

    #[test]
    fn initack_gives_rank_and_size() {
        let server = Server::start(3, Limits::default()).unwrap();
        let mut a = Raw::new(&server);
        assert_eq!(a.call("cmd=initack pmiid=2").cmd(), "initack");
        let sets: Vec<Message> = (0..3).map(|_| a.recv()).collect();
        assert_eq!(sets[0].get("size"), Some("3"));
        assert_eq!(sets[1].get("rank"), Some("2"));
        assert_eq!(sets[2].get("debug"), Some("0"));
        // A second client with the same id is a broken launch: the job is aborted.
        let mut b = Raw::new(&server);
        b.send("cmd=initack pmiid=2");
        let e = server
            .events()
            .recv_timeout(Duration::from_secs(10))
            .unwrap();
        assert!(
            matches!(&e, Event::Aborted { why, .. } if why.contains("PMI_ID=2")),
            "{e:?}"
        );
    }

    #[test]
    fn a_lost_client_releases_the_barrier_with_an_error() {
        let server = Server::start(2, Limits::default()).unwrap();
        let mut a = Raw::new(&server);
        let mut b = Raw::new(&server);
        assert_eq!(a.call("cmd=initack pmiid=0").cmd(), "initack");
        (0..3).for_each(|_| drop(a.recv()));
        assert_eq!(b.call("cmd=initack pmiid=1").cmd(), "initack");
        (0..3).for_each(|_| drop(b.recv()));
        a.send("cmd=barrier_in");
        drop(b);
        let r = a.recv();
        assert_eq!((r.cmd(), r.rc()), ("barrier_out", Ok(-1)));
        let msg = r.get("msg").unwrap();
        assert!(
            msg.contains("rank_1") && msg.contains("without_finalize"),
            "{msg}"
        );
        match server.events().recv_timeout(Duration::from_secs(10)) {
            Ok(Event::Aborted { why, lost }) => {
                assert!(why.starts_with("rank 1 closed"), "{why}");
                assert_eq!(lost, Some(1));
            }
            other => panic!("{other:?}"),
        }
        // Later requests fail too.
        assert_eq!(a.call("cmd=get_maxes").rc(), Ok(-1));
    }

    #[test]
    fn garbage_and_unknown_commands_abort_the_job() {
        for (line, expect) in [
            ("hello", "not PMI-1"),
            ("cmd=spawn nprocs=2", "unsupported PMI command"),
        ] {
            let server = Server::start(1, Limits::default()).unwrap();
            let mut a = Raw::new(&server);
            a.send(line);
            match server.events().recv_timeout(Duration::from_secs(10)) {
                Ok(Event::Aborted { why, .. }) => assert!(why.contains(expect), "{why}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn an_exited_rank_that_never_joined_ends_the_barrier() {
        let server = Server::start(2, Limits::default()).unwrap();
        let mut a = Raw::new(&server);
        assert_eq!(a.call("cmd=initack pmiid=0").cmd(), "initack");
        (0..3).for_each(|_| drop(a.recv()));
        a.send("cmd=barrier_in");
        server.rank_exited(1);
        let r = a.recv();
        assert_eq!(r.rc(), Ok(-1));
        match server.events().recv_timeout(Duration::from_secs(10)) {
            Ok(Event::Aborted { why, .. }) => assert!(why.contains("rank(s) 1"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn abort_is_reported_with_its_reason() {
        let server = Server::start(2, Limits::default()).unwrap();
        let mut a = Raw::new(&server);
        assert_eq!(a.call("cmd=initack pmiid=1").cmd(), "initack");
        (0..3).for_each(|_| drop(a.recv()));
        a.send("cmd=abort exitcode=7 msg=out_of_memory");
        let why = "rank 1 called PMI abort (exit code 7): out of memory".to_string();
        let next = || server.events().recv_timeout(Duration::from_secs(10));
        assert_eq!(
            next(),
            Ok(Event::Aborted {
                why: why.clone(),
                lost: None
            })
        );
        assert_eq!(
            next(),
            Ok(Event::AbortCalled {
                rank: Some(1),
                why: why.clone()
            })
        );
        // A second abort is reported too, though the job is aborted already.
        a.send("cmd=abort exitcode=2");
        assert!(
            matches!(next(), Ok(Event::AbortCalled { rank: Some(1), why })
            if why == "rank 1 called PMI abort (exit code 2)")
        );
        drop(a);
        assert!(server.wait_closed(Duration::from_secs(10)));
    }
}
