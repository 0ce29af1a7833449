//! `RUST_LOG` turns on the device models' tracing: at `trace`, a span per hardware block
//! a send passes through, printed on stderr as it opens; a filter that cannot be parsed is a
//! clear error; without `RUST_LOG` nothing is printed.

use std::process::{Command, Output};

const NICEMU: &str = env!("CARGO_BIN_EXE_nicemu");

fn nicemu(args: &[&str], log: Option<&str>) -> Output {
    let mut cmd = Command::new(NICEMU);
    cmd.args(args).env_remove("RUST_LOG");
    if let Some(l) = log {
        cmd.env("RUST_LOG", l);
    }
    cmd.output().expect("run nicemu")
}

#[test]
fn trace_level_shows_the_cassini_blocks_a_send_passes_through() {
    let out = nicemu(
        &["send-lat", "-s", "8", "-n", "2", "--warmup", "0"],
        Some("emu_cassini=trace"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for span in ["cassini_mmio", "oxe", "pct", "cassini_rx", "tgt", "ee"] {
        assert!(
            err.lines()
                .any(|l| l.contains(&format!("{span}{{")) || l.contains(&format!(" {span}: "))),
            "no {span} span in:\n{}",
            err.lines().take(40).collect::<Vec<_>>().join("\n")
        );
    }
}

#[test]
fn trace_level_shows_the_gemini_entry_points() {
    let out = nicemu(
        &["gni-send-lat", "-s", "8", "-n", "2", "--warmup", "0"],
        Some("emu_gemini=trace"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for span in ["gemini_mmio", "gemini_rx"] {
        assert!(err.contains(span), "no {span} span");
    }
}

#[test]
fn no_log_without_rust_log_and_a_bad_filter_is_an_error() {
    let out = nicemu(&["send-lat", "-s", "8", "-n", "2", "--warmup", "0"], None);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("cassini_mmio"), "{err}");
    let out = nicemu(&["send-lat", "-n", "1"], Some("emu_cassini=loud"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("RUST_LOG=\"emu_cassini=loud\""), "{err}");
}
