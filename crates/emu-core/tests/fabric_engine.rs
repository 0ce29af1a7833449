//! Fabric and engine behaviour: determinism, link timing, FIFO order, fault sites, priority,
//! the threaded engine's inline/worker policy, and routes.

use emu_core::dma::DmaPort;
use emu_core::engine::deterministic::Deterministic;
use emu_core::engine::threaded::{FabricTiming, Threaded, ThreadedConfig};
use emu_core::engine::{DeviceId, DeviceIo, DeviceModel, Engine, EngineError};
use emu_core::fabric::topology::LinkKind;
use emu_core::fabric::{
    Fabric, FabricConfig, FaultConfig, LinkId, LinkParams, Node, Packet, PortId, Topology,
    TrafficClass,
};
use emu_core::memory::HostMemory;
use emu_core::mmio::MmioError;
use emu_core::rng::SimRng;
use emu_core::time::{SimDuration, SimTime};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn dma() -> DmaPort {
    DmaPort::passthrough(HostMemory::new(2 * 4096).unwrap())
}

fn fabric(topology: Topology, link: LinkParams, faults: FaultConfig) -> Fabric {
    Fabric::new(FabricConfig {
        topology,
        link,
        faults,
    })
    .unwrap()
}

/// 1 byte per nanosecond, 50 ns per link, 16 bytes of header, 30 ns per switch.
fn slow_link() -> LinkParams {
    LinkParams {
        latency: SimDuration::from_ns(50),
        bandwidth: 1_000_000_000,
        header_overhead: 16,
        switch_latency: SimDuration::from_ns(30),
    }
}

type Log = Arc<Mutex<Vec<(SimTime, Packet)>>>;

/// A store of `v` to BAR 0 offset 0 sends a packet: dst = v[0..16], tc = v[16..24],
/// len = v[24..40] (at least 4), seq = v[40..64] in the first 4 payload bytes. Every packet
/// received is logged with its arrival time.
struct Recorder {
    log: Log,
}

fn cmd(dst: u32, tc: u8, len: usize, seq: u32) -> u64 {
    u64::from(dst) | u64::from(tc) << 16 | (len as u64) << 24 | u64::from(seq) << 40
}

fn seq_of(p: &Packet) -> u32 {
    u32::from_le_bytes([p.data[0], p.data[1], p.data[2], p.data[3]])
}

impl DeviceModel for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn config_read(&mut self, reg: u16) -> u32 {
        u32::from(reg) * 3
    }
    fn config_write(&mut self, _reg: u16, _value: u32) {}
    fn mmio_read(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        data.fill(offset as u8);
        Ok(())
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        _bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        if offset != 0 || data.len() != 8 {
            return Err(MmioError::BadWidth {
                offset,
                width: data.len(),
            });
        }
        let v = u64::from_le_bytes(data.try_into().unwrap());
        let len = ((v >> 24) & 0xffff).max(4) as usize;
        let mut payload = vec![0u8; len];
        payload[..4].copy_from_slice(&((v >> 40) as u32).to_le_bytes());
        io.send(Packet::new(
            PortId::default(),
            PortId((v & 0xffff) as u32),
            TrafficClass((v >> 16) as u8),
            payload,
        ));
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        self.log.lock().unwrap().push((io.now(), pkt));
    }
    fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {}
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 4096 } else { 0 }
    }
}

fn recorders(e: &dyn Engine, ports: u32) -> Vec<Log> {
    (0..ports)
        .map(|p| {
            let log = Log::default();
            let id = e
                .add_device(
                    Box::new(Recorder { log: log.clone() }),
                    dma(),
                    Some(PortId(p)),
                )
                .unwrap();
            assert_eq!(id, DeviceId(p));
            log
        })
        .collect()
}

