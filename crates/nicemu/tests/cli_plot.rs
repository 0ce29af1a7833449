//! `nicemu osu --svg` and `nicemu plot`: the plots hold one line per run with every size of
//! the run (the drawing itself is tested in `tools::plot`).

use std::path::Path;
use std::process::Command;

fn nicemu() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nicemu"))
}

/// The `(label, points)` of every line of an SVG written by `tools::plot`.
fn series(svg: &str) -> Vec<(String, usize)> {
    svg.lines()
        .filter(|l| l.starts_with(r#"<g class="series""#))
        .map(|l| {
            let attr = |name: &str| {
                let start = l.find(&format!(r#"{name}=""#)).unwrap() + name.len() + 2;
                let len = l[start..].find('"').unwrap();
                l[start..start + len].to_string()
            };
            (attr("data-label"), attr("data-points").parse().unwrap())
        })
        .collect()
}

fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn dir() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

#[test]
fn osu_svg_plots_every_size_of_the_run() {
    let svg = dir().join("cli-plot-osu.svg");
    let _ = std::fs::remove_file(&svg);
    let out = nicemu()
        .args([
            "osu", "latency", "--nic", "gemini", "-m", "1:64", "-i", "20",
        ])
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    succeeded(&out);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"));
    assert!(text.contains(">OSU MPI Latency Test<"), "{text}");
    // 1, 2, 4, ... 64: seven sizes.
    assert_eq!(
        series(&text),
        vec![("nicemu gemini (threaded engine)".to_string(), 7)]
    );
}

#[test]
fn plot_draws_several_runs_side_by_side_and_refuses_bad_input() {
    let a = dir().join("cli-plot-a.txt");
    let b = dir().join("cli-plot-b.txt");
    std::fs::write(
        &a,
        "# OSU MPI Latency Test v7.4\n# Size       Avg Latency(us)\n8 1.5\n16 1.6\n\n\
         # OSU MPI Bandwidth Test v7.4\n# Size      Bandwidth (MB/s)\n8 10.0\n16 20.0\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "# OSU MPI Latency Test v7.4\n# Size       Avg Latency(us)\n8 9.5\n16 9.6\n32 9.9\n",
    )
    .unwrap();
    let svg = dir().join("cli-plot-ab.svg");
    let out = nicemu()
        .args(["plot", "-o"])
        .arg(&svg)
        .arg(format!("MPICH={}", a.display()))
        .arg(format!("nicemu={}", b.display()))
        .output()
        .unwrap();
    succeeded(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 panels, 3 lines"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(
        series(&text),
        vec![
            ("MPICH".to_string(), 2),
            ("nicemu".to_string(), 3),
            ("MPICH".to_string(), 2)
        ]
    );

    // A file without a sized row, a missing file, a run without a label: errors.
    let empty = dir().join("cli-plot-empty.txt");
    std::fs::write(&empty, "# OSU MPI Barrier Latency Test v7.4\n       3.00\n").unwrap();
    for run in [
        format!("x={}", empty.display()),
        format!("x={}", dir().join("cli-plot-missing.txt").display()),
        a.display().to_string(),
    ] {
        let out = nicemu()
            .args(["plot", "-o"])
            .arg(dir().join("cli-plot-bad.svg"))
            .arg(&run)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{run} was accepted");
    }
}
