//! How the processes of a job find each other when the launcher serves no PMI-1: a
//! key-value exchange through files in a rendezvous directory, good for exactly what joining
//! the fabric between processes needs (each rank's host name, shared-memory segment and TCP
//! address, `platform::process::join`).
//!
//! Why files: Open MPI's `mpirun` (4.1: ORTE with PMIx 4) gives its ranks no PMI-1 server,
//! and PMIx is Open MPI's own connection to its daemon. The endpoint names themselves are
//! exchanged by the application (Open MPI's MTL publishes `fi_getname` through its modex and
//! calls `fi_av_insert`); the libraries only need the fabric under them, once per process.
//!
//! The job is described by the environment ([`Job::from_lookup`]); a rank whose job has one
//! process does not use this module. Each [`Rendezvous::fence`] writes this rank's keys to
//! `<dir>/<epoch>.<rank>` (written aside, then renamed: a reader never sees half a file) and
//! waits until every rank's file of that epoch exists. [`Rendezvous::abort`] leaves
//! `<dir>/abort` with the reason, which ends every other rank's wait with it. After the
//! exchange every rank leaves `<dir>/left.<rank>` ([`Rendezvous::leave`], also what
//! [`Pmi::finalize`] does); a rank that finds all of them there knows nobody reads the
//! directory any more and removes it.
//!
//! Two users, each with its own variable prefix and directory name: the libfabric provider
//! (`NICEMU_OFI`, `nicemu-ofi-<job>`) and the preloaded `/dev/cxi` library (`NICEMU_CXI`,
//! `nicemu-cxi-<job>`).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{Error, Pmi, Result};

/// The default time a fence waits for the slowest rank.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A rank of a job with more than one process, as the launcher's environment describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// This process's rank.
    pub rank: u32,
    /// Processes in the job.
    pub size: u32,
    /// Processes on this host and this one's index among them (`(1, 0)` when not known).
    pub local: (u32, u32),
    /// The rendezvous directory of this job.
    pub dir: PathBuf,
    /// How long a fence waits.
    pub timeout: Duration,
}

/// Local size and rank variables (informational).
const LOCAL: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("MPI_LOCALNRANKS", "MPI_LOCALRANKID"),
];

fn bad(var: &str, value: &str, reason: &str) -> Error {
    Error::Config {
        var: var.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

fn number(lookup: &dyn Fn(&str) -> Option<String>, var: &str) -> Result<Option<u32>> {
    lookup(var)
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| bad(var, &v, "expected a number"))
        })
        .transpose()
}

/// Characters allowed in a job id used as a directory name.
fn sane(job: &str) -> bool {
    !job.is_empty()
        && job.len() <= 128
        && job
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
        && job != "."
        && job != ".."
}

/// A job id from a PMI server address (`host:port`): `pmi-` and the address with every
/// character a directory name should not have replaced by `_`.
fn port_job(port: &str) -> String {
    let addr: String = port
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("pmi-{addr}")
}

