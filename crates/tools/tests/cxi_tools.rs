//! The HPE-style tools run over an emulated pair and print their tables.

use std::time::Duration;

use firmware_spec::cassini::amo::{AmoOp, AmoType};
use platform::EngineKind;
use tools::cxi::{
    BwOptions, DumpOptions, LatOptions, StatOptions, atomic_lat, dump_csrs, read_bw, read_lat,
    send_bw, send_lat, stat, write_bw, write_lat,
};

fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut out = Vec::new();
    f(&mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn latency_tools_print_their_tables() {
    for engine in [EngineKind::Threaded, EngineKind::Deterministic { seed: 5 }] {
        let o = LatOptions {
            engine: engine.clone(),
            iters: 20,
            warmup: 2,
            min_size: 8,
            max_size: 4096,
            ..LatOptions::default()
        };
        let mut rows = Vec::new();
        let s = text(|out| rows = send_lat(&o, out).unwrap());
        assert!(s.contains("CXI Send Latency Test"), "{s}");
        assert!(s.contains("Send Size[B]       Sends     Min[us]"), "{s}");
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
        );
        assert!(rows.iter().all(|(_, st)| st.count == 20
            && st.min > 0.0
            && st.min <= st.mean
            && st.mean <= st.max));
        let s = text(|out| {
            rows = write_lat(
                &LatOptions {
                    ll: false,
                    ..o.clone()
                },
                out,
            )
            .unwrap()
        });
        assert!(s.contains("RDMA Size[B]      Writes"), "{s}");
        assert!(s.contains("LL Cmd Launch    : Disabled"), "{s}");
        assert_eq!(rows.len(), 10);
        let s = text(|out| {
            rows = read_lat(
                &LatOptions {
                    report_all: true,
                    max_size: 8,
                    iters: 3,
                    ..o.clone()
                },
                out,
            )
            .unwrap()
        });
        assert!(s.contains("ReadNum  Latency[us]"), "{s}");
        assert_eq!(rows[0].1.count, 3);
        for (fetching, idc) in [(false, true), (true, true), (true, false)] {
            let a = LatOptions {
                fetching,
                idc,
                atomic_op: AmoOp::Sum,
                atomic_type: AmoType::Int32,
                ..o.clone()
            };
            let s = text(|out| rows = atomic_lat(&a, out).unwrap());
            assert!(s.contains("Atomic Type      : INT32_T"), "{s}");
            assert_eq!((rows.len(), rows[0].0, rows[0].1.count), (1, 4, 20));
        }
    }
}

#[test]
fn bandwidth_tools_print_their_tables() {
    let o = BwOptions {
        iters: 2,
        list_size: 16,
        min_size: 64,
        max_size: 256 << 10,
        ..BwOptions::default()
    };
    let mut rows = Vec::new();
    let s = text(|out| rows = write_bw(&o, out).unwrap());
    assert!(
        s.contains("RDMA Size[B]      Writes    BW[MB/s]  PktRate[Mpkt/s]"),
        "{s}"
    );
    assert_eq!(rows.len(), 13);
    assert!(
        rows.iter()
            .all(|(_, b)| b.ops == 32 && b.mb_per_s > 0.0 && b.mpkt_per_s > 0.0)
    );
    let s = text(|out| {
        rows = read_bw(
            &BwOptions {
                max_size: 4096,
                ..o.clone()
            },
            out,
        )
        .unwrap()
    });
    assert!(s.contains("Reads"), "{s}");
    let s = text(|out| {
        rows = send_bw(
            &BwOptions {
                duration: Some(Duration::from_millis(50)),
                max_size: 1024,
                ..o.clone()
            },
            out,
        )
        .unwrap()
    });
    assert!(s.contains("Test Type        : Duration"), "{s}");
    assert!(rows.iter().all(|(_, b)| b.ops > 0 && b.ops % 16 == 0));
}

#[test]
fn stat_and_dump_csrs() {
    let s = text(|out| {
        stat(
            &StatOptions {
                counters: true,
                ..StatOptions::default()
            },
            out,
        )
        .unwrap()
    });
    assert!(s.contains("Device: cxi0 (node 0)"), "{s}");
    assert!(s.contains("Device: cxi0 (node 1)"), "{s}");
    assert!(s.contains("PCI id: 17db:0501 (PF)"), "{s}");
    let mut n = 0;
    let s = text(|out| {
        n = dump_csrs(
            &DumpOptions {
                grep: Some("c_mb_sts_rev".into()),
                fields: true,
                ..DumpOptions::default()
            },
            out,
        )
        .unwrap()
    });
    assert_eq!(n, 1);
    assert!(s.contains("c_mb_sts_rev[0]"), "{s}");
    assert!(s.contains("vendor_id"), "{s}");
    assert!(s.contains("= 0x17db"), "{s}");
}

/// A list longer than the initiator's 65,536 request entries: the transmit queue waits for
/// entries to free (the NIC back-pressures it) instead of failing the rest with
/// RESOURCE_BUSY, so every write completes.
#[test]
fn a_list_beyond_the_request_entries_waits_for_them() {
    let o = BwOptions {
        engine: EngineKind::Deterministic { seed: 3 },
        iters: 1,
        min_size: 8,
        max_size: 8,
        list_size: 70_000,
        ..BwOptions::default()
    };
    let rows = write_bw(&o, &mut Vec::new()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1.ops, 70_000);
}

#[test]
fn a_timed_run_measures_at_least_one_iteration_per_size() {
    // A duration over before the first iteration: each size still reports a measurement,
    // never a row of zeros.
    let o = LatOptions {
        engine: EngineKind::Deterministic { seed: 3 },
        duration: Some(Duration::ZERO),
        min_size: 8,
        max_size: 16,
        ..LatOptions::default()
    };
    let mut rows = Vec::new();
    text(|out| rows = write_lat(&o, out).unwrap());
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter().all(|(_, st)| st.count >= 1 && st.min > 0.0),
        "{rows:?}"
    );
    let b = BwOptions {
        engine: EngineKind::Deterministic { seed: 3 },
        duration: Some(Duration::ZERO),
        list_size: 4,
        min_size: 64,
        max_size: 64,
        ..BwOptions::default()
    };
    let mut rows = Vec::new();
    text(|out| rows = write_bw(&b, out).unwrap());
    assert!(
        rows.iter().all(|(_, b)| b.ops >= 4 && b.mb_per_s > 0.0),
        "{rows:?}"
    );
}

#[test]
fn buffer_options_are_checked_as_cxi_write_bw_checks_them() {
    let o = BwOptions {
        engine: EngineKind::Deterministic { seed: 3 },
        iters: 1,
        list_size: 4,
        ..BwOptions::default()
    };
    for (buf_size, buf_align, want) in [
        (1, 64, "smaller than the largest operation"),
        (1 << 20, 0, "--buf-align must be at least 1"),
        (1 << 20, 2 << 20, "larger than the data buffer"),
        (8 << 30, 64, "larger than 4 GiB"),
    ] {
        let e = write_bw(
            &BwOptions {
                buf_size,
                buf_align,
                ..o.clone()
            },
            &mut Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(want), "{buf_size} {buf_align}: {e}");
    }
}
