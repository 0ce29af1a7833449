//! `nicemu spec ...`: print the hardware contract from `firmware-spec` (CSR map, BAR0 map,
//! Gemini address map).

use std::io::Write;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use firmware_spec::cassini::{csr, pci};
use firmware_spec::gemini;

/// Arguments of `nicemu spec`.
#[derive(Args)]
pub struct SpecArgs {
    #[command(subcommand)]
    nic: Nic,
}

#[derive(Subcommand)]
enum Nic {
    /// HPE Slingshot-11 Cassini.
    Cassini {
        #[command(subcommand)]
        what: CassiniCmd,
    },
    /// Cray Gemini.
    Gemini {
        #[command(subcommand)]
        what: GeminiCmd,
    },
}

#[derive(Subcommand)]
enum CassiniCmd {
    /// Print one CSR: offsets, entries, block and a table of its fields.
    Csr {
        /// CSR name, any case (e.g. c_lpe_cfg_ptl_table).
        name: String,
    },
    /// List CSRs (offset, entries, size, name).
    Csrs {
        /// Only CSRs whose name contains PATTERN (case-insensitive).
        #[arg(long, value_name = "PATTERN")]
        grep: Option<String>,
    },
    /// Print the BAR0 map.
    Bar0,
}

#[derive(Subcommand)]
enum GeminiCmd {
    /// Print the Gemini address map.
    Map,
}

/// Run `nicemu spec`, writing to `out`. A closed output pipe ends the listing quietly.
pub fn run(args: SpecArgs, out: &mut dyn Write) -> Result<()> {
    let res = match args.nic {
        Nic::Cassini { what } => match what {
            CassiniCmd::Csr { name } => print_csr(&name, out),
            CassiniCmd::Csrs { grep } => print_csrs(grep.as_deref(), out),
            CassiniCmd::Bar0 => print_bar0(out),
        },
        Nic::Gemini {
            what: GeminiCmd::Map,
        } => print_gemini_map(out),
    };
    match res {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        r => r,
    }
}

fn revision_name(c: &csr::Csr) -> &'static str {
    match c.revision() {
        None if c.netsim_only() => "netsim only",
        None => "all",
        Some(pci::Generation::Cassini1) => "Cassini 1 only",
        Some(pci::Generation::Cassini2) => "Cassini 2 only",
    }
}

fn print_csr(name: &str, out: &mut dyn Write) -> Result<()> {
    let Some(c) = csr::lookup(name) else {
        let close = close_matches(name, csr::all().iter().map(|c| c.name), 8);
        if close.is_empty() {
            bail!(
                "unknown CSR `{name}` (try `nicemu spec cassini csrs --grep <part of the name>`)"
            );
        }
        bail!("unknown CSR `{name}`; close matches: {}", close.join(", "));
    };
    writeln!(out, "{}", c.name)?;
    writeln!(
        out,
        "  block        {} (base {:#x})",
        c.block(),
        c.block().base()
    )?;
    writeln!(out, "  revision     {}", revision_name(c))?;
    writeln!(
        out,
        "  kind         {}",
        if c.is_register() {
            "register"
        } else {
            "view (field names over storage a register covers)"
        }
    )?;
    writeln!(out, "  CSR offset   {:#x}", c.offset)?;
    writeln!(out, "  BAR0 offset  {:#x}", pci::CSR_BASE + c.offset)?;
    writeln!(
        out,
        "  entries      {} x {} B (stride {:#x}, span {:#x})",
        c.entries,
        c.size,
        c.size,
        c.span()
    )?;
    if c.struct_size != c.size {
        writeln!(out, "  struct size  {} B", c.struct_size)?;
    }
    writeln!(out, "  fields ({})", c.fields.len())?;
    writeln!(
        out,
        "    {:<9} {:>5}  {:<5} {:<4} {:<18}  name",
        "bits", "width", "sw", "hw", "reset"
    )?;
    for f in c.fields {
        let bits = format!("{}:{}", f.end_bit() - 1, f.bit);
        let reset = if f.is_register_field() {
            format!("{:#x}", f.reset)
        } else {
            "-".to_owned()
        };
        writeln!(
            out,
            "    {:<9} {:>5}  {:<5} {:<4} {:<18}  {}",
            bits,
            f.width,
            f.sw.as_str(),
            f.hw.as_str(),
            reset,
            f.name
        )?;
    }
    Ok(())
}

