//! The bandwidth tools draw their progress on stderr only when it is a terminal: captured
//! output stays clean, and under a pseudo-terminal (`script`, from Debian's essential
//! bsdutils) the progress line appears and is cleared before the tool ends.

use std::process::Command;

const TOOLS: [&[&str]; 2] = [
    &["send-bw", "-s", "8", "-l", "64", "-n", "3"],
    &["gni-send-bw", "-s", "8", "-l", "64", "-n", "3"],
];

#[test]
fn captured_stderr_has_no_progress() {
    for args in TOOLS {
        let out = Command::new(env!("CARGO_BIN_EXE_nicemu"))
            .args(args)
            .output()
            .expect("running nicemu");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
        assert!(stdout.contains("BW[MB/s]"), "{args:?}: {stdout}");
        assert_eq!(stderr, "", "{args:?} wrote to a captured stderr");
    }
}

#[test]
fn a_terminal_sees_the_progress_line_and_its_clearing() {
    if Command::new("script").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "script (bsdutils) is missing in CI"
        );
        eprintln!("skipped: no `script` to run the tool under a pseudo-terminal");
        return;
    }
    for args in TOOLS {
        let cmd = format!("{} {}", env!("CARGO_BIN_EXE_nicemu"), args.join(" "));
        let out = Command::new("script")
            .args(["-q", "-e", "-c", &cmd, "/dev/null"])
            .output()
            .expect("running script");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {text}");
        let tool = args[0];
        assert!(
            text.contains(&format!(
                "\r{tool}: 8 B: iteration 3/3 (100 %), 192 operations "
            )),
            "{args:?}: no final progress line in {text:?}"
        );
        assert!(
            text.contains("\r\x1b[K"),
            "{args:?}: line not cleared: {text:?}"
        );
        assert!(text.contains("BW[MB/s]"), "{args:?}: {text:?}");
    }
}
