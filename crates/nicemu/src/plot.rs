//! `nicemu plot`: draw OSU-format tables (from `nicemu osu`, the public OSU programs or
//! `bench/compare.sh`) as one SVG figure against message size (`tools::plot`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct PlotArgs {
    /// The SVG file to write.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: PathBuf,
    /// The figure's title.
    #[arg(long, default_value = "OSU micro-benchmarks")]
    title: String,
    /// `LABEL=FILE`: a file holding one or more OSU tables, drawn as a line named LABEL in
    /// the panel of each table's title (one panel per benchmark).
    #[arg(required = true, value_name = "LABEL=FILE", value_parser = parse_run)]
    runs: Vec<(String, PathBuf)>,
}

fn parse_run(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((label, file)) if !label.is_empty() && !file.is_empty() => {
            Ok((label.to_string(), PathBuf::from(file)))
        }
        _ => Err(format!("expected LABEL=FILE, got '{s}'")),
    }
}

/// The tables of one file: a new table starts at each `# OSU` title line.
fn split_tables(text: &str) -> Vec<String> {
    let mut tables: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("# OSU") || tables.is_empty() {
            tables.push(String::new());
        }
        if let Some(t) = tables.last_mut() {
            t.push_str(line);
            t.push('\n');
        }
    }
    tables
}

/// Write `fig` to `path` as SVG.
pub fn write_svg(path: &Path, fig: &tools::plot::Figure) -> anyhow::Result<()> {
    if fig.panels.is_empty() {
        anyhow::bail!("nothing to plot: no table has a row with a message size");
    }
    std::fs::write(path, fig.svg()).with_context(|| format!("writing {}", path.display()))
}

pub fn run(args: PlotArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for (label, file) in &args.runs {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        runs.extend(split_tables(&text).into_iter().map(|t| (label.clone(), t)));
    }
    let fig = tools::plot::from_osu_tables(&args.title, &runs);
    write_svg(&args.output, &fig)?;
    let series: usize = fig.panels.iter().map(|p| p.series.len()).sum();
    writeln!(
        out,
        "{}: {} panels, {series} lines",
        args.output.display(),
        fig.panels.len()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_several_tables_splits_at_each_title() {
        let t = split_tables(
            "# OSU MPI Latency Test v7.4\n8 1.0\n\n# OSU MPI Bandwidth Test v7.4\n8 2.0\n",
        );
        assert_eq!(t.len(), 2);
        assert!(t[0].contains("Latency") && t[0].contains("8 1.0"));
        assert!(t[1].contains("Bandwidth") && t[1].contains("8 2.0"));
    }

    #[test]
    fn runs_need_a_label_and_a_file() {
        assert_eq!(
            parse_run("MPICH shm=a.txt"),
            Ok(("MPICH shm".into(), PathBuf::from("a.txt")))
        );
        assert!(parse_run("a.txt").is_err());
        assert!(parse_run("=a.txt").is_err());
        assert!(parse_run("x=").is_err());
    }
}