fn send(e: &dyn Engine, src: u32, dst: u32, tc: u8, len: usize, seq: u32) {
    e.mmio_write(DeviceId(src), 0, 0, &cmd(dst, tc, len, seq).to_le_bytes())
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// (a) determinism

/// (receiver, source, sequence number, arrival time in ps)
type Chat = (u32, u32, u32, u64);
type ChatLog = Arc<Mutex<Vec<Chat>>>;

/// On a doorbell, starts a timer chain: each timer sends a request to a random port and
/// re-arms with a random delay; each request received is answered.
struct Chatter {
    me: u32,
    ports: u32,
    left: u32,
    seq: u32,
    log: ChatLog,
}

impl DeviceModel for Chatter {
    fn name(&self) -> &str {
        "chatter"
    }
    fn config_read(&mut self, _reg: u16) -> u32 {
        0
    }
    fn config_write(&mut self, _reg: u16, _value: u32) {}
    fn mmio_read(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        data.fill(0);
        Ok(())
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        _data: &[u8],
    ) -> Result<(), MmioError> {
        io.timer(SimDuration::ZERO, 0);
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        let seq = seq_of(&pkt);
        self.log
            .lock()
            .unwrap()
            .push((self.me, pkt.src.0, seq, io.now().as_ps()));
        if pkt.data[4] == 0 {
            let mut reply = pkt.data.clone();
            reply[4] = 1;
            io.send(Packet::new(PortId(self.me), pkt.src, pkt.tc, reply));
        }
    }
    fn timer(&mut self, io: &mut DeviceIo<'_>, _token: u64) {
        if self.left == 0 {
            return;
        }
        self.left -= 1;
        let dst = io.rng().below(u64::from(self.ports)) as u32;
        let len = 8 + io.rng().below(512) as usize;
        let mut data = vec![0u8; len];
        data[..4].copy_from_slice(&self.seq.to_le_bytes());
        self.seq += 1;
        let tc = TrafficClass(io.rng().below(3) as u8);
        io.send(Packet::new(PortId(self.me), PortId(dst), tc, data));
        let delay = SimDuration::from_ns(1 + io.rng().below(300));
        io.timer(delay, 0);
    }
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 4096 } else { 0 }
    }
}

fn chatter_run(seed: u64) -> (u64, Vec<Chat>, u64) {
    let faults = FaultConfig {
        drop: 0.05,
        reorder: 0.3,
        reorder_max_delay: SimDuration::from_us(2),
        duplicate: 0.05,
        ..FaultConfig::none()
    };
    let topo = Topology::Dragonfly {
        groups: 3,
        switches_per_group: 2,
        ports_per_switch: 2,
    };
    let e = Deterministic::new(seed, fabric(topo, LinkParams::default(), faults));
    let log = ChatLog::default();
    for p in 0..12 {
        e.add_device(
            Box::new(Chatter {
                me: p,
                ports: 12,
                left: 40,
                seq: 0,
                log: log.clone(),
            }),
            dma(),
            Some(PortId(p)),
        )
        .unwrap();
    }
    for p in 0..12 {
        e.mmio_write(DeviceId(p), 0, 0, &[1, 0, 0, 0]).unwrap();
    }
    let n = e.run_until_idle();
    assert!(n > 12 * 40, "timers and packets ran: {n}");
    assert_eq!(e.pending(), 0);
    let l = log.lock().unwrap().clone();
    (
        e.trace_digest(),
        l,
        e.with_fabric(|f| f.counters().reordered),
    )
}

#[test]
fn same_seed_same_run_other_seed_other_order() {
    let (d1, l1, r1) = chatter_run(42);
    let (d2, l2, r2) = chatter_run(42);
    assert_eq!(d1, d2, "digest replays");
    assert_eq!(l1, l2, "event order replays");
    assert_eq!(r1, r2);
    assert!(r1 > 0, "reorder fault fired");
    let (d3, l3, _) = chatter_run(43);
    assert_ne!(d1, d3);
    let order = |l: &[Chat]| l.iter().map(|x| (x.0, x.1, x.2)).collect::<Vec<_>>();
    assert_ne!(
        order(&l1),
        order(&l3),
        "another seed gives another event order"
    );
}

// ---------------------------------------------------------------------------------------
// (b) timing

#[test]
fn one_link_arrival_is_latency_plus_serialisation() {
    let lp = slow_link();
    let e = Deterministic::new(1, fabric(Topology::PointToPoint, lp, FaultConfig::none()));
    let logs = recorders(&e, 2);
    e.run_until(SimTime::from_ns(1000));
    send(&e, 0, 1, 0, 1000, 0);
    e.run_until_idle();
    let got = logs[1].lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    // 1000 ns + 50 ns latency + (1000 + 16) bytes at 1 B/ns
    assert_eq!(got[0].0, SimTime::from_ns(1000 + 50 + 1016));
    assert!(got[0].1.crc_ok());
    assert_eq!(got[0].1.src, PortId(0));

    // Back to back: the second packet waits for the first to leave the wire.
    let t0 = e.now();
    send(&e, 0, 1, 0, 100, 1);
    send(&e, 0, 1, 0, 100, 2);
    e.run_until_idle();
    let got = logs[1].lock().unwrap().clone();
    assert_eq!(got[1].0, t0 + SimDuration::from_ns(50 + 116));
    assert_eq!(got[2].0, t0 + SimDuration::from_ns(50 + 116 + 116));
}

