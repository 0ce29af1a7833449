use super::*;
use crate::fabric::PortId;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

fn pkt(s: u32, d: u32, tc: u8, len: usize) -> Packet {
    Packet::new(PortId(s), PortId(d), TrafficClass(tc), vec![7; len])
}

/// A train counts as the frames it stands for, on the fabric, its traffic class and
/// every link of its route, as those frames injected one by one would.
#[test]
fn a_train_counts_as_its_frames() {
    use crate::dma::{DmaPort, Segment};
    use crate::fabric::Train;
    use crate::memory::HostMemory;
    let cfg = || FabricConfig::new(Topology::SingleSwitch { ports: 2 });
    let (mut one, mut each) = (Fabric::new(cfg()).unwrap(), Fabric::new(cfg()).unwrap());
    let mut rng = SimRng::new(1);
    let mut p = pkt(0, 1, 3, 100);
    p.train = Some(std::sync::Arc::new(Train {
        frames: 4,
        bytes: 4 * 60,
        source: DmaPort::passthrough(HostMemory::new(1 << 16).unwrap()),
        segments: vec![Segment { addr: 0, len: 200 }],
    }));
    let d: Vec<_> = one
        .inject_immediate(SimTime::ZERO, p, &mut rng)
        .into_iter()
        .collect();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].1.frames(), 5);
    each.inject_immediate(SimTime::ZERO, pkt(0, 1, 3, 100), &mut rng);
    for _ in 0..4 {
        each.inject_immediate(SimTime::ZERO, pkt(0, 1, 3, 60), &mut rng);
    }
    assert_eq!(one.counters(), each.counters());
    assert_eq!(one.counters().injected, 5);
    assert_eq!(one.counters().bytes_injected, 340);
    assert_eq!(
        one.tc_counters(TrafficClass(3)),
        each.tc_counters(TrafficClass(3))
    );
    for l in 0..one.graph().links().len() as u32 {
        assert_eq!(one.link_counters(LinkId(l)), each.link_counters(LinkId(l)));
    }
}

#[test]
fn inject_seals_the_crc() {
    let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
    let mut p = pkt(0, 1, 0, 10);
    p.crc = 0;
    let d: Vec<_> = f
        .inject(SimTime::ZERO, p, &mut SimRng::new(1))
        .into_iter()
        .collect();
    assert_eq!(d.len(), 1);
    assert!(d[0].1.crc_ok());
}

#[test]
fn crc_elision_trusts_only_while_nothing_can_corrupt() {
    let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
    assert!(!f.crc_elision());
    f.set_crc_elision(true);
    let mut rng = SimRng::new(3);
    let d: Vec<_> = f
        .inject(SimTime::ZERO, pkt(0, 1, 0, 100), &mut rng)
        .into_iter()
        .collect();
    assert_eq!(d[0].1.crc, Packet::CRC_TRUSTED);
    assert!(d[0].1.crc_ok());
    // A device that rewrites a trusted packet and reseals it keeps it trusted.
    let mut p = d[0].1.clone();
    p.data.truncate(10);
    p.seal();
    assert_eq!(p.crc, Packet::CRC_TRUSTED);
    // With a corruption site on, packets carry real CRCs and every damaged one fails.
    f.set_faults(FaultConfig {
        corrupt: 0.5,
        ..FaultConfig::none()
    });
    let mut bad = 0;
    for i in 0..200 {
        for (_, p) in f.inject(SimTime::ZERO, pkt(0, 1, 0, i % 50), &mut rng) {
            assert_ne!(p.crc, Packet::CRC_TRUSTED);
            bad += u64::from(!p.crc_ok());
        }
    }
    assert!(bad > 0);
    assert_eq!(bad, f.counters().corrupted);
    // Off again: real CRCs even without faults.
    f.set_faults(FaultConfig::none());
    f.set_crc_elision(false);
    let p = pkt(0, 1, 0, 30);
    let want = p.crc;
    let d: Vec<_> = f.inject(SimTime::ZERO, p, &mut rng).into_iter().collect();
    assert_eq!(d[0].1.crc, want);
}

