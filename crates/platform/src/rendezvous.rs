//! How the processes of a job find each other's NICs when the NIC is hosted by a library the
//! application loads (the libfabric provider `libnicemu-fi.so`, the uGNI library
//! `libugni.so.0`) rather than by nicemu's own MPI: a key-value exchange through files in a
//! rendezvous directory, good for exactly what joining the fabric between processes needs
//! (each rank's host name, shared-memory segment and TCP address, [`crate::process::join`]).
//!
//! Why files: Open MPI's `mpirun` (4.1: ORTE with PMIx 4) gives its ranks no PMI-1 server,
//! and PMIx is Open MPI's own connection to its daemon; under a PMI-1 launcher the
//! application itself may hold the one PMI connection. The endpoint names themselves are
//! exchanged by the application (Open MPI's MTL publishes `fi_getname` through its modex,
//! its ugni BTL the NIC address and instance id); the library only needs the fabric under
//! them, once per process.
//!
//! The job is described by the environment ([`Launch::from_lookup`]), under variables named
//! after the library (`NICEMU_OFI_*` for the provider, `NICEMU_UGNI_*` for libugni); a rank
//! whose job has one process does not use this module. Each [`Rendezvous::fence`] writes this rank's keys to
//! `<dir>/<epoch>.<rank>` (written aside, then renamed: a reader never sees half a file) and
//! waits until every rank's file of that epoch exists. [`Rendezvous::abort`] leaves
//! `<dir>/abort` with the reason, which ends every other rank's wait with it. After the
//! exchange every rank leaves `<dir>/left.<rank>`; a rank that finds all of them there knows
//! nobody reads the directory any more and removes it.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pmi::Pmi;

use crate::process::HostError;

type Result<T> = std::result::Result<T, HostError>;

fn launch_error(msg: String) -> HostError {
    HostError::Launch(msg)
}

/// The default time a fence waits for the slowest rank.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A rank of a job with more than one process, as the launcher's environment describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
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

/// Rank and size variables after the library's own (`NICEMU_<NAME>_RANK`/`_SIZE`), in the
/// order they are looked for: Open MPI's (`mpirun`, also its `OMPI_MCA_*` job id), then PMI-1
/// launchers' (MPICH's hydra, Slurm, `nicemu run`).
const RANK_SIZE: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
];

/// Local size and rank variables (informational).
const LOCAL: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("MPI_LOCALNRANKS", "MPI_LOCALRANKID"),
];

fn number(lookup: &impl Fn(&str) -> Option<String>, var: &str) -> Result<Option<u32>> {
    lookup(var)
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| launch_error(format!("{var}={v:?}: expected a number")))
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