#[test]
fn step_event_names_the_device_and_next_event_time_peeks() {
    let e = Deterministic::new(
        1,
        fabric(Topology::PointToPoint, slow_link(), FaultConfig::none()),
    );
    let _logs = recorders(&e, 2);
    assert_eq!(e.next_event_time(), None);
    assert_eq!(Engine::next_event_time(&e), None);
    assert_eq!(e.step_event(), None);
    send(&e, 0, 1, 0, 100, 0);
    send(&e, 1, 0, 0, 100, 1);
    let t = SimTime::from_ns(50 + 116);
    assert_eq!(e.next_event_time(), Some(t));
    assert_eq!(e.now(), SimTime::ZERO);
    // Scheduled in order: the packet to port 1 first, then the one to port 0.
    assert_eq!(e.step_event(), Some(DeviceId(1)));
    assert_eq!(e.now(), t);
    assert_eq!(e.step_event(), Some(DeviceId(0)));
    assert_eq!(e.step_event(), None);
}

#[test]
fn multi_hop_is_store_and_forward() {
    let lp = slow_link();
    let cases = [
        (Topology::SingleSwitch { ports: 4 }, 0, 3, 2usize),
        (
            Topology::Dragonfly {
                groups: 3,
                switches_per_group: 2,
                ports_per_switch: 1,
            },
            0,
            5,
            5,
        ),
        (
            Topology::Torus3D {
                dims: [4, 4, 1],
                nics_per_router: 2,
            },
            0,
            2 * (2 + 4 * 2),
            2 + 2 + 2,
        ),
    ];
    for (topo, src, dst, hops) in cases {
        let mut f = fabric(topo.clone(), lp, FaultConfig::none());
        assert_eq!(
            f.graph().route(PortId(src), PortId(dst)).unwrap().len(),
            hops,
            "{topo:?}"
        );
        let mut rng = SimRng::new(1);
        let t = SimTime::from_ns(7);
        let d: Vec<_> = f
            .inject(
                t,
                Packet::new(PortId(src), PortId(dst), TrafficClass(0), vec![1; 200]),
                &mut rng,
            )
            .into_iter()
            .collect();
        let h = hops as u64;
        // per hop: 50 ns + 216 ns on the wire; per intermediate switch: 30 ns
        let expect = SimTime::from_ns(7 + h * (50 + 216) + (h - 1) * 30);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, expect, "{topo:?}");
        assert_eq!(lp.unloaded_arrival(t, 200, hops), expect);
    }
}

// ---------------------------------------------------------------------------------------
// (c) FIFO per (src, dst, tc) without faults

