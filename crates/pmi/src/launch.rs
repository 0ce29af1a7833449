//! What the launcher tells a process it started: how to reach the PMI server and which rank
//! the process is, read from hydra's variables (`PMI_FD`, `PMI_PORT`, `PMI_ID`, `PMI_RANK`,
//! `PMI_SIZE`, `MPI_LOCALNRANKS`, `MPI_LOCALRANKID`).

use crate::{Error, Result};

/// Where the launcher is, and what the environment says about this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// How to reach the PMI server.
    pub endpoint: Endpoint,
    /// `PMI_RANK`.
    pub rank: Option<u32>,
    /// `PMI_SIZE`.
    pub size: Option<u32>,
    /// `PMI_ID` (with `PMI_PORT`: the id sent in `initack`).
    pub id: Option<u32>,
    /// `MPI_LOCALNRANKS` and `MPI_LOCALRANKID` (hydra sets them), the fallback of
    /// [`Pmi::local`] when the launcher publishes no `PMI_process_mapping`.
    pub local: Option<(u32, u32)>,
}

/// How to reach the PMI server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `PMI_FD`: an inherited socket.
    Fd(i32),
    /// `PMI_PORT`: `host:port` to connect to over TCP.
    Port(String),
}

fn config(var: &str, value: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        var: var.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn number(lookup: &impl Fn(&str) -> Option<String>, var: &str) -> Result<Option<u32>> {
    match lookup(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| config(var, &v, "expected a non-negative integer")),
    }
}

impl Launch {
    /// Read the launch variables through `lookup` (`std::env::var` in a real process).
    /// `Ok(None)` when none of `PMI_FD`, `PMI_PORT`, `PMI_RANK`, `PMI_SIZE`, `PMI_ID` is set
    /// (a singleton); a value that cannot be right is an [`Error::Config`] naming it.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>> {
        let vars = ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "PMI_ID"];
        if vars.iter().all(|v| lookup(v).is_none()) {
            return Ok(None);
        }
        let rank = number(&lookup, "PMI_RANK")?;
        let size = number(&lookup, "PMI_SIZE")?;
        let id = number(&lookup, "PMI_ID")?;
        if let Some(s) = size
            && s == 0
        {
            return Err(config("PMI_SIZE", "0", "a job has at least one process"));
        }
        if let (Some(r), Some(s)) = (rank, size)
            && r >= s
        {
            return Err(config(
                "PMI_RANK",
                &r.to_string(),
                format!("must be below PMI_SIZE={s}"),
            ));
        }
        // hydra's simple PMI client looks at PMI_FD first.
        let endpoint = if let Some(v) = lookup("PMI_FD") {
            let fd: i32 = v
                .trim()
                .parse()
                .map_err(|_| config("PMI_FD", &v, "expected the number of an inherited socket"))?;
            if fd < 0 {
                return Err(config("PMI_FD", &v, "a descriptor number is not negative"));
            }
            Endpoint::Fd(fd)
        } else if let Some(v) = lookup("PMI_PORT") {
            match v.trim().rsplit_once(':') {
                Some((host, port))
                    if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) =>
                {
                    Endpoint::Port(v.trim().to_string())
                }
                _ => return Err(config("PMI_PORT", &v, "expected host:port")),
            }
        } else {
            let set: Vec<&str> = vars
                .iter()
                .copied()
                .filter(|v| lookup(v).is_some())
                .collect();
            return Err(config(
                set[0],
                &lookup(set[0]).unwrap_or_default(),
                "is set, but neither PMI_FD nor PMI_PORT says how to reach the launcher",
            ));
        };
        let needs_rank = !matches!(endpoint, Endpoint::Port(_)) || id.is_none();
        if needs_rank && (rank.is_none() || size.is_none()) {
            let missing = if rank.is_none() {
                "PMI_RANK"
            } else {
                "PMI_SIZE"
            };
            return Err(config(
                missing,
                "",
                "must be set by the launcher (with PMI_FD, or with PMI_PORT but no PMI_ID)",
            ));
        }
        let local = match (
            number(&lookup, "MPI_LOCALNRANKS")?,
            number(&lookup, "MPI_LOCALRANKID")?,
        ) {
            (Some(n), Some(i)) if i < n => Some((n, i)),
            (Some(n), Some(i)) => {
                return Err(config(
                    "MPI_LOCALRANKID",
                    &i.to_string(),
                    format!("must be below MPI_LOCALNRANKS={n}"),
                ));
            }
            _ => None,
        };
        Ok(Some(Launch {
            endpoint,
            rank,
            size,
            id,
            local,
        }))
    }
}
