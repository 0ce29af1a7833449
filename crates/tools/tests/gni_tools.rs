//! The gni tools run over emulated pairs and print their tables (small sizes and counts;
//! measurements are not asserted, only that every operation completed and was reported).

use std::io::Write;

use platform::EngineKind;
use tools::gni::{
    BwOptions, BwStats, LatOptions, LatStats, ToolError, ToolResult, atomic_lat, read_bw, read_lat,
    send_bw, send_lat, write_bw, write_lat,
};
use userlib::gni::AmoCmd;

type LatFn = fn(&LatOptions, &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>>;
type BwFn = fn(&BwOptions, &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>>;

fn lat(engine: EngineKind, min: u64, max: u64) -> LatOptions {
    LatOptions {
        engine,
        iters: 20,
        warmup: 2,
        min_size: min,
        max_size: max,
        rdma_threshold: 256,
        ..LatOptions::default()
    }
}

fn bw(engine: EngineKind, min: u64, max: u64) -> BwOptions {
    BwOptions {
        engine,
        iters: 2,
        min_size: min,
        max_size: max,
        list_size: 40,
        rdma_threshold: 256,
        credits: 8,
        buf_size: 1 << 20,
        ..BwOptions::default()
    }
}

/// The data rows of a table: lines after the column header line that start with a number.
fn rows(out: &str, col: &str) -> Vec<Vec<String>> {
    let mut in_table = false;
    let mut v = Vec::new();
    for l in out.lines() {
        if l.contains(col) && l.contains("[") {
            in_table = true;
            continue;
        }
        if in_table && l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
            v.push(l.split_whitespace().map(str::to_string).collect());
        }
    }
    v
}

#[test]
fn latency_tools_print_a_row_per_size() {
    let det = EngineKind::Deterministic { seed: 1 };
    let mut out = Vec::new();
    let r = send_lat(&lat(det.clone(), 8, 1024), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("GNI SMSG Send Latency Test"), "{text}");
    assert!(text.contains("SMSG Mailbox     : 16 credits x 1024 B"));
    let rs = rows(&text, "Send Size[B]");
    assert_eq!(rs.len(), 8, "{text}");
    assert_eq!(rs[0][0], "8");
    assert_eq!(rs[7][0], "1024");
    assert!(rs.iter().all(|r| r[1] == "20"));
    assert!(
        r.iter()
            .all(|(_, s)| s.count == 20 && s.min > 0.0 && s.max >= s.min)
    );

    for (f, title, col) in [
        (
            write_lat as LatFn,
            "GNI RDMA Write Latency Test",
            "RDMA Size[B]",
        ),
        (read_lat, "GNI RDMA Read Latency Test", "RDMA Size[B]"),
    ] {
        let mut out = Vec::new();
        // 64 B goes through FMA, 4 KiB through the BTE.
        let r = f(&lat(det.clone(), 64, 4096), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(title), "{text}");
        assert!(text.contains("Transfer         : FMA up to 256 B, BTE above"));
        assert_eq!(rows(&text, col).len(), 7, "{text}");
        assert_eq!(r.len(), 7);
    }

    let mut out = Vec::new();
    let opts = LatOptions {
        amo: AmoCmd::Cswap,
        ..lat(EngineKind::Threaded, 8, 8)
    };
    let r = atomic_lat(&opts, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Atomic Op        : Cswap (0x00d)"), "{text}");
    assert!(text.contains("Fetching         : Enabled"));
    assert_eq!(rows(&text, " AMO Size[B]").len(), 1);
    assert_eq!(r[0].0, 8);
}

#[test]
fn bandwidth_tools_print_a_row_per_size() {
    let det = EngineKind::Deterministic { seed: 2 };
    for (f, title, col) in [
        (
            send_bw as BwFn,
            "GNI SMSG Send Bandwidth Test",
            "Send Size[B]",
        ),
        (write_bw, "GNI RDMA Write Bandwidth Test", "RDMA Size[B]"),
        (read_bw, "GNI RDMA Read Bandwidth Test", "RDMA Size[B]"),
    ] {
        let mut out = Vec::new();
        let r = f(&bw(det.clone(), 64, 1024), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(title), "{text}");
        let rs = rows(&text, col);
        assert_eq!(rs.len(), 5, "{text}");
        assert!(
            rs.iter().all(|r| r[1] == "80"),
            "2 iterations of 40: {text}"
        );
        assert!(r.iter().all(|(_, s)| s.ops == 80 && s.mb_per_s > 0.0));
    }
    // The threaded engine, with more operations than FMA transactions or credits.
    let mut out = Vec::new();
    let opts = BwOptions {
        list_size: 300,
        ..bw(EngineKind::Threaded, 64, 64)
    };
    let r = write_bw(&opts, &mut out).unwrap();
    assert_eq!(r[0].1.ops, 600);
    let mut out = Vec::new();
    let r = send_bw(&opts, &mut out).unwrap();
    assert_eq!(r[0].1.ops, 600);
}

#[test]
fn tools_refuse_bad_options() {
    let mut out = Vec::new();
    let o = BwOptions {
        min_size: 65536,
        max_size: 65536,
        ..BwOptions::default()
    };
    assert!(matches!(send_bw(&o, &mut out), Err(ToolError::Option(_))));
    let o = LatOptions {
        iters: 0,
        ..LatOptions::default()
    };
    assert!(matches!(send_lat(&o, &mut out), Err(ToolError::Option(_))));
    assert!(out.is_empty());
}

#[test]
fn a_timed_run_measures_at_least_one_iteration_per_size() {
    let o = LatOptions {
        duration: Some(std::time::Duration::ZERO),
        ..lat(EngineKind::Deterministic { seed: 4 }, 8, 16)
    };
    let rows = write_lat(&o, &mut Vec::new()).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|(_, st)| st.count >= 1), "{rows:?}");
    let b = BwOptions {
        duration: Some(std::time::Duration::ZERO),
        ..bw(EngineKind::Deterministic { seed: 4 }, 64, 64)
    };
    let rows = write_bw(&b, &mut Vec::new()).unwrap();
    assert!(rows.iter().all(|(_, b)| b.ops >= 40), "{rows:?}");
}

#[test]
fn cached_amos_run_in_a_domain_that_enables_them() {
    for amo in [AmoCmd::FaddC, AmoCmd::CswapC, AmoCmd::FaxC] {
        let o = LatOptions {
            amo,
            iters: 3,
            ..lat(EngineKind::Deterministic { seed: 4 }, 8, 8)
        };
        let rows = atomic_lat(&o, &mut Vec::new()).unwrap_or_else(|e| panic!("{amo:?}: {e}"));
        assert_eq!(rows[0].1.count, 3, "{amo:?}");
    }
}

#[test]
fn a_buffer_alignment_of_0_is_refused() {
    let b = BwOptions {
        buf_align: 0,
        ..bw(EngineKind::Deterministic { seed: 4 }, 64, 64)
    };
    let e = write_bw(&b, &mut Vec::new()).unwrap_err();
    assert!(matches!(e, ToolError::Option(_)), "{e}");
}