impl Job {
    /// The job this process belongs to, or `None` when it runs alone (no launcher variables,
    /// or a job of one process). `prefix` names the user's variables (`NICEMU_OFI`,
    /// `NICEMU_CXI`) and directory (`nicemu-ofi`, `nicemu-cxi` in lower case).
    ///
    /// - rank and size: `<prefix>_RANK`/`<prefix>_SIZE`, else Open MPI's
    ///   `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`, else `PMI_RANK`/`PMI_SIZE`;
    /// - job id: `<prefix>_JOB`, else `PMIX_NAMESPACE`, else `OMPI_MCA_ess_base_jobid`,
    ///   else `pmi-<PMI_PORT>` (the address of the PMI-1 server a launcher runs for each
    ///   job, `nicemu run`'s included: two jobs started by one process at once differ
    ///   there), else `ppid-<parent pid>` (the ranks of one host are children of one
    ///   launcher daemon: Open MPI's `orted`/`mpirun`, hydra's proxy);
    /// - directory: `$<prefix>_RENDEZVOUS/<prefix>-<job>` (must be shared by all hosts
    ///   of a job that spans several), else Open MPI's job session directory
    ///   `$PMIX_SERVER_TMPDIR` (removed by `mpirun` at the end of the job), else the
    ///   temporary directory;
    /// - `<prefix>_BOOTSTRAP_TIMEOUT_MS`: how long a fence waits (default 60 s).
    pub fn from_lookup(
        prefix: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Job>> {
        let lookup: &dyn Fn(&str) -> Option<String> = &lookup;
        let own = (format!("{prefix}_RANK"), format!("{prefix}_SIZE"));
        let pairs = [
            (own.0.as_str(), own.1.as_str()),
            ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
            ("PMI_RANK", "PMI_SIZE"),
        ];
        let mut found = None;
        for (r, s) in pairs {
            match (number(lookup, r)?, number(lookup, s)?) {
                (Some(rank), Some(size)) => {
                    found = Some((rank, size, s));
                    break;
                }
                (None, None) => {}
                _ => {
                    return Err(Error::Failed(format!("{r} and {s} must be set together")));
                }
            }
        }
        let Some((rank, size, size_var)) = found else {
            return Ok(None);
        };
        if size == 0 || rank >= size {
            return Err(Error::Failed(format!(
                "rank {rank} is not below the job size {size} ({size_var})"
            )));
        }
        if size == 1 {
            return Ok(None);
        }
        let job_var = format!("{prefix}_JOB");
        let job = [
            job_var.as_str(),
            "PMIX_NAMESPACE",
            "OMPI_MCA_ess_base_jobid",
        ]
        .iter()
        .find_map(|v| lookup(v).map(|j| (*v, j.trim().to_owned())));
        let job = match job {
            Some((var, j)) if !sane(&j) => {
                return Err(bad(
                    var,
                    &j,
                    "a job id is letters, digits, '-', '_', '.' or '@'",
                ));
            }
            Some((_, j)) => j,
            None => match lookup("PMI_PORT").map(|p| port_job(&p)) {
                Some(j) if sane(&j) => j,
                _ => format!("ppid-{}", std::os::unix::process::parent_id()),
            },
        };
        let base = lookup(&format!("{prefix}_RENDEZVOUS"))
            .or_else(|| lookup("PMIX_SERVER_TMPDIR"))
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let timeout_var = format!("{prefix}_BOOTSTRAP_TIMEOUT_MS");
        let timeout = match lookup(&timeout_var) {
            None => DEFAULT_TIMEOUT,
            Some(v) => Duration::from_millis(
                v.trim()
                    .parse()
                    .ok()
                    .filter(|&ms: &u64| ms > 0)
                    .ok_or_else(|| bad(&timeout_var, &v, "expected milliseconds > 0"))?,
            ),
        };
        let mut local = (1, 0);
        for (s, r) in LOCAL {
            if let (Some(s), Some(r)) = (number(lookup, s)?, number(lookup, r)?) {
                local = (s, r);
                break;
            }
        }
        let dir_name = prefix.to_ascii_lowercase().replace('_', "-");
        Ok(Some(Job {
            rank,
            size,
            local,
            dir: base.join(format!("{dir_name}-{job}")),
            timeout,
        }))
    }
}

/// The rendezvous of this process's job, if a launcher without PMI-1 started it as one rank
/// of several ([`Job::from_lookup`] with `prefix`).
pub fn from_env(
    prefix: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<Rendezvous>> {
    Job::from_lookup(prefix, lookup)?
        .map(Rendezvous::new)
        .transpose()
}

/// The exchange of one rank (a [`Pmi`] for `platform::process::join`).
pub struct Rendezvous {
    launch: Job,
    /// Everything this rank put (each fence publishes all of it).
    mine: Vec<(String, Vec<u8>)>,
    /// Fences passed.
    epoch: u32,
    /// Other ranks' keys as of the last fence.
    theirs: HashMap<u32, HashMap<String, Vec<u8>>>,
    /// [`Rendezvous::leave`] was done.
    left: bool,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Failed(format!("rendezvous: {what} {}: {e}", path.display()))
}

fn hex(v: &[u8]) -> String {
    v.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn parse(text: &str) -> Option<HashMap<String, Vec<u8>>> {
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.to_owned(), unhex(v)?))
        })
        .collect()
}

impl Rendezvous {
    /// Start the exchange in `launch.dir` (created if needed).
    pub fn new(launch: Job) -> Result<Rendezvous> {
        std::fs::create_dir_all(&launch.dir).map_err(|e| io("creating", &launch.dir, e))?;
        Ok(Rendezvous {
            launch,
            mine: Vec::new(),
            epoch: 0,
            theirs: HashMap::new(),
            left: false,
        })
    }