#[test]
fn immediate_injection_counts_like_timed_injection_without_timing() {
    let faults = FaultConfig {
        drop: 0.2,
        duplicate: 0.2,
        corrupt: 0.2,
        ..FaultConfig::none()
    };
    let cfg = FabricConfig {
        faults,
        ..FabricConfig::new(Topology::SingleSwitch { ports: 3 })
    };
    let mut timed = Fabric::new(cfg.clone()).unwrap();
    let mut now_ = Fabric::new(cfg).unwrap();
    let (mut r1, mut r2) = (SimRng::new(8), SimRng::new(8));
    let t0 = SimTime::from_us(5);
    for i in 0..300u32 {
        let p = pkt(i % 3, (i + 1) % 3, (i % 4) as u8, (i as usize * 13) % 700);
        let a: Vec<_> = timed.inject(t0, p.clone(), &mut r1).into_iter().collect();
        let b: Vec<_> = now_.inject_immediate(t0, p, &mut r2).into_iter().collect();
        assert_eq!(a.len(), b.len());
        for ((_, pa), (tb, pb)) in a.iter().zip(&b) {
            assert_eq!(pa, pb);
            assert_eq!(*tb, t0);
        }
    }
    // Same draws, same counters everywhere.
    assert_eq!(r1.next_u64(), r2.next_u64());
    assert_eq!(timed.counters(), now_.counters());
    for tc in 0..4 {
        assert_eq!(
            timed.tc_counters(TrafficClass(tc)),
            now_.tc_counters(TrafficClass(tc))
        );
    }
    for l in 0..timed.graph().links().len() as u32 {
        assert_eq!(
            timed.link_counters(LinkId(l)),
            now_.link_counters(LinkId(l))
        );
    }
    // No queueing state was built: a timed packet now sees idle links.
    now_.set_faults(FaultConfig::none());
    let d: Vec<_> = now_
        .inject(t0, pkt(0, 1, 0, 100), &mut r2)
        .into_iter()
        .collect();
    assert_eq!(d[0].0, now_.params().unloaded_arrival(t0, 100, 2));
}

#[test]
fn capture_sees_every_injected_packet_with_its_real_crc() {
    use crate::fabric::CaptureBuffer;
    let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
    f.set_crc_elision(true);
    let mut rng = SimRng::new(2);
    f.inject(SimTime::ZERO, pkt(0, 1, 0, 10), &mut rng);
    assert!(!f.capturing());
    let buf = CaptureBuffer::new();
    f.set_capture(Some(buf.clone()));
    assert!(f.capturing());
    f.inject(SimTime::from_us(1), pkt(0, 1, 2, 30), &mut rng);
    // Dropped (no such port) but still captured: it was injected.
    f.inject(SimTime::from_us(2), pkt(1, 9, 3, 5), &mut rng);
    let got = buf.take();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, SimTime::from_us(1));
    assert_eq!(got[0].1.tc, TrafficClass(2));
    assert_eq!(got[0].1.crc, crc32fast::hash(&[7u8; 30]));
    assert_eq!((got[1].1.src, got[1].1.dst), (PortId(1), PortId(9)));
    f.set_capture(None);
    f.inject(SimTime::from_us(3), pkt(0, 1, 0, 10), &mut rng);
    assert!(buf.is_empty());
    assert_eq!(f.counters().injected, 4);
}

#[test]
fn bad_port_is_dropped_and_counted() {
    let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
    let d = f.inject(SimTime::ZERO, pkt(0, 9, 3, 10), &mut SimRng::new(1));
    assert!(d.is_empty());
    let c = f.counters();
    assert_eq!((c.dropped, c.dropped_bad_port, c.delivered), (1, 1, 0));
    assert_eq!(f.tc_counters(TrafficClass(3)).dropped, 1);
}