fn topo_for(sel: u8) -> Topology {
    match sel % 3 {
        0 => Topology::SingleSwitch { ports: 4 },
        1 => Topology::Dragonfly {
            groups: 3,
            switches_per_group: 2,
            ports_per_switch: 2,
        },
        _ => Topology::Torus3D {
            dims: [3, 2, 2],
            nics_per_router: 2,
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn flows_are_fifo_without_faults(
        sel in 0u8..3,
        seed in any::<u64>(),
        ops in prop::collection::vec((0u32..64, 0u32..64, 0u8..4, 0usize..3000, 0u64..400), 1..150),
    ) {
        let topo = topo_for(sel);
        let e = Deterministic::new(seed, fabric(topo, LinkParams::default(), FaultConfig::none()));
        let ports = e.with_fabric(|f| f.ports());
        let logs = recorders(&e, ports);
        let mut sent: HashMap<(u32, u32, u8), Vec<u32>> = HashMap::new();
        for (i, (s, d, tc, len, gap)) in ops.iter().enumerate() {
            let (s, d) = (s % ports, d % ports);
            send(&e, s, d, *tc, *len, i as u32);
            sent.entry((s, d, *tc)).or_default().push(i as u32);
            e.run_for(SimDuration::from_ns(*gap));
        }
        e.run_until_idle();
        let mut got: HashMap<(u32, u32, u8), Vec<u32>> = HashMap::new();
        let mut last: HashMap<(u32, u32, u8), SimTime> = HashMap::new();
        for (d, log) in logs.iter().enumerate() {
            for (t, p) in log.lock().unwrap().iter() {
                prop_assert!(p.crc_ok());
                let k = (p.src.0, d as u32, p.tc.0);
                got.entry(k).or_default().push(seq_of(p));
                let l = last.entry(k).or_insert(SimTime::ZERO);
                prop_assert!(*t >= *l);
                *l = *t;
            }
        }
        prop_assert_eq!(got, sent);
        let c = e.with_fabric(|f| f.counters());
        prop_assert_eq!(c.injected, ops.len() as u64);
        prop_assert_eq!(c.delivered, ops.len() as u64);
    }
}

// ---------------------------------------------------------------------------------------
// (d) corruption is detected by the CRC

#[test]
fn every_corrupted_packet_fails_its_crc() {
    let faults = FaultConfig {
        corrupt: 0.3,
        ..FaultConfig::none()
    };
    let e = Deterministic::new(
        9,
        fabric(
            Topology::SingleSwitch { ports: 4 },
            LinkParams::default(),
            faults,
        ),
    );
    let logs = recorders(&e, 4);
    for i in 0..400u32 {
        // include empty-ish payloads (4 bytes) and larger ones
        send(&e, i % 4, (i + 1) % 4, 0, (i as usize * 7) % 300, i);
    }
    e.run_until_idle();
    let bad = logs
        .iter()
        .flat_map(|l| l.lock().unwrap().clone())
        .filter(|(_, p)| !p.crc_ok())
        .count() as u64;
    let c = e.fabric_counters();
    assert!(c.corrupted > 0);
    assert_eq!(bad, c.corrupted);
    assert_eq!(c.delivered, 400);
}

// ---------------------------------------------------------------------------------------
// (e) drop, duplicate, link down/up

fn received(logs: &[Log]) -> u64 {
    logs.iter().map(|l| l.lock().unwrap().len() as u64).sum()
}

#[test]
fn drops_and_duplicates_are_counted() {
    let faults = FaultConfig {
        drop: 0.2,
        duplicate: 0.25,
        ..FaultConfig::none()
    };
    let e = Deterministic::new(
        3,
        fabric(
            Topology::SingleSwitch { ports: 3 },
            LinkParams::default(),
            faults,
        ),
    );
    let logs = recorders(&e, 3);
    for i in 0..600u32 {
        send(&e, i % 3, (i + 2) % 3, (i % 2) as u8, 32, i);
    }
    e.run_until_idle();
    let c = e.fabric_counters();
    assert_eq!(c.injected, 600);
    assert!(c.dropped_fault > 60 && c.dropped_fault < 180, "{c:?}");
    assert!(c.duplicated > 60, "{c:?}");
    assert_eq!(c.dropped, c.dropped_fault);
    assert_eq!(c.delivered, c.injected - c.dropped + c.duplicated);
    assert_eq!(received(&logs), c.delivered);
    let tc0 = e.with_fabric(|f| f.tc_counters(TrafficClass(0)));
    let tc1 = e.with_fabric(|f| f.tc_counters(TrafficClass(1)));
    assert_eq!(tc0.injected + tc1.injected, 600);
    assert_eq!(tc0.dropped + tc1.dropped, c.dropped);
    assert_eq!(tc0.delivered + tc1.delivered, c.delivered);
}

#[test]
fn link_down_drops_and_link_up_restores() {
    let e = Deterministic::new(
        3,
        fabric(
            Topology::SingleSwitch { ports: 3 },
            LinkParams::default(),
            FaultConfig::none(),
        ),
    );
    let logs = recorders(&e, 3);
    let l1 = e.with_fabric(|f| f.graph().port_link(PortId(1))).unwrap();
    Engine::set_link_up(&e, l1, false).unwrap();
    send(&e, 0, 1, 0, 10, 0);
    send(&e, 1, 2, 0, 10, 1);
    send(&e, 0, 2, 0, 10, 2);
    e.run_until_idle();
    assert_eq!(logs[1].lock().unwrap().len(), 0);
    assert_eq!(logs[2].lock().unwrap().len(), 1, "other links still work");
    let c = e.fabric_counters();
    assert_eq!((c.dropped_link_down, c.dropped), (2, 2));
    assert_eq!(
        e.with_fabric(|f| f.link_counters(l1)).unwrap().dropped_down,
        2
    );
    Engine::set_link_up(&e, l1, true).unwrap();
    send(&e, 0, 1, 0, 10, 3);
    e.run_until_idle();
    assert_eq!(logs[1].lock().unwrap().len(), 1);
    assert_eq!(
        Engine::set_link_up(&e, LinkId(99), true),
        Err(EngineError::Fabric(
            emu_core::fabric::FabricError::NoSuchLink(99)
        ))
    );
}

// ---------------------------------------------------------------------------------------
// (f) priority

#[test]
fn high_priority_overtakes_queued_bulk() {
    let lp = slow_link();
    let run = |urgent_tc: u8| {
        let e = Deterministic::new(1, fabric(Topology::PointToPoint, lp, FaultConfig::none()));
        let logs = recorders(&e, 2);
        for i in 0..10 {
            send(&e, 0, 1, 2, 1000, i); // bulk data
        }
        send(&e, 0, 1, urgent_tc, 100, 99);
        send(&e, 0, 1, 2, 1000, 10);
        e.run_until_idle();
        let l = logs[1].lock().unwrap().clone();
        l.iter().map(|(t, p)| (seq_of(p), *t)).collect::<Vec<_>>()
    };
    // tc 0 (priority 0) overtakes all ten queued bulk packets (priority 2)
    let got = run(0);
    assert_eq!(got[0], (99, SimTime::from_ns(50 + 116)));
    assert_eq!(got.len(), 12);
    // the bulk packet sent after it waits for the bulk queue and for it
    assert_eq!(
        got[11],
        (10, SimTime::from_ns(50 + 11 * 1016 + 116)),
        "{got:?}"
    );
    // same class: no overtaking, plain FIFO
    let got = run(2);
    assert_eq!(got[10].0, 99);
    assert_eq!(got[10].1, SimTime::from_ns(50 + 10 * 1016 + 116));
}

// ---------------------------------------------------------------------------------------
// (g) threaded engine

/// Ping-pong endpoint. BAR 0 offset 0: doorbell, value = number of round trips to run;
/// offset 8: arm a timer of `value` microseconds. On reaching the target, raises vector 3.
struct Pong {
    peer: PortId,
    initiator: bool,
    target: u64,
    rounds: Arc<AtomicU64>,
    timer_threads: Arc<Mutex<Vec<String>>>,
}

impl DeviceModel for Pong {
    fn name(&self) -> &str {
        "pong"
    }
    fn config_read(&mut self, _reg: u16) -> u32 {
        0x1234_5678
    }
    fn config_write(&mut self, _reg: u16, _value: u32) {}
    fn mmio_read(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        data.copy_from_slice(&self.rounds.load(Ordering::Acquire).to_le_bytes()[..data.len()]);
        Ok(())
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        _bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        let mut b = [0u8; 8];
        b[..data.len()].copy_from_slice(data);
        let v = u64::from_le_bytes(b);
        match offset {
            0 => {
                self.target = v;
                io.send(Packet::new(
                    PortId(0),
                    self.peer,
                    TrafficClass(1),
                    vec![0; 8],
                ));
            }
            8 => io.timer(SimDuration::from_us(v), v),
            _ => {}
        }
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, mut pkt: Packet) {
        if !self.initiator {
            pkt.dst = self.peer;
            io.send(pkt);
            return;
        }
        let n = self.rounds.fetch_add(1, Ordering::AcqRel) + 1;
        if n < self.target {
            pkt.dst = self.peer;
            io.send(pkt);
        } else {
            io.interrupt(3);
        }
    }
    fn timer(&mut self, io: &mut DeviceIo<'_>, _token: u64) {
        let name = std::thread::current().name().unwrap_or("").to_string();
        self.timer_threads.lock().unwrap().push(name);
        io.interrupt(7);
    }
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 64 } else { 0 }
    }
}

