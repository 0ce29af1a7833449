//! The fabric between processes at the packet level: shared-memory and TCP links between
//! `ProcessFabric`s (threads playing processes, and a real child process re-executing this
//! test binary), dead peers, and nothing left in /dev/shm.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use emu_core::fabric::remote::{
    Arrivals, LinkKind, Outlet, PeerState, ProcessFabric, RemoteConfig, RemoteError,
};
use emu_core::fabric::{Packet, PortId, TrafficClass};
use emu_core::time::{SimDuration, SimTime};

/// Arrivals that record every packet with the time it was due.
#[derive(Default)]
struct Inbox {
    start: Mutex<Option<Instant>>,
    got: Mutex<Vec<(SimTime, SimTime, Packet)>>,
    /// Plays an engine that still has deferred deliveries ([`Arrivals::settled`]).
    busy: AtomicBool,
}

impl Arrivals for Inbox {
    fn now(&self) -> SimTime {
        let mut s = self.start.lock().unwrap();
        let t = s.get_or_insert_with(Instant::now).elapsed();
        SimTime(SimDuration::from_std(t).0)
    }
    fn arrive(&self, at: SimTime, pkt: Packet) {
        let now = self.now();
        self.got.lock().unwrap().push((now, at, pkt));
    }
    fn settled(&self) -> bool {
        !self.busy.load(Ordering::SeqCst)
    }
}