impl Launch {
    /// The job this process belongs to, as the variables seen through `lookup` describe it
    /// (`std::env::var` in a real process), for the library `name` (`ofi`, `ugni`: `NAME`
    /// below is it in capitals); `None` when it runs alone (no launcher variables, or a job
    /// of one process).
    ///
    /// - rank and size: `NICEMU_NAME_RANK`/`NICEMU_NAME_SIZE`, else Open MPI's
    ///   `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`, else `PMI_RANK`/`PMI_SIZE`;
    /// - job id: `NICEMU_NAME_JOB`, else `PMIX_NAMESPACE`, else `OMPI_MCA_ess_base_jobid`,
    ///   else `ppid-<parent pid>` (the ranks of one host are children of one launcher
    ///   daemon: Open MPI's `orted`/`mpirun`, hydra's proxy, `nicemu run`);
    /// - directory: `$NICEMU_NAME_RENDEZVOUS/nicemu-name-<job>` (must be shared by all hosts
    ///   of a job that spans several), else Open MPI's job session directory
    ///   `$PMIX_SERVER_TMPDIR` (removed by `mpirun` at the end of the job), else the
    ///   temporary directory;
    /// - `NICEMU_NAME_BOOTSTRAP_TIMEOUT_MS`: how long a fence waits (default 60 s).
    pub fn from_lookup(
        name: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Launch>> {
        let upper = name.to_ascii_uppercase();
        let var = |what: &str| format!("NICEMU_{upper}_{what}");
        let own = (var("RANK"), var("SIZE"));
        let pairs =
            std::iter::once((own.0.as_str(), own.1.as_str())).chain(RANK_SIZE.iter().copied());
        let mut found = None;
        for (r, s) in pairs {
            match (number(&lookup, r)?, number(&lookup, s)?) {
                (Some(rank), Some(size)) => {
                    found = Some((rank, size, s.to_owned()));
                    break;
                }
                (None, None) => {}
                _ => return Err(launch_error(format!("{r} and {s} must be set together"))),
            }
        }
        let Some((rank, size, size_var)) = found else {
            return Ok(None);
        };
        if size == 0 || rank >= size {
            return Err(launch_error(format!(
                "rank {rank} is not below the job size {size} ({size_var})"
            )));
        }
        if size == 1 {
            return Ok(None);
        }
        let job = [
            var("JOB"),
            "PMIX_NAMESPACE".into(),
            "OMPI_MCA_ess_base_jobid".into(),
        ]
        .into_iter()
        .find_map(|v| lookup(&v).map(|j| (v, j.trim().to_owned())));
        let job = match job {
            Some((var, j)) if !sane(&j) => {
                return Err(launch_error(format!(
                    "{var}={j:?}: a job id is letters, digits, '-', '_', '.' or '@'"
                )));
            }
            Some((_, j)) => j,
            None => format!("ppid-{}", std::os::unix::process::parent_id()),
        };
        let base = lookup(&var("RENDEZVOUS"))
            .or_else(|| lookup("PMIX_SERVER_TMPDIR"))
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let tvar = var("BOOTSTRAP_TIMEOUT_MS");
        let timeout = match lookup(&tvar) {
            None => DEFAULT_TIMEOUT,
            Some(v) => Duration::from_millis(
                v.trim()
                    .parse()
                    .ok()
                    .filter(|&ms: &u64| ms > 0)
                    .ok_or_else(|| {
                        launch_error(format!("{tvar}={v:?}: expected milliseconds > 0"))
                    })?,
            ),
        };
        let mut local = (1, 0);
        for (s, r) in LOCAL {
            if let (Some(s), Some(r)) = (number(&lookup, s)?, number(&lookup, r)?) {
                local = (s, r);
                break;
            }
        }
        Ok(Some(Launch {
            rank,
            size,
            local,
            dir: base.join(format!("nicemu-{}-{job}", name.to_ascii_lowercase())),
            timeout,
        }))
    }
}

/// The exchange of one rank (a [`Pmi`] for [`crate::process::join`]).
pub struct Rendezvous {
    launch: Launch,
    /// Everything this rank put (each fence publishes all of it).
    mine: Vec<(String, Vec<u8>)>,
    /// Fences passed.
    epoch: u32,
    /// Other ranks' keys as of the last fence.
    theirs: HashMap<u32, HashMap<String, Vec<u8>>>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> pmi::Error {
    pmi::Error::Failed(format!("rendezvous: {what} {}: {e}", path.display()))
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
    pub fn new(launch: Launch) -> Result<Rendezvous> {
        std::fs::create_dir_all(&launch.dir)
            .map_err(|e| launch_error(format!("creating {}: {e}", launch.dir.display())))?;
        Ok(Rendezvous {
            launch,
            mine: Vec::new(),
            epoch: 0,
            theirs: HashMap::new(),
        })
    }

    fn file(&self, epoch: u32, rank: u32) -> PathBuf {
        self.launch.dir.join(format!("{epoch}.{rank}"))
    }

    fn abort_file(&self) -> PathBuf {
        self.launch.dir.join("abort")
    }

    /// The exchange is over for this rank: mark it, and remove the directory when every rank
    /// has.
    pub fn leave(self) {
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
    fn put(&mut self, key: &str, value: &[u8]) -> pmi::Result<()> {
        if key.is_empty() || key.contains(['=', '\n']) {
            return Err(pmi::Error::Failed(format!("rendezvous: bad key {key:?}")));
        }
        self.mine.retain(|(k, _)| k != key);
        self.mine.push((key.to_owned(), value.to_vec()));
        Ok(())
    }
    fn fence(&mut self) -> pmi::Result<()> {
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
                return Err(pmi::Error::Failed(format!("the job was aborted: {why}")));
            }
            if start.elapsed() > self.launch.timeout {
                return Err(pmi::Error::Failed(format!(
                    "rendezvous in {}: ranks {missing:?} did not arrive within {:?} (do all \
                     ranks open the NIC? NICEMU_*_BOOTSTRAP_TIMEOUT_MS)",
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
    fn get(&mut self, rank: u32, key: &str) -> pmi::Result<Vec<u8>> {
        if !self.theirs.contains_key(&rank) {
            if rank >= self.launch.size || self.epoch == 0 {
                return Err(pmi::Error::Failed(format!(
                    "rendezvous: no value {key} of rank {rank}"
                )));
            }
            let path = self.file(self.epoch, rank);
            let text = std::fs::read_to_string(&path).map_err(|e| io("reading", &path, e))?;
            let kv = parse(&text).ok_or_else(|| {
                pmi::Error::Failed(format!("rendezvous: {} is malformed", path.display()))
            })?;
            self.theirs.insert(rank, kv);
        }
        self.theirs
            .get(&rank)
            .and_then(|kv| kv.get(key))
            .cloned()
            .ok_or_else(|| {
                pmi::Error::Failed(format!("rendezvous: rank {rank} published no {key}"))
            })
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn from_env(name: &str, e: &HashMap<String, String>) -> Result<Option<Launch>> {
        Launch::from_lookup(name, |v| e.get(v).cloned())
    }

    #[test]
    fn the_launchers_variables_describe_the_job() {
        assert_eq!(from_env("ofi", &env(&[])).unwrap(), None);
        let one = env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1")]);
        assert_eq!(
            from_env("ofi", &one).unwrap(),
            None,
            "a singleton runs alone"
        );
        let ompi = env(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("PMIX_NAMESPACE", "1304690689"),
            ("PMIX_SERVER_TMPDIR", "/tmp/ompi.vm.0/pid.8506"),
        ]);
        let l = from_env("ofi", &ompi).unwrap().unwrap();
        assert_eq!((l.rank, l.size, l.local), (2, 4, (4, 2)));
        assert_eq!(
            l.dir,
            Path::new("/tmp/ompi.vm.0/pid.8506/nicemu-ofi-1304690689")
        );
        assert_eq!(l.timeout, DEFAULT_TIMEOUT);
        let hydra = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]);
        let l = from_env("ofi", &hydra).unwrap().unwrap();
        let ppid = format!("nicemu-ofi-ppid-{}", std::os::unix::process::parent_id());
        assert!(l.dir.ends_with(ppid), "{}", l.dir.display());
        // Each library has its own variables and directory.
        let ugni = env(&[
            ("NICEMU_UGNI_RANK", "1"),
            ("NICEMU_UGNI_SIZE", "2"),
            ("NICEMU_UGNI_JOB", "j7"),
            ("NICEMU_UGNI_RENDEZVOUS", "/shared"),
        ]);
        let l = from_env("ugni", &ugni).unwrap().unwrap();
        assert_eq!((l.rank, l.size), (1, 2));
        assert_eq!(l.dir, Path::new("/shared/nicemu-ugni-j7"));
        assert_eq!(from_env("ofi", &ugni).unwrap(), None);
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
            assert!(from_env("ofi", &bad).is_err(), "{bad:?}");
        }
    }

    fn launch(dir: &Path, rank: u32, size: u32, ms: u64) -> Launch {
        Launch {
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