struct PongRig {
    rounds: Arc<AtomicU64>,
    timer_threads: Arc<Mutex<Vec<String>>>,
    irqs: Arc<Mutex<Vec<u16>>>,
    a: DeviceId,
}

fn pong_rig(e: &dyn Engine) -> PongRig {
    let rounds = Arc::new(AtomicU64::new(0));
    let timer_threads = Arc::new(Mutex::new(Vec::new()));
    let mk = |initiator, peer| {
        Box::new(Pong {
            peer: PortId(peer),
            initiator,
            target: 0,
            rounds: rounds.clone(),
            timer_threads: timer_threads.clone(),
        })
    };
    let a = e.add_device(mk(true, 1), dma(), Some(PortId(0))).unwrap();
    e.add_device(mk(false, 0), dma(), Some(PortId(1))).unwrap();
    let irqs = Arc::new(Mutex::new(Vec::new()));
    let sink = irqs.clone();
    e.set_interrupt_sink(a, Arc::new(move |v| sink.lock().unwrap().push(v)))
        .unwrap();
    PongRig {
        rounds,
        timer_threads,
        irqs,
        a,
    }
}

fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    cond()
}

#[test]
fn threaded_ping_pong_is_inline() {
    let e = Threaded::new(
        fabric(
            Topology::SingleSwitch { ports: 2 },
            LinkParams::default(),
            FaultConfig::none(),
        ),
        ThreadedConfig::default(),
    )
    .unwrap();
    let rig = pong_rig(&e);
    let bar = Engine::mmio(&e, rig.a, 0).unwrap();
    assert_eq!(bar.size(), 64);
    bar.write_u64(0, 1).unwrap();
    // Delivered inline: done by the time the doorbell store returns.
    assert_eq!(rig.rounds.load(Ordering::Acquire), 1);
    assert_eq!(*rig.irqs.lock().unwrap(), vec![3]);
    assert_eq!(bar.read_u64(0).unwrap(), 1);
    let c = e.counters();
    assert_eq!((c.packets, c.inline_calls, c.deferred), (2, 2, 0));
    assert_eq!(Engine::config_read(&e, rig.a, 0).unwrap(), 0x1234_5678);
    // Bad accesses are errors, not panics.
    assert_eq!(
        bar.write(60, &[0; 8]),
        Err(MmioError::OutOfRange {
            offset: 60,
            width: 8,
            size: 64
        })
    );
    assert_eq!(
        bar.write(0, &[0; 3]),
        Err(MmioError::BadWidth {
            offset: 0,
            width: 3
        })
    );
    assert_eq!(
        e.mmio_write(DeviceId(9), 0, 0, &[0; 4]),
        Err(EngineError::NoSuchDevice(DeviceId(9)))
    );
    e.shutdown();
    assert_eq!(bar.write_u64(0, 1), Err(MmioError::DeviceGone));
}