#[test]
fn fault_sites_off_draw_nothing() {
    let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
    let mut rng = SimRng::new(5);
    for _ in 0..10 {
        f.inject(SimTime::ZERO, pkt(0, 1, 0, 10), &mut rng);
    }
    assert_eq!(rng.next_u64(), SimRng::new(5).next_u64());
}

#[test]
fn a_link_flap_takes_one_route_link_down_for_its_window_then_it_is_up_again() {
    let down = SimDuration::from_us(10);
    let cfg = FabricConfig {
        faults: FaultConfig {
            link_flap: 1.0,
            link_flap_down: down,
            ..FaultConfig::none()
        },
        ..FabricConfig::new(Topology::SingleSwitch { ports: 3 })
    };
    let mut f = Fabric::new(cfg).unwrap();
    let mut rng = SimRng::new(21);
    let t0 = SimTime::from_us(1);
    // The packet that flaps a link is lost with it.
    assert!(f.inject(t0, pkt(0, 1, 0, 10), &mut rng).is_empty());
    let c = f.counters();
    assert_eq!((c.link_flaps, c.dropped_link_down, c.dropped), (1, 1, 1));
    let flapped: Vec<u32> = (0..f.graph().links().len() as u32)
        .filter(|&l| f.link_flapped_until(LinkId(l)).is_some())
        .collect();
    assert_eq!(flapped.len(), 1, "exactly one link flapped");
    let l = LinkId(flapped[0]);
    assert_eq!(f.link_flapped_until(l), Some(t0 + down));
    assert!(f.link_is_up(l), "a flap is not an administrative down");
    // Within the window, traffic over that link is lost without any draw.
    f.set_faults(FaultConfig::none());
    let before = rng.clone().next_u64();
    let mut lost = 0;
    for (s, d) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
        lost += u64::from(
            f.inject(t0 + SimDuration::from_us(5), pkt(s, d, 0, 8), &mut rng)
                .is_empty(),
        );
    }
    assert_eq!(rng.next_u64(), before);
    // The flapped link is on the route of 4 of the 6 pairs of a 3-port switch.
    assert_eq!(lost, 4);
    assert_eq!(f.counters().dropped_link_down, 5);
    // After the window the link carries traffic again.
    for (s, d) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
        assert_eq!(f.inject(t0 + down, pkt(s, d, 0, 8), &mut rng).len(), 1);
    }
    assert_eq!(f.counters().link_flaps, 1);
}

#[test]
fn a_switch_port_down_loses_traffic_to_that_destination_for_its_window() {
    let down = SimDuration::from_us(50);
    let cfg = FabricConfig {
        faults: FaultConfig {
            port_down: 1.0,
            port_down_time: down,
            ..FaultConfig::none()
        },
        ..FabricConfig::new(Topology::SingleSwitch { ports: 3 })
    };
    let mut f = Fabric::new(cfg).unwrap();
    let mut rng = SimRng::new(3);
    let t0 = SimTime::from_us(1);
    // The packet whose destination port went down is lost with it.
    assert!(f.inject(t0, pkt(0, 1, 0, 10), &mut rng).is_empty());
    let c = f.counters();
    assert_eq!((c.port_downs, c.link_flaps, c.dropped_link_down), (1, 0, 1));
    f.set_faults(FaultConfig::none());
    let mid = t0 + SimDuration::from_us(20);
    // The port's link is down both ways: traffic to and from port 1 is lost; traffic
    // between the other ports flows.
    assert!(f.inject(mid, pkt(2, 1, 0, 8), &mut rng).is_empty());
    assert!(f.inject(mid, pkt(1, 2, 0, 8), &mut rng).is_empty());
    assert_eq!(f.inject(mid, pkt(0, 2, 0, 8), &mut rng).len(), 1);
    // After the window the port is up again.
    assert_eq!(f.inject(t0 + down, pkt(2, 1, 0, 8), &mut rng).len(), 1);
    assert_eq!(f.counters().dropped_link_down, 3);
}