fn print_csrs(grep: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let pat = grep.map(str::to_ascii_lowercase);
    writeln!(
        out,
        "{:<12} {:>7} {:>6}  {:<8} name",
        "csr_offset", "entries", "size", "block"
    )?;
    let mut n = 0usize;
    for c in csr::all() {
        if pat.as_deref().is_some_and(|p| !c.name.contains(p)) {
            continue;
        }
        n += 1;
        writeln!(
            out,
            "{:<12} {:>7} {:>6}  {:<8} {}",
            format!("{:#x}", c.offset),
            c.entries,
            c.size,
            c.block().name(),
            c.name
        )?;
    }
    writeln!(out, "{n} CSRs")?;
    Ok(())
}

fn print_bar0(out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "Cassini BAR0 (PF {} MiB, VF {} MiB; a VF's BAR0 has no CSR region)",
        pci::BAR0_SIZE_PF >> 20,
        pci::BAR0_SIZE_VF >> 20
    )?;
    writeln!(
        out,
        "{:<12} {:<12} {:>10} {:>6}  {:<14} description",
        "base", "end", "stride", "count", "name"
    )?;
    for r in &pci::BAR0_REGIONS {
        writeln!(
            out,
            "{:<12} {:<12} {:>10} {:>6}  {:<14} {}",
            format!("{:#x}", r.base),
            format!("{:#x}", r.end()),
            format!("{:#x}", r.stride),
            r.count,
            r.name,
            r.description
        )?;
    }
    writeln!(out, "CSR blocks (offsets inside the CSR region):")?;
    for b in csr::Block::ALL {
        writeln!(
            out,
            "  {:<8} {:#x}..{:#x}",
            b.name(),
            b.base(),
            b.base() + b.window()
        )?;
    }
    Ok(())
}

fn print_gemini_map(out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{:<14} {:<14} {:>10} {:>8}  {:<16} description",
        "base", "end", "stride", "count", "name"
    )?;
    for r in gemini::map::REGIONS {
        let end = r
            .stride
            .checked_mul(r.count)
            .and_then(|s| r.base.checked_add(s));
        writeln!(
            out,
            "{:<14} {:<14} {:>10} {:>8}  {:<16} {}",
            format!("{:#x}", r.base),
            end.map_or_else(|| "overflow".to_owned(), |e| format!("{e:#x}")),
            format!("{:#x}", r.stride),
            r.count,
            r.name,
            r.description
        )?;
    }
    Ok(())
}

/// Up to `max` candidates close to `query` (case-insensitive): those containing it or
/// contained in it first, then by edit distance within a third of the query's length.
fn close_matches<'a>(
    query: &str,
    candidates: impl Iterator<Item = &'a str>,
    max: usize,
) -> Vec<&'a str> {
    let q = query.to_ascii_lowercase();
    let limit = (q.len() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = candidates
        .filter_map(|c| {
            if !q.is_empty() && (c.contains(q.as_str()) || q.contains(c)) {
                return Some((0, c));
            }
            let d = levenshtein(&q, c);
            (d <= limit).then_some((d, c))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(max).map(|(_, c)| c).collect()
}

/// Edit distance (insertions, deletions, substitutions) between two byte strings.
fn levenshtein(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.bytes().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance() {
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("same", "same"), 0);
    }

    #[test]
    fn suggestions() {
        let names = [
            "c_lpe_cfg_ptl_table",
            "c_lpe_cfg_pe_le_pools",
            "c_mb_sts_rev",
        ];
        let m = close_matches("c_lpe_cfg_ptl_tabel", names.iter().copied(), 5);
        assert_eq!(m.first(), Some(&"c_lpe_cfg_ptl_table"));
        assert!(!m.contains(&"c_mb_sts_rev"));
        assert_eq!(
            close_matches("sts_rev", names.iter().copied(), 5),
            vec!["c_mb_sts_rev"]
        );
        assert!(close_matches("zzzzzzzzzzzz", names.iter().copied(), 5).is_empty());
    }
}