#[test]
fn threaded_long_exchange_moves_to_engine_threads() {
    let e = Threaded::new(
        fabric(
            Topology::SingleSwitch { ports: 2 },
            LinkParams::default(),
            FaultConfig::none(),
        ),
        ThreadedConfig {
            workers: 2,
            inline_budget: 16,
            ..ThreadedConfig::default()
        },
    )
    .unwrap();
    let rig = pong_rig(&e);
    e.mmio_write(rig.a, 0, 0, &5000u64.to_le_bytes()).unwrap();
    assert!(wait_for(|| rig.rounds.load(Ordering::Acquire) == 5000));
    assert!(e.wait_idle(Duration::from_secs(10)));
    assert_eq!(*rig.irqs.lock().unwrap(), vec![3]);
    let c = e.counters();
    assert_eq!(c.packets, 10_000);
    assert_eq!(c.inline_calls, 16);
    assert!(c.deferred >= 1);
    drop(e); // joins the engine threads
}

#[test]
fn threaded_timers_fire_on_engine_threads() {
    let e = Threaded::new(
        fabric(
            Topology::SingleSwitch { ports: 2 },
            LinkParams::default(),
            FaultConfig::none(),
        ),
        ThreadedConfig::default(),
    )
    .unwrap();
    let rig = pong_rig(&e);
    let t0 = Instant::now();
    e.mmio_write(rig.a, 0, 8, &300u64.to_le_bytes()).unwrap();
    e.mmio_write(rig.a, 0, 8, &100u64.to_le_bytes()).unwrap();
    assert!(wait_for(|| rig.timer_threads.lock().unwrap().len() == 2));
    assert!(t0.elapsed() >= Duration::from_micros(300));
    for name in rig.timer_threads.lock().unwrap().iter() {
        assert!(name.starts_with("nicemu-engine-"), "timer ran on {name:?}");
    }
    assert_eq!(*rig.irqs.lock().unwrap(), vec![7, 7]);
    assert_eq!(e.counters().timers, 2);
    // A timer far in the future is dropped cleanly by shutdown.
    e.mmio_write(rig.a, 0, 8, &10_000_000u64.to_le_bytes())
        .unwrap();
    assert_eq!(e.pending(), 1);
    e.shutdown();
    assert!(e.is_shut_down());
    assert_eq!(e.pending(), 0);
    e.shutdown(); // idempotent
}

#[test]
fn threaded_modeled_timing_delays_delivery() {
    let lp = LinkParams {
        latency: SimDuration::from_us(5000),
        ..LinkParams::default()
    };
    let e = Threaded::new(
        fabric(Topology::SingleSwitch { ports: 2 }, lp, FaultConfig::none()),
        ThreadedConfig {
            timing: FabricTiming::Modeled,
            ..ThreadedConfig::default()
        },
    )
    .unwrap();
    let rig = pong_rig(&e);
    let t0 = Instant::now();
    e.mmio_write(rig.a, 0, 0, &1u64.to_le_bytes()).unwrap();
    assert_eq!(
        rig.rounds.load(Ordering::Acquire),
        0,
        "not delivered inline"
    );
    assert!(wait_for(|| rig.rounds.load(Ordering::Acquire) == 1));
    // two trips of two links of 5 ms each
    assert!(t0.elapsed() >= Duration::from_millis(20));
}