impl Inbox {
    fn wait_for(&self, n: usize, limit: Duration) -> Vec<(SimTime, SimTime, Packet)> {
        let end = Instant::now() + limit;
        loop {
            let g = self.got.lock().unwrap();
            if g.len() >= n || Instant::now() > end {
                return g.clone();
            }
            drop(g);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn cfg(port: u32, ports: u32, timeout: Duration) -> RemoteConfig {
    RemoteConfig {
        timeout,
        ring_bytes: 64 << 10,
        tcp_bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        ..RemoteConfig::new(PortId(port), ports)
    }
}

fn pair(kind: LinkKind, timeout: Duration) -> [(ProcessFabric, Arc<Inbox>); 2] {
    let mk = |p| {
        let inbox = Arc::new(Inbox::default());
        (
            ProcessFabric::new(cfg(p, 2, timeout), inbox.clone()).unwrap(),
            inbox,
        )
    };
    let v = [mk(0), mk(1)];
    for (me, peer) in [(0usize, 1usize), (1, 0)] {
        let f = &v[me].0;
        match kind {
            LinkKind::Shm => f
                .connect_shm(PortId(peer as u32), &v[peer].0.shm_address())
                .unwrap(),
            LinkKind::Tcp => f
                .connect_tcp(PortId(peer as u32), v[peer].0.tcp_address())
                .unwrap(),
        }
        assert_eq!(f.link_kind(PortId(peer as u32)), Some(kind));
    }
    v[0].0.seal();
    v[1].0.seal();
    v
}

fn payload(i: u32) -> Vec<u8> {
    let len = (i as usize * 131) % 9000;
    (0..len).map(|k| (k as u32 ^ i) as u8).collect()
}

fn exchange(kind: LinkKind) {
    let [(a, _ia), (b, ib)] = pair(kind, Duration::from_secs(10));
    let n = 3000u32;
    for i in 0..n {
        let mut p = Packet::new(
            PortId(0),
            PortId(1),
            TrafficClass((i % 4) as u8),
            payload(i),
        );
        if i % 2 == 0 {
            p.crc = Packet::CRC_TRUSTED;
        }
        let delay = SimDuration::from_us(u64::from(i % 3) * 20);
        a.send(delay, &p).unwrap();
    }
    let got = ib.wait_for(n as usize, Duration::from_secs(60));
    assert_eq!(got.len(), n as usize, "{kind:?}: packets lost");
    let mut last = [SimTime::ZERO; 4];
    let mut next = [0u32; 4];
    for (taken, at, p) in &got {
        let tc = usize::from(p.tc.0);
        // Per traffic class, packets come in the order they were sent.
        let i = (0..n)
            .skip(next[tc] as usize)
            .find(|i| i % 4 == tc as u32)
            .unwrap();
        next[tc] = i + 1;
        assert_eq!(p.data, payload(i));
        assert!(p.crc_ok());
        assert_eq!(p.crc == Packet::CRC_TRUSTED, i % 2 == 0);
        assert_eq!((p.src, p.dst), (PortId(0), PortId(1)));
        // Due at most the largest delay after it was recorded (the clock of the receiving
        // end decides; the sender's only says how much later), and FIFO per flow.
        let max = SimDuration::from_us(40);
        assert!(at.since(*taken) <= max, "due {at:?}, taken {taken:?}");
        assert!(*at >= last[tc]);
        last[tc] = *at;
    }
    // A delay the sender's fabric computed holds the packet back on the receiving side.
    ib.got.lock().unwrap().clear();
    let p = Packet::new(PortId(0), PortId(1), TrafficClass(0), vec![1; 10]);
    a.send(SimDuration::from_us(200_000), &p).unwrap();
    let got = ib.wait_for(1, Duration::from_secs(30));
    let (taken, at, _) = &got[0];
    assert!(
        at.since(*taken) > SimDuration::from_us(150_000),
        "due {at:?}, taken {taken:?}"
    );
    let n = n + 1;
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!(ca.sent, u64::from(n));
    assert_eq!(cb.received, u64::from(n));
    assert_eq!(ca.bytes_sent, cb.bytes_received);
    assert_eq!((cb.wire_crc_errors, ca.network_timeouts), (0, 0));
    a.close();
    b.close();
    // A clean close is not a death.
    assert_eq!(b.counters().dead_peers, 0);
    assert_eq!(a.counters().dead_peers, 0);
}

#[test]
fn shm_links_carry_every_packet_in_order() {
    exchange(LinkKind::Shm);
}

/// A thread waiting for its device drains the inbound rings itself (`Outlet::poll`) while
/// the poller does too: every packet is handed over once, in the order it was sent.
#[test]
fn shm_frames_taken_by_a_waiting_thread_keep_their_order() {
    let [(a, _ia), (b, ib)] = pair(LinkKind::Shm, Duration::from_secs(10));
    let n = 3000u32;
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..n {
                let p = Packet::new(PortId(0), PortId(1), TrafficClass(0), payload(i));
                a.send(SimDuration::ZERO, &p).unwrap();
            }
        });
        let end = Instant::now() + Duration::from_secs(60);
        while ib.got.lock().unwrap().len() < n as usize && Instant::now() < end {
            if !b.poll() {
                std::thread::yield_now();
            }
        }
    });
    let got = ib.wait_for(n as usize, Duration::from_secs(1));
    assert_eq!(got.len(), n as usize, "packets lost");
    for (i, (_, _, p)) in got.iter().enumerate() {
        assert_eq!(
            p.data,
            payload(i as u32),
            "packet {i} out of order or damaged"
        );
    }
    // Nothing is left to take, and nothing was handed over twice.
    assert!(!b.poll());
    assert_eq!(b.counters().received, u64::from(n));
    a.close();
    b.close();
    // A closed fabric hands nothing over any more.
    assert!(!b.poll());
}

#[test]
fn tcp_links_carry_every_packet_in_order() {
    exchange(LinkKind::Tcp);
}

/// Whether `cond` holds within `limit` (polled).
fn within(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// A packet the peer took stays in flight for the sender until the peer's engine has
/// handled it: while the receiving engine still has deferred deliveries, the sender's
/// timers must keep waiting (its slowness is not a lost packet).
fn in_flight_until_handled(kind: LinkKind) {
    let [(a, _ia), (b, ib)] = pair(kind, Duration::from_secs(10));
    let send = |i: u32| {
        let p = Packet::new(PortId(0), PortId(1), TrafficClass(0), payload(i));
        a.send(SimDuration::ZERO, &p).unwrap();
    };
    // An idle engine: the packet stops being in flight once it was taken.
    send(1);
    assert_eq!(ib.wait_for(1, Duration::from_secs(30)).len(), 1);
    assert!(
        within(Duration::from_secs(30), || !a.in_flight()),
        "{kind:?}: still in flight after an idle peer took it"
    );
    // A busy engine: taken, but not yet handled.
    ib.busy.store(true, Ordering::SeqCst);
    send(2);
    assert_eq!(ib.wait_for(2, Duration::from_secs(30)).len(), 2);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        a.in_flight(),
        "{kind:?}: credited before the peer handled it"
    );
    // The engine finishes its deferred work and says so.
    ib.busy.store(false, Ordering::SeqCst);
    b.settled();
    assert!(
        within(Duration::from_secs(30), || !a.in_flight()),
        "{kind:?}: still in flight after the peer settled"
    );
    a.close();
    b.close();
}