#[test]
fn a_switch_port_down_shorter_than_the_link_window_only_delays_with_link_retry() {
    let cfg = FabricConfig {
        faults: FaultConfig {
            port_down: 1.0,
            port_down_time: SimDuration::from_us(10),
            ..FaultConfig::none()
        },
        ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
    };
    let mut f = Fabric::new(cfg).unwrap();
    f.set_link_retry(Some(LinkRetry {
        max_retries: 8,
        retry_delay: SimDuration::from_ns(300),
        down_window: SimDuration::from_us(50),
    }));
    let d = f.inject(SimTime::ZERO, pkt(0, 1, 0, 10), &mut SimRng::new(1));
    assert_eq!(d.len(), 1, "held by the link, then delivered");
    let c = f.counters();
    assert_eq!((c.port_downs, c.link_held_for_flap, c.dropped), (1, 1, 0));
}

#[test]
fn link_flaps_are_seeded_and_off_by_default() {
    let run = |seed: u64| {
        let cfg = FabricConfig {
            faults: FaultConfig {
                link_flap: 0.05,
                link_flap_down: SimDuration::from_us(2),
                ..FaultConfig::none()
            },
            ..FabricConfig::new(Topology::SingleSwitch { ports: 4 })
        };
        let mut f = Fabric::new(cfg).unwrap();
        let mut rng = SimRng::new(seed);
        let mut got = Vec::new();
        for i in 0..2000u64 {
            let t = SimTime(i * 100_000);
            let d = f.inject(
                t,
                pkt((i % 4) as u32, ((i + 1) % 4) as u32, 0, 16),
                &mut rng,
            );
            got.push(d.len());
        }
        (got, f.counters())
    };
    let (a, ca) = run(3);
    let (b, cb) = run(3);
    assert_eq!(a, b);
    assert_eq!(ca, cb);
    assert!(ca.link_flaps > 0);
    assert!(
        ca.dropped_link_down > ca.link_flaps,
        "windows also drop later packets"
    );
    assert_eq!(ca.dropped, ca.dropped_link_down);
    let (c, _) = run(4);
    assert_ne!(a, c, "another seed flaps other links at other times");
    // A probability without a window flaps nothing (and draws nothing).
    let mut f = Fabric::new(FabricConfig {
        faults: FaultConfig {
            link_flap: 1.0,
            ..FaultConfig::none()
        },
        ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
    })
    .unwrap();
    let mut rng = SimRng::new(5);
    assert_eq!(f.inject(SimTime::ZERO, pkt(0, 1, 0, 8), &mut rng).len(), 1);
    assert_eq!(rng.next_u64(), SimRng::new(5).next_u64());
    assert_eq!(f.counters().link_flaps, 0);
}

fn retry() -> LinkRetry {
    LinkRetry {
        max_retries: 8,
        retry_delay: SimDuration::from_ns(300),
        down_window: SimDuration::from_us(50),
    }
}

#[test]
fn link_level_retry_turns_drops_and_corruption_into_delay() {
    let faults = FaultConfig {
        drop: 0.3,
        corrupt: 0.3,
        ..FaultConfig::none()
    };
    let topo = Topology::Torus3D {
        dims: [2, 1, 1],
        nics_per_router: 2,
    };
    let mut f = Fabric::new(FabricConfig {
        faults,
        ..FabricConfig::new(topo.clone())
    })
    .unwrap();
    f.set_link_retry(Some(retry()));
    let mut clean = Fabric::new(FabricConfig::new(topo)).unwrap();
    let mut rng = SimRng::new(9);
    let mut late = 0;
    for i in 0..400u64 {
        let t = SimTime::from_us(i * 10);
        let p = pkt((i % 4) as u32, ((i + 1) % 4) as u32, 0, 64);
        let d: Vec<_> = f.inject(t, p.clone(), &mut rng).into_iter().collect();
        let want: Vec<_> = clean.inject(t, p, &mut rng).into_iter().collect();
        assert_eq!(d.len(), 1, "packet {i} delivered exactly once");
        assert!(d[0].1.crc_ok(), "packet {i} intact");
        assert_eq!(d[0].1.data, want[0].1.data);
        assert!(d[0].0 >= want[0].0);
        late += u64::from(d[0].0 > want[0].0);
    }
    let c = f.counters();
    assert_eq!((c.dropped, c.corrupted, c.delivered), (0, 0, 400));
    assert!(c.link_recovered_drops > 50 && c.link_recovered_corruptions > 50);
    assert!(c.link_retries >= c.link_recovered_drops + c.link_recovered_corruptions);
    assert!(late >= c.link_recovered_drops, "a retried packet is late");
    let per_link: u64 = (0..f.graph().links().len() as u32)
        .map(|l| f.link_counters(LinkId(l)).unwrap().retries)
        .sum();
    assert_eq!(per_link, c.link_retries);
}