#[test]
fn threaded_progress_runs_work_without_engine_threads() {
    let e = Threaded::new(
        fabric(
            Topology::SingleSwitch { ports: 2 },
            LinkParams::default(),
            FaultConfig::none(),
        ),
        ThreadedConfig {
            workers: 0,
            inline_budget: 0,
            ..ThreadedConfig::default()
        },
    )
    .unwrap();
    let rig = pong_rig(&e);
    e.mmio_write(rig.a, 0, 0, &3u64.to_le_bytes()).unwrap();
    assert_eq!(rig.rounds.load(Ordering::Acquire), 0);
    let p = Engine::progress_handle(&e);
    let mut steps = 0;
    while rig.rounds.load(Ordering::Acquire) < 3 && steps < 1000 {
        p.progress();
        steps += 1;
    }
    assert_eq!(rig.rounds.load(Ordering::Acquire), 3);
    assert!(!p.progress(), "nothing left to do");
}

/// The same scenario written once against `dyn Engine` runs on both engines.
fn doorbell_round_trip(e: &dyn Engine) {
    let rig = pong_rig(e);
    let bar = e.mmio(rig.a, 0).unwrap();
    bar.write_u64(0, 2).unwrap();
    let p = e.progress_handle();
    let mut steps = 0;
    while rig.irqs.lock().unwrap().is_empty() && steps < 10_000 {
        p.progress();
        steps += 1;
    }
    assert_eq!(*rig.irqs.lock().unwrap(), vec![3]);
    assert_eq!(bar.read_u64(0).unwrap(), 2);
    assert_eq!(e.counters().packets, 4);
    assert_eq!(e.counters().interrupts, 1);
    assert_eq!(
        e.add_device(
            Box::new(Recorder {
                log: Log::default()
            }),
            dma(),
            Some(PortId(1))
        ),
        Err(EngineError::PortInUse(1))
    );
    assert_eq!(
        e.add_device(
            Box::new(Recorder {
                log: Log::default()
            }),
            dma(),
            Some(PortId(5))
        ),
        Err(EngineError::NoSuchPort { port: 5, ports: 2 })
    );
}

#[test]
fn one_scenario_two_engines() {
    let f = || {
        fabric(
            Topology::SingleSwitch { ports: 2 },
            LinkParams::default(),
            FaultConfig::none(),
        )
    };
    let d = Deterministic::new(5, f());
    doorbell_round_trip(&d);
    // virtual time advanced by two round trips of two hops each
    let one_way = LinkParams::default().unloaded_arrival(SimTime::ZERO, 8, 2);
    assert_eq!(Engine::now(&d), SimTime(4 * one_way.0));
    let t = Threaded::new(f(), ThreadedConfig::default()).unwrap();
    doorbell_round_trip(&t);
}

// ---------------------------------------------------------------------------------------
// (h) routes

#[test]
fn torus_routes_are_dimension_order_minimal() {
    let dims = [4u32, 3, 5];
    let g = Topology::Torus3D {
        dims,
        nics_per_router: 2,
    }
    .build()
    .unwrap();
    assert_eq!(g.ports(), 2 * 4 * 3 * 5);
    // x: 4 links per ring, y: 3, z: 5 -> 60 routers * 3 router links + 120 edge links
    assert_eq!(g.links().len(), 120 + 60 * 3);
    let ring = |a: u32, b: u32, n: u32| {
        let f = (b + n - a) % n;
        f.min(n - f)
    };
    for s in 0..g.ports() {
        for d in 0..g.ports() {
            let (cs, cd) = (
                g.torus_coords(PortId(s)).unwrap(),
                g.torus_coords(PortId(d)).unwrap(),
            );
            let r = g.route(PortId(s), PortId(d)).unwrap();
            let expect: u32 = (0..3).map(|i| ring(cs[i], cd[i], dims[i])).sum();
            assert_eq!(r.len() as u32, expect + 2, "{cs:?} -> {cd:?}");
            // dimension order: the torus hops are x hops, then y, then z
            let dims_seen: Vec<u8> = r[1..r.len() - 1]
                .iter()
                .map(|h| match g.links()[h.link.0 as usize].kind {
                    LinkKind::Torus(d) => d,
                    k => panic!("unexpected {k:?}"),
                })
                .collect();
            assert!(dims_seen.windows(2).all(|w| w[0] <= w[1]), "{dims_seen:?}");
        }
    }
    // the two NICs of one router talk through it: up, down
    assert_eq!(g.route(PortId(0), PortId(1)).unwrap().len(), 2);
    // wraparound: x 0 -> 3 is one hop the short way round
    assert_eq!(g.route(PortId(0), PortId(6)).unwrap().len(), 3);
}