    fn file(&self, epoch: u32, rank: u32) -> PathBuf {
        self.launch.dir.join(format!("{epoch}.{rank}"))
    }

    fn abort_file(&self) -> PathBuf {
        self.launch.dir.join("abort")
    }

    /// The exchange is over for this rank: mark it, and remove the directory when every rank
    /// has. Once; later calls do nothing.
    pub fn leave(&mut self) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        let dir = &self.launch.dir;
        let _ = std::fs::write(dir.join(format!("left.{}", self.launch.rank)), b"");
        if (0..self.launch.size).all(|r| dir.join(format!("left.{r}")).exists()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Pmi for Rendezvous {
    fn rank(&self) -> u32 {
        self.launch.rank
    }
    fn size(&self) -> u32 {
        self.launch.size
    }
    fn local(&self) -> (u32, u32) {
        self.launch.local
    }
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        if key.is_empty() || key.contains(['=', '\n']) {
            return Err(Error::Failed(format!("rendezvous: bad key {key:?}")));
        }
        self.mine.retain(|(k, _)| k != key);
        self.mine.push((key.to_owned(), value.to_vec()));
        Ok(())
    }
    fn fence(&mut self) -> Result<()> {
        self.epoch += 1;
        let text: String = self
            .mine
            .iter()
            .map(|(k, v)| format!("{k}={}\n", hex(v)))
            .collect();
        let me = self.launch.rank;
        let path = self.file(self.epoch, me);
        let aside = self.launch.dir.join(format!(".{}.{me}", self.epoch));
        std::fs::write(&aside, text).map_err(|e| io("writing", &aside, e))?;
        std::fs::rename(&aside, &path).map_err(|e| io("renaming", &aside, e))?;
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        let mut missing: Vec<u32> = (0..self.launch.size).filter(|&r| r != me).collect();
        loop {
            missing.retain(|&r| !self.file(self.epoch, r).exists());
            if missing.is_empty() {
                break;
            }
            if let Some(why) = self.aborted() {
                return Err(Error::Failed(format!("the job was aborted: {why}")));
            }
            if start.elapsed() > self.launch.timeout {
                return Err(Error::Failed(format!(
                    "rendezvous in {}: ranks {missing:?} did not arrive within {:?} (do all \
                     ranks open the nicemu provider? NICEMU_OFI_BOOTSTRAP_TIMEOUT_MS)",
                    self.launch.dir.display(),
                    self.launch.timeout
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        self.theirs.clear();
        Ok(())
    }
    fn get(&mut self, rank: u32, key: &str) -> Result<Vec<u8>> {
        if !self.theirs.contains_key(&rank) {
            if rank >= self.launch.size || self.epoch == 0 {
                return Err(Error::Failed(format!(
                    "rendezvous: no value {key} of rank {rank}"
                )));
            }
            let path = self.file(self.epoch, rank);
            let text = std::fs::read_to_string(&path).map_err(|e| io("reading", &path, e))?;
            let kv = parse(&text).ok_or_else(|| {
                Error::Failed(format!("rendezvous: {} is malformed", path.display()))
            })?;
            self.theirs.insert(rank, kv);
        }
        self.theirs
            .get(&rank)
            .and_then(|kv| kv.get(key))
            .cloned()
            .ok_or_else(|| Error::Failed(format!("rendezvous: rank {rank} published no {key}")))
    }
    fn abort(&self, why: &str) {
        let p = self.abort_file();
        if !p.exists() {
            let _ = std::fs::write(&p, format!("rank {}: {why}", self.launch.rank));
        }
    }
    fn aborted(&self) -> Option<String> {
        std::fs::read_to_string(self.abort_file()).ok()
    }
    fn finalize(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Env = Vec<(&'static str, &'static str)>;

    fn env(vars: &[(&'static str, &'static str)]) -> Env {
        vars.to_vec()
    }

    fn from_env(e: &Env) -> Result<Option<Job>> {
        Job::from_lookup("NICEMU_OFI", |v| {
            e.iter().find(|(k, _)| *k == v).map(|(_, x)| x.to_string())
        })
    }

    #[test]
    fn the_launchers_variables_describe_the_job() {
        assert_eq!(from_env(&env(&[])).unwrap(), None);
        let one = env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1")]);
        assert_eq!(from_env(&one).unwrap(), None, "a singleton runs alone");
        let ompi = env(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("PMIX_NAMESPACE", "1304690689"),
            ("PMIX_SERVER_TMPDIR", "/tmp/ompi.vm.0/pid.8506"),
        ]);
        let l = from_env(&ompi).unwrap().unwrap();
        assert_eq!((l.rank, l.size, l.local), (2, 4, (4, 2)));
        assert_eq!(
            l.dir,
            Path::new("/tmp/ompi.vm.0/pid.8506/nicemu-ofi-1304690689")
        );
        assert_eq!(l.timeout, DEFAULT_TIMEOUT);
        // Two jobs of one launcher process (PMI-1 servers of their own) do not meet.
        let a = env(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("PMI_PORT", "127.0.0.1:40001"),
        ]);
        let b = env(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("PMI_PORT", "127.0.0.1:40002"),
        ]);
        let (a, b) = (
            from_env(&a).unwrap().unwrap(),
            from_env(&b).unwrap().unwrap(),
        );
        assert!(
            a.dir.ends_with("nicemu-ofi-pmi-127.0.0.1_40001"),
            "{}",
            a.dir.display()
        );
        assert_ne!(a.dir, b.dir);
        let hydra = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]);
        let l = from_env(&hydra).unwrap().unwrap();
        let ppid = format!("nicemu-ofi-ppid-{}", std::os::unix::process::parent_id());
        assert!(l.dir.ends_with(ppid), "{}", l.dir.display());
        for bad in [
            env(&[("PMI_RANK", "2"), ("PMI_SIZE", "2")]),
            env(&[("PMI_RANK", "x"), ("PMI_SIZE", "2")]),
            env(&[("PMI_RANK", "0")]),
            env(&[
                ("PMI_RANK", "0"),
                ("PMI_SIZE", "2"),
                ("NICEMU_OFI_JOB", "../x"),
            ]),
            env(&[
                ("PMI_RANK", "0"),
                ("PMI_SIZE", "2"),
                ("NICEMU_OFI_BOOTSTRAP_TIMEOUT_MS", "0"),
            ]),
        ] {
            assert!(from_env(&bad).is_err(), "{bad:?}");
        }
    }

    fn launch(dir: &Path, rank: u32, size: u32, ms: u64) -> Job {
        Job {
            rank,
            size,
            local: (size, rank),
            dir: dir.to_path_buf(),
            timeout: Duration::from_millis(ms),
        }
    }

    #[test]
    fn ranks_see_each_others_keys_after_a_fence_and_the_last_to_leave_cleans_up() {
        let dir = std::env::temp_dir().join(format!("nicemu-ofi-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ranks: Vec<_> = (0..3)
            .map(|r| {
                let l = launch(&dir, r, 3, 20_000);
                std::thread::spawn(move || {
                    let mut p = Rendezvous::new(l).unwrap();
                    p.put("k", &[r as u8, 0xff]).unwrap();
                    p.fence().unwrap();
                    let got: Vec<Vec<u8>> = (0..3).map(|o| p.get(o, "k").unwrap()).collect();
                    assert!(p.get((r + 1) % 3, "missing").is_err());
                    p.put("k", &[7 + r as u8]).unwrap();
                    p.fence().unwrap();
                    let again = p.get((r + 1) % 3, "k").unwrap();
                    p.leave();
                    (got, again)
                })
            })
            .collect();
        for (r, h) in ranks.into_iter().enumerate() {
            let (got, again) = h.join().unwrap();
            assert_eq!(got, vec![vec![0, 0xff], vec![1, 0xff], vec![2, 0xff]]);
            assert_eq!(again, vec![7 + ((r as u8 + 1) % 3)]);
        }
        assert!(!dir.exists(), "the directory outlived the exchange");
    }

    #[test]
    fn a_missing_rank_or_an_abort_ends_the_fence_with_an_error() {
        let dir = std::env::temp_dir().join(format!("nicemu-ofi-test-a-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut p = Rendezvous::new(launch(&dir, 0, 2, 50)).unwrap();
        let e = p.fence().unwrap_err().to_string();
        assert!(e.contains("ranks [1] did not arrive"), "{e}");
        let mut q = Rendezvous::new(launch(&dir, 1, 2, 20_000)).unwrap();
        q.fence().unwrap(); // epoch 1: rank 0 already arrived
        p.abort("no NIC");
        let e = q.fence().unwrap_err().to_string();
        assert!(e.contains("aborted: rank 0: no NIC"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