#[test]
fn link_level_retry_gives_up_after_its_bound() {
    let mut f = Fabric::new(FabricConfig {
        faults: FaultConfig {
            drop: 1.0,
            ..FaultConfig::none()
        },
        ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
    })
    .unwrap();
    f.set_link_retry(Some(retry()));
    let mut rng = SimRng::new(1);
    assert!(
        f.inject(SimTime::ZERO, pkt(0, 1, 0, 8), &mut rng)
            .is_empty()
    );
    let c = f.counters();
    assert_eq!((c.dropped_fault, c.link_retries), (1, 8));
    assert_eq!(c.link_recovered_drops, 0);
    // Without link-level retry the same site loses the packet without retrying.
    f.set_link_retry(None);
    assert!(
        f.inject(SimTime::ZERO, pkt(0, 1, 0, 8), &mut rng)
            .is_empty()
    );
    assert_eq!(f.counters().link_retries, 8);
}

#[test]
fn link_level_retry_rides_out_a_flap_shorter_than_its_window() {
    for (down, survives) in [(20u64, true), (200, false)] {
        let down = SimDuration::from_us(down);
        let mut f = Fabric::new(FabricConfig {
            faults: FaultConfig {
                link_flap: 1.0,
                link_flap_down: down,
                ..FaultConfig::none()
            },
            ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
        })
        .unwrap();
        f.set_link_retry(Some(retry()));
        let mut rng = SimRng::new(4);
        let t0 = SimTime::from_us(1);
        let d: Vec<_> = f
            .inject(t0, pkt(0, 1, 0, 8), &mut rng)
            .into_iter()
            .collect();
        assert_eq!(d.len(), usize::from(survives), "flap of {down:?}");
        if survives {
            assert!(d[0].0 >= t0 + down, "held until the link was back");
        }
        // A packet sent while the link is down waits for it too, or is lost.
        f.set_faults(FaultConfig::none());
        let d: Vec<_> = f
            .inject(t0 + SimDuration::from_us(5), pkt(1, 0, 0, 8), &mut rng)
            .into_iter()
            .collect();
        assert_eq!(d.len(), usize::from(survives));
        let c = f.counters();
        assert_eq!(c.link_flaps, 1);
        if survives {
            assert!(d[0].0 >= t0 + down);
            assert_eq!((c.link_held_for_flap, c.dropped), (2, 0));
        } else {
            assert_eq!((c.link_held_for_flap, c.dropped_link_down), (0, 2));
        }
    }
}

#[test]
fn priorities_are_validated() {
    let mut f = Fabric::new(FabricConfig::new(Topology::PointToPoint)).unwrap();
    assert_eq!(f.priority(TrafficClass(200)), (NUM_PRIORITIES - 1) as u8);
    assert_eq!(
        f.set_priority(TrafficClass(1), NUM_PRIORITIES as u8),
        Err(FabricError::BadPriority(NUM_PRIORITIES as u8))
    );
    f.set_priority(TrafficClass(9), 0).unwrap();
    assert_eq!(f.priority(TrafficClass(9)), 0);
    assert_eq!(
        f.set_link_up(LinkId(1), false),
        Err(FabricError::NoSuchLink(1))
    );
}