#[test]
fn dragonfly_routes_are_minimal() {
    let (groups, spg, pps) = (5u32, 4u32, 2u32);
    let g = Topology::Dragonfly {
        groups,
        switches_per_group: spg,
        ports_per_switch: pps,
    }
    .build()
    .unwrap();
    let count = |k: LinkKind| g.links().iter().filter(|l| l.kind == k).count() as u32;
    assert_eq!(count(LinkKind::Edge), groups * spg * pps);
    assert_eq!(count(LinkKind::Local), groups * spg * (spg - 1) / 2);
    assert_eq!(count(LinkKind::Global), groups * (groups - 1) / 2);
    let mut by_len = [0u32; 6];
    for s in 0..g.ports() {
        for d in 0..g.ports() {
            let r = g.route(PortId(s), PortId(d)).unwrap();
            let (ss, sd) = (s / pps, d / pps);
            let kinds: Vec<LinkKind> = r
                .iter()
                .map(|h| g.links()[h.link.0 as usize].kind)
                .collect();
            let globals = kinds.iter().filter(|k| **k == LinkKind::Global).count();
            let locals = kinds.iter().filter(|k| **k == LinkKind::Local).count();
            if ss == sd {
                assert_eq!(r.len(), 2);
            } else if ss / spg == sd / spg {
                assert_eq!((r.len(), locals, globals), (3, 1, 0));
            } else {
                // local-global-local at most
                assert_eq!(globals, 1);
                assert!(locals <= 2 && (3..=5).contains(&r.len()), "{kinds:?}");
                let gi = kinds.iter().position(|k| *k == LinkKind::Global).unwrap();
                assert!(
                    kinds[..gi]
                        .iter()
                        .filter(|k| **k == LinkKind::Local)
                        .count()
                        <= 1
                );
            }
            by_len[r.len()] += 1;
            assert_eq!(
                g.hop_target(*r.last().unwrap()),
                Some(Node::Port(PortId(d)))
            );
        }
    }
    assert!(by_len[5] > 0 && by_len[4] > 0 && by_len[3] > 0);
}

/// An outlet that counts the engine's "settled" notifications.
#[derive(Default)]
struct SettleCounter(AtomicU64);

impl emu_core::fabric::remote::Outlet for SettleCounter {
    fn forward(&self, _delay: SimDuration, _pkt: Packet) {}
    fn settled(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A packet from another process that the engine defers is not handled until the deferred
/// work has run: the engine says it is not settled (the fabric between processes then holds
/// the peer's credit back) and notifies the outlet once it is.
#[test]
fn threaded_arrivals_settle_after_their_deferred_work() {
    let e = Threaded::new(
        fabric(
            Topology::SingleSwitch { ports: 2 },
            LinkParams::default(),
            FaultConfig::none(),
        ),
        ThreadedConfig {
            workers: 0,
            inline_budget: 0,
            ..ThreadedConfig::default()
        },
    )
    .unwrap();
    let log = Log::default();
    e.add_device(
        Box::new(Recorder { log: log.clone() }),
        dma(),
        Some(PortId(0)),
    )
    .unwrap();
    let outlet = Arc::new(SettleCounter::default());
    e.set_outlet(outlet.clone()).unwrap();
    let arrivals = e.arrivals();
    assert!(arrivals.settled(), "an idle engine is settled");
    let pkt = Packet::new(PortId(1), PortId(0), TrafficClass(0), vec![7; 16]);
    arrivals.arrive(arrivals.now(), pkt);
    assert!(log.lock().unwrap().is_empty(), "deferred, not run inline");
    assert!(
        !arrivals.settled(),
        "a deferred delivery is not handled yet"
    );
    assert_eq!(outlet.0.load(Ordering::SeqCst), 0);
    let p = Engine::progress_handle(&e);
    let mut steps = 0;
    while log.lock().unwrap().is_empty() && steps < 1000 {
        p.progress();
        steps += 1;
    }
    assert_eq!(log.lock().unwrap().len(), 1);
    assert!(arrivals.settled());
    assert_eq!(outlet.0.load(Ordering::SeqCst), 1, "notified once");
}
