//! The main job's demos run end to end and print the exchanges they claim.

use std::process::Command;

fn nicemu(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(args)
        .output()
        .expect("run nicemu");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn demo_cassini_shows_matched_unexpected_and_rma_traffic() {
    let (ok, out, err) = nicemu(&["demo", "cassini"]);
    assert!(ok, "demo cassini failed: {err}");
    assert!(out.contains("event PUT_OVERFLOW"), "{out}");
    assert!(out.contains("now holds \"hello from nid0!\""), "{out}");
    assert!(out.contains("65536 bytes verified"), "{out}");
    assert!(
        !out.contains("Gemini"),
        "only the Cassini demo was asked for"
    );
}

#[test]
fn demo_gemini_shows_fma_bte_and_amo_traffic() {
    let (ok, out, err) = nicemu(&["demo", "gemini"]);
    assert!(ok, "demo gemini failed: {err}");
    assert!(out.contains("FMA PUT"), "{out}");
    assert!(
        out.contains("AMO FADD 8 NICs -> PE3 word: final 36"),
        "{out}"
    );
    assert!(out.contains("GNI_RC_ALIGNMENT_ERROR"), "{out}");
    assert!(out.contains("every byte right"), "{out}");
}

#[test]
fn demo_rejects_an_unknown_target() {
    let (ok, _out, err) = nicemu(&["demo", "infiniband"]);
    assert!(!ok);
    assert!(err.contains("invalid value"), "{err}");
}
