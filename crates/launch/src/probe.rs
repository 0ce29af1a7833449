//! A program that checks a launch through the PMI client alone: each rank puts a short card
//! and a value long enough to be split into chunks, fences, reads every rank's values back and
//! checks them, checks that a missing key is an error, fences again and prints one line.
//!
//! `--fail RANK:HOW` makes one rank fail before the first fence, to see the launcher end the
//! job: `exit` (status 3), `abort` (PMI abort), `kill` (SIGKILL to itself), `vanish` (exit 0
//! without PMI finalize) or `hang` (sleep until killed).

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use pmi::Pmi;

/// How the failing rank fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Exit with status 3.
    Exit,
    /// Call PMI abort, then exit with status 1.
    Abort,
    /// Send itself SIGKILL.
    Kill,
    /// Exit with status 0 without finalizing its PMI session.
    Vanish,
    /// Sleep until killed.
    Hang,
}

/// `RANK:HOW`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The rank that fails.
    pub rank: u32,
    /// How.
    pub how: How,
}

impl FromStr for Failure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (rank, how) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: expected RANK:HOW"))?;
        let rank = rank
            .parse()
            .map_err(|_| format!("{rank:?}: expected a rank"))?;
        let how = match how {
            "exit" => How::Exit,
            "abort" => How::Abort,
            "kill" => How::Kill,
            "vanish" => How::Vanish,
            "hang" => How::Hang,
            _ => {
                return Err(format!(
                    "{how:?}: expected exit, abort, kill, vanish or hang"
                ));
            }
        };
        Ok(Failure { rank, how })
    }
}

/// The probe's arguments.
#[derive(clap::Parser, Clone, Debug)]
#[command(
    name = "pmi-probe",
    about = "Check a PMI launch: put, fence, get every rank's values"
)]
pub struct ProbeArgs {
    /// Make one rank fail before the first fence: RANK:HOW, HOW one of exit, abort, kill,
    /// vanish, hang.
    #[arg(long)]
    pub fail: Option<Failure>,
    /// Bytes of the long value each rank publishes (values above ~500 bytes are split into
    /// chunks).
    #[arg(long, default_value_t = 3000)]
    pub blob: usize,
}

/// Rank `rank`'s long value.
fn blob(rank: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(rank.wrapping_mul(7)) as u8
        })
        .collect()
}

fn fail(pmi: &dyn Pmi, how: How) -> ! {
    let rank = pmi.rank();
    eprintln!("pmi-probe: rank {rank} fails on purpose ({how:?})");
    match how {
        How::Exit => std::process::exit(3),
        How::Abort => {
            pmi.abort("the probe was asked to abort");
            std::process::exit(1)
        }
        How::Kill => {
            let pid = std::process::id().to_string();
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status();
            // `kill` missing: still fail, loudly.
            eprintln!("pmi-probe: rank {rank} could not kill itself");
            std::process::exit(4)
        }
        How::Vanish => std::process::exit(0),
        How::Hang => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
    }
}

/// Run the probe; the line to print, or what went wrong.
pub fn run(args: &ProbeArgs) -> Result<String, String> {
    let mut pmi = pmi::from_env()
        .map_err(|e| e.to_string())?
        .ok_or("not started by a PMI launcher (neither PMI_FD nor PMI_PORT is set)")?;
    let (rank, size) = (pmi.rank(), pmi.size());
    let (local_size, local_index) = pmi.local();
    let err = |e: pmi::Error| format!("rank {rank}: {e}");
    if let Some(f) = args.fail
        && f.rank == rank
    {
        fail(pmi.as_ref(), f.how);
    }
    let card = format!("probe:{rank}:{}", std::process::id());
    pmi.put("card", card.as_bytes()).map_err(err)?;
    pmi.put("blob", &blob(rank, args.blob)).map_err(err)?;
    pmi.fence().map_err(err)?;
    for peer in 0..size {
        let card = pmi.get(peer, "card").map_err(err)?;
        let prefix = format!("probe:{peer}:");
        if !card.starts_with(prefix.as_bytes()) {
            return Err(format!(
                "rank {rank}: rank {peer}'s card is {:?}, expected {prefix}<pid>",
                String::from_utf8_lossy(&card)
            ));
        }
        let got = pmi.get(peer, "blob").map_err(err)?;
        if got != blob(peer, args.blob) {
            return Err(format!(
                "rank {rank}: rank {peer}'s {}-byte value came back as {} different bytes",
                args.blob,
                got.len()
            ));
        }
    }
    if pmi.get(0, "no-such-key").is_ok() {
        return Err(format!("rank {rank}: a key nobody put was found"));
    }
    pmi.fence().map_err(err)?;
    Ok(format!(
        "pmi-probe: rank {rank} of {size} (local {local_index} of {local_size}): \
         checked {size} cards and {size} values of {} bytes",
        args.blob
    ))
}

/// Run the probe as a program: print its line, exit 0; or print the error, exit 1.
pub fn main(args: ProbeArgs) -> ExitCode {
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pmi-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