#[test]
fn shm_packets_stay_in_flight_until_the_peer_handled_them() {
    in_flight_until_handled(LinkKind::Shm);
}

#[test]
fn tcp_packets_stay_in_flight_until_the_peer_handled_them() {
    in_flight_until_handled(LinkKind::Tcp);
}

#[test]
fn bad_addresses_and_ports_are_errors() {
    let inbox = Arc::new(Inbox::default());
    let f = ProcessFabric::new(cfg(0, 3, Duration::from_secs(1)), inbox.clone()).unwrap();
    assert!(matches!(
        f.connect_shm(PortId(1), "nonsense"),
        Err(RemoteError::Protocol(_))
    ));
    assert!(matches!(
        f.connect_shm(PortId(0), &f.shm_address()),
        Err(RemoteError::BadPort { .. })
    ));
    assert!(matches!(
        f.connect_shm(PortId(7), &f.shm_address()),
        Err(RemoteError::BadPort { .. })
    ));
    // Port 0's segment is not port 2's.
    assert!(matches!(
        f.connect_shm(PortId(2), &f.shm_address()),
        Err(RemoteError::Protocol(_))
    ));
    let p = Packet::new(PortId(0), PortId(1), TrafficClass(0), vec![1]);
    assert_eq!(f.send(SimDuration::ZERO, &p), Err(RemoteError::NoLink(1)));
    assert_eq!(f.counters().no_link, 1);
    assert!(ProcessFabric::new(cfg(3, 3, Duration::from_secs(1)), inbox.clone()).is_err());
    let too_big = RemoteConfig {
        ring_bytes: 5000,
        ..cfg(0, 3, Duration::from_secs(1))
    };
    assert!(ProcessFabric::new(too_big, inbox).is_err());
}

fn dead_peer(kind: LinkKind) {
    let timeout = Duration::from_millis(400);
    let [(a, _), (b, _)] = pair(kind, timeout);
    let p = Packet::new(PortId(0), PortId(1), TrafficClass(0), vec![9; 64]);
    a.send(SimDuration::ZERO, &p).unwrap();
    let t0 = Instant::now();
    b.abandon();
    // Noticed within a few pid checks (shm: the crashed state stands for the pid gone;
    // TCP: the connection cut), never for a silence alone.
    while a.check().is_ok() {
        assert!(
            t0.elapsed() < timeout * 10,
            "{kind:?}: dead peer not noticed in {:?}",
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(a.peer_state(PortId(1)), PeerState::Dead);
    let e = a.send(SimDuration::ZERO, &p).unwrap_err();
    assert!(matches!(e, RemoteError::PeerGone { port: 1, .. }), "{e}");
    assert!(e.to_string().contains("port 1 is unreachable"), "{e}");
    let c = a.counters();
    assert_eq!(c.dead_peers, 1);
    assert!(c.network_timeouts >= 1);
    a.close();
}

#[test]
fn a_crashed_shm_peer_is_declared_dead() {
    dead_peer(LinkKind::Shm);
}

#[test]
fn a_tcp_peer_whose_connection_drops_is_declared_dead() {
    dead_peer(LinkKind::Tcp);
}

/// Names in /dev/shm that look like ours.
fn shm_names() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("nicemu"))
                .collect()
        })
        .unwrap_or_default()
}

const CHILD: &str = "NICEMU_REMOTE_TEST_CHILD";

/// Started as a child process: host port 1, print the shm address, connect to port 0 at the
/// address read from stdin, echo every packet back, until stdin closes (or forever, if the
/// parent means to kill it).
#[test]
fn child_process_role() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    let inbox = Arc::new(Inbox::default());
    let f = ProcessFabric::new(cfg(1, 2, Duration::from_secs(5)), inbox.clone()).unwrap();
    println!("ADDR {}", f.shm_address());
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    f.connect_shm(PortId(0), line.trim()).unwrap();
    println!("CONNECTED");
    std::io::stdout().flush().unwrap();
    let mut echoed = 0;
    loop {
        let got: Vec<Packet> = inbox.got.lock().unwrap().drain(..).map(|g| g.2).collect();
        for mut p in got {
            std::mem::swap(&mut p.src, &mut p.dst);
            f.send(SimDuration::ZERO, &p).unwrap();
            echoed += 1;
        }
        if mode == "echo" && echoed == 100 {
            f.close();
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn spawn_child(mode: &str) -> (std::process::Child, String) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "child_process_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.as_mut().unwrap();
    let mut r = BufReader::new(out);
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the child ended early");
        // libtest may print the test's name on the same line first.
        if let Some((_, a)) = line.trim().split_once("ADDR ") {
            break a.to_string();
        }
    };
    (child, addr)
}

fn wait_connected(child: &mut std::process::Child) {
    let mut r = BufReader::new(child.stdout.as_mut().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the child ended early");
        if line.trim().ends_with("CONNECTED") {
            return;
        }
    }
}

#[test]
fn two_processes_exchange_packets_through_shared_memory() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let (mut child, addr) = spawn_child("echo");
    let inbox = Arc::new(Inbox::default());
    let f = ProcessFabric::new(cfg(0, 2, Duration::from_secs(5)), inbox.clone()).unwrap();
    f.connect_shm(PortId(1), &addr).unwrap();
    writeln!(child.stdin.as_mut().unwrap(), "{}", f.shm_address()).unwrap();
    wait_connected(&mut child);
    f.seal();
    for i in 0..100u32 {
        let p = Packet::new(PortId(0), PortId(1), TrafficClass(1), payload(i));
        f.send(SimDuration::ZERO, &p).unwrap();
    }
    let got = inbox.wait_for(100, Duration::from_secs(30));
    assert_eq!(got.len(), 100);
    for (i, (_, _, p)) in got.iter().enumerate() {
        assert_eq!(p.data, payload(i as u32));
        assert_eq!((p.src, p.dst), (PortId(1), PortId(0)));
        assert!(p.crc_ok());
    }
    assert!(child.wait().unwrap().success());
    // The child closed cleanly: a goodbye, not a death.
    let t0 = Instant::now();
    while f.peer_state(PortId(1)) != PeerState::Closed && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(f.peer_state(PortId(1)), PeerState::Closed);
    assert_eq!(f.counters().dead_peers, 0);
    f.close();
    assert_eq!(shm_names(), Vec::<String>::new());
}

#[test]
fn a_killed_process_is_noticed_and_leaves_nothing_in_dev_shm() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let before = shm_names();
    let (mut child, addr) = spawn_child("forever");
    let inbox = Arc::new(Inbox::default());
    // A long heartbeat timeout: the death must be seen through the pid, well before it.
    let timeout = Duration::from_secs(30);
    let f = ProcessFabric::new(cfg(0, 2, timeout), inbox.clone()).unwrap();
    f.connect_shm(PortId(1), &addr).unwrap();
    writeln!(child.stdin.as_mut().unwrap(), "{}", f.shm_address()).unwrap();
    wait_connected(&mut child);
    f.seal();
    let p = Packet::new(PortId(0), PortId(1), TrafficClass(0), vec![5; 100]);
    f.send(SimDuration::ZERO, &p).unwrap();
    assert_eq!(inbox.wait_for(1, Duration::from_secs(30)).len(), 1);
    child.kill().unwrap();
    let t0 = Instant::now();
    // Not reaped yet: a zombie counts as dead.
    while f.check().is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(10), "death not noticed");
        std::thread::sleep(Duration::from_millis(5));
    }
    let e = f.check().unwrap_err().to_string();
    assert!(e.contains("exited"), "{e}");
    assert!(f.send(SimDuration::ZERO, &p).is_err());
    assert!(f.counters().network_timeouts >= 1);
    child.wait().unwrap();
    f.close();
    assert_eq!(shm_names(), before);
}
