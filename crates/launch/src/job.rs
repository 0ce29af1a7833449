//! Starting a job: N processes of one program on this host, each told how to reach the PMI
//! server (`PMI_PORT`, `PMI_ID`, `PMI_RANK`, `PMI_SIZE`) and, as a Cray launcher does, its
//! Gemini job credentials (`PMI_GNI_PTAG`, `PMI_GNI_COOKIE`, `PMI_GNI_DEV_ID`,
//! `PMI_GNI_LOC_ADDR`), their output forwarded line by line, the job ended as a whole when one
//! rank fails.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use crate::error::JobError;
pub use crate::forward::Sink;
use crate::hosts::{self, Host, Launcher};
use pmi::server::{Event, Limits, Server};

/// The most ranks one launch starts.
pub const MAX_RANKS: u32 = 4096;

/// How long the ranks of a failed job get to end by themselves (they see the failure as an
/// error from their PMI barrier) before they are killed.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// How often the launcher looks at its children.
const POLL: Duration = Duration::from_millis(20);

/// How long the launcher waits, after the last rank ended, for output still in flight (from
/// a process the rank started and left behind holding its pipes).
const DRAIN: Duration = Duration::from_secs(2);

/// What to launch.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The number of ranks.
    pub ranks: u32,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Extra environment for every rank (`NICEMU_NIC`, ...).
    pub env: Vec<(String, String)>,
    /// End the job (kill every rank) if it has not finished after this long.
    pub timeout: Option<Duration>,
    /// How long a failed job's other ranks get before they are killed.
    pub grace: Duration,
    /// Prefix each forwarded line with `[rank] `.
    pub label: bool,
    /// The PMI server's limits.
    pub limits: Limits,
    /// The hosts the ranks are placed on (empty: all on this host).
    pub hosts: Vec<Host>,
    /// How ranks on other hosts are started.
    pub launcher: Launcher,
    /// The address ranks on other hosts reach the PMI server at (default: this host's
    /// address on the route to the first other host).
    pub pmi_address: Option<IpAddr>,
    /// Rank 0 reads this process's standard input, as hydra forwards it to rank 0; the
    /// other ranks read an empty input. Off: every rank reads an empty input.
    pub stdin_to_rank0: bool,
}

impl JobSpec {
    /// `ranks` copies of `command`, no timeout, the default grace.
    pub fn new(ranks: u32, command: Vec<String>) -> Self {
        JobSpec {
            ranks,
            command,
            env: Vec::new(),
            timeout: None,
            grace: DEFAULT_GRACE,
            label: false,
            limits: Limits::default(),
            hosts: Vec::new(),
            launcher: Launcher::Ssh(vec!["ssh".into()]),
            pmi_address: None,
            stdin_to_rank0: false,
        }
    }
}

struct Rank {
    child: Child,
    status: Option<ExitStatus>,
    killed: bool,
}

fn spawn_forwarder(
    stream: impl Read + Send + 'static,
    sink: Sink,
    prefix: String,
    done: mpsc::Sender<()>,
) {
    let body = move || {
        crate::forward::forward(stream, &sink, &prefix);
        let _ = done.send(());
    };
    if let Err(e) = std::thread::Builder::new()
        .name("forward".into())
        .spawn(body)
    {
        tracing::warn!("cannot forward a rank's output: {e}");
    }
}

/// Run `spec` with the ranks' output (stdout and stderr, line by line) collected instead of
/// forwarded: the output, or the failure followed by the output.
pub fn run_captured(spec: &JobSpec) -> Result<String, String> {
    #[derive(Clone)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let buf = Shared(Arc::new(Mutex::new(Vec::new())));
    let out: Sink = Arc::new(Mutex::new(buf.clone()));
    let err: Sink = Arc::new(Mutex::new(buf.clone()));
    let r = run(spec, out, err);
    let text =
        String::from_utf8_lossy(&buf.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned();
    match r {
        Ok(()) => Ok(text),
        Err(e) => Err(format!("{e}\n{text}")),
    }
}

/// Run `spec` to the end. `Ok` when every rank exited with status 0.
pub fn run(spec: &JobSpec, out: Sink, err: Sink) -> Result<(), JobError> {
    if spec.ranks == 0 || spec.ranks > MAX_RANKS {
        return Err(JobError::Invalid(format!(
            "-n {}: the number of ranks must be between 1 and {MAX_RANKS}",
            spec.ranks
        )));
    }
    let Some((program, args)) = spec.command.split_first() else {
        return Err(JobError::Invalid("no program to launch".into()));
    };
    let placement = hosts::place(&spec.hosts, spec.ranks);
    let remote: Vec<bool> = spec
        .hosts
        .iter()
        .map(|h| !hosts::is_this_host(&h.name))
        .collect();
    // The address ranks on other hosts reach the PMI server at.
    let pmi_ip = match remote.iter().position(|&r| r) {
        None => None,
        Some(first) => Some(match spec.pmi_address {
            Some(ip) => ip,
            None => route_to(&spec.hosts[first].name)?,
        }),
    };
    let bind = match pmi_ip {
        Some(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        None => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let server =
        Server::start_on(bind, spec.ranks, spec.limits).map_err(|source| JobError::Start {
            what: "starting the PMI server".into(),
            source,
        })?;
    let (done_tx, done_rx) = mpsc::channel();
    let mut forwarders = 0;
    let mut ranks: Vec<Rank> = Vec::new();
    let started = Instant::now();
    let mut failure: Option<String> = None;
    let mut verdict = Verdict::default();

    let gni_credentials = pmi::gni::Credentials::from_lookup(|v| std::env::var(v).ok())
        .map_err(|e| JobError::Invalid(e.to_string()))?;
    for r in 0..spec.ranks {
        let host = placement.get(r as usize).copied();
        // This rank's index among the ranks of its host, and how many that host has.
        let (local_id, local_n) = match host {
            Some(h) => (
                placement[..r as usize].iter().filter(|&&x| x == h).count(),
                placement.iter().filter(|&&x| x == h).count(),
            ),
            None => (r as usize, spec.ranks as usize),
        };
        let on_other_host = host.is_some_and(|h| remote[h]);
        let mut env: Vec<(String, String)> = vec![
            (
                "PMI_PORT".into(),
                match pmi_ip {
                    Some(ip) if on_other_host => server.port_at(ip),
                    _ => server.port(),
                },
            ),
            ("PMI_ID".into(), r.to_string()),
            ("PMI_RANK".into(), r.to_string()),
            ("PMI_SIZE".into(), spec.ranks.to_string()),
            ("MPI_LOCALNRANKS".into(), local_n.to_string()),
            ("MPI_LOCALRANKID".into(), local_id.to_string()),
        ];
        // The Gemini job credentials as a Cray launcher hands them over (`pmi::gni`): the
        // rank's node is node `r` of the job's machine, its NIC address `r`.
        env.extend(gni_credentials.env(r));
        if let Some(h) = host {
            // Ranks that share a host name share memory; the others link over TCP.
            env.push(("NICEMU_HOST".into(), spec.hosts[h].name.clone()));
        }
        env.extend(spec.env.iter().cloned());
        // What is started: the rank's program, or on another host the launcher program
        // (which a failure to start names).
        let (mut cmd, what) = match host {
            Some(h) if on_other_host => {
                let argv = spec.launcher.argv(&spec.hosts[h].name, &env, &spec.command);
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]);
                let what = format!(
                    "on {} with the launcher program {}",
                    spec.hosts[h].name, argv[0]
                );
                (cmd, what)
            }
            _ => {
                let mut cmd = Command::new(program);
                cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
                (cmd, format!("({program})"))
            }
        };
        let stdin = if r == 0 && spec.stdin_to_rank0 {
            Stdio::inherit()
        } else {
            Stdio::null()
        };
        cmd.env_remove("PMI_FD")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match cmd.spawn() {
            Ok(mut child) => {
                let prefix = if spec.label {
                    format!("[{r}] ")
                } else {
                    String::new()
                };
                if let Some(o) = child.stdout.take() {
                    spawn_forwarder(o, Arc::clone(&out), prefix.clone(), done_tx.clone());
                    forwarders += 1;
                }
                if let Some(e) = child.stderr.take() {
                    spawn_forwarder(e, Arc::clone(&err), prefix, done_tx.clone());
                    forwarders += 1;
                }
                ranks.push(Rank {
                    child,
                    status: None,
                    killed: false,
                });
            }
            Err(e) => {
                failure = Some(format!("cannot start rank {r} {what}: {e}"));
                break;
            }
        }
    }
    drop(done_tx);

    let mut timed_out = false;
    let mut failed_at: Option<Instant> = failure.as_ref().map(|_| Instant::now());
    if let Some(why) = &failure {
        server.abort(why);
    }
    loop {
        for (r, rank) in ranks.iter_mut().enumerate() {
            if rank.status.is_some() {
                continue;
            }
            match rank.child.try_wait() {
                Ok(Some(status)) => {
                    rank.status = Some(status);
                    server.rank_exited(r as u32);
                    if !status.success() && failure.is_none() && !rank.killed {
                        failure = Some(format!("rank {r} ({program}) ended with {status}"));
                        verdict.cause_rank = Some(r as u32);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!("waiting for rank {r}: {e}");
                }
            }
        }
        if ranks.iter().all(|r| r.status.is_some()) {
            break;
        }
        match server.events().recv_timeout(POLL) {
            Ok(event) => verdict.note(event, &mut failure),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        if let Some(limit) = spec.timeout
            && !timed_out
            && started.elapsed() >= limit
        {
            timed_out = true;
            failed_at = Some(Instant::now());
            server.abort(&format!("the job did not finish within {limit:?}"));
            kill_all(&mut ranks);
        }
        if let Some(why) = &failure {
            let at = *failed_at.get_or_insert_with(|| {
                server.abort(why);
                Instant::now()
            });
            if at.elapsed() >= spec.grace {
                kill_all(&mut ranks);
            }
        }
    }
    // The output of the ranks, to its last line; a pipe held open by a process left behind
    // does not hold up the job for more than DRAIN.
    let drain_until = Instant::now() + DRAIN;
    for _ in 0..forwarders {
        let left = drain_until.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    if timed_out {
        return Err(JobError::Timeout(spec.timeout.unwrap_or_default()));
    }
    // Every rank has ended: once the server has read their last lines, every event is in.
    // A rank that called abort and then exited is seen by whichever comes first (its exit
    // status, its closed connection, the abort): the abort's message says most, then the
    // exit status, then the closed connection.
    server.wait_closed(DRAIN);
    while let Ok(event) = server.events().try_recv() {
        verdict.note(event, &mut failure);
    }
    // When the server aborted the job for a reason of its own (a rank's PMI connection
    // closed without finalize, or a rank called PMI abort) before the launcher did, that is
    // the cause, also when the launcher saw another rank's exit first: that rank failed
    // because the server told it the job was aborted.
    if let Some((why, lost)) = verdict.server_first.take()
        && failure.as_deref() != Some(why.as_str())
    {
        failure = Some(why);
        verdict.cause_rank = lost;
        verdict.lost = lost.is_some();
    }
    if let Some(r) = verdict.cause_rank {
        let rank = ranks.get(r as usize).filter(|rank| !rank.killed);
        if let Some(called) = verdict.abort_calls.remove(&r) {
            failure = Some(called);
        } else if let Some(status) = rank.and_then(|rank| rank.status)
            && verdict.lost
        {
            failure = Some(format!(
                "rank {r} ({program}) ended with {status} without PMI finalize"
            ));
        }
    }
    match failure {
        None => Ok(()),
        Some(cause) => Err(JobError::Failed {
            cause,
            ended: summary(&ranks, spec.ranks),
        }),
    }
}

/// This host's address on the route to `host` (no packet is sent: a UDP socket is only
/// connected), the address ranks there reach the PMI server at.
fn route_to(host: &str) -> Result<IpAddr, JobError> {
    let cannot = |why: String| {
        JobError::Invalid(format!(
            "cannot tell which address ranks on {host} reach this launcher at ({why}); \
             give --pmi-address"
        ))
    };
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| cannot(e.to_string()))?;
    sock.connect((host, 9)).map_err(|e| cannot(e.to_string()))?;
    let ip = sock.local_addr().map_err(|e| cannot(e.to_string()))?.ip();
    if ip.is_loopback() || ip.is_unspecified() {
        return Err(cannot(format!("the route to it leaves from {ip}")));
    }
    Ok(ip)
}

/// What the launcher learnt about why the job failed.
#[derive(Default)]
struct Verdict {
    /// The rank the first failure was seen on.
    cause_rank: Option<u32>,
    /// Whether that failure was its PMI connection ending without finalize.
    lost: bool,
    /// The server's abort (it aborts once): its message, and the rank whose connection
    /// ending without finalize was the reason, if that was it.
    server_first: Option<(String, Option<u32>)>,
    /// The ranks that called PMI abort, and why.
    abort_calls: HashMap<u32, String>,
}

impl Verdict {
    /// Take in a server event: the first abort is the job's failure, unless one was seen
    /// already.
    fn note(&mut self, event: Event, failure: &mut Option<String>) {
        match event {
            Event::Aborted { why, lost } => {
                self.server_first = Some((why.clone(), lost));
                if failure.is_none() {
                    *failure = Some(why);
                    self.cause_rank = lost;
                    self.lost = lost.is_some();
                }
            }
            Event::AbortCalled { rank: Some(r), why } => {
                self.abort_calls.entry(r).or_insert(why);
            }
            _ => {}
        }
    }
}

fn kill_all(ranks: &mut [Rank]) {
    for rank in ranks.iter_mut().filter(|r| r.status.is_none() && !r.killed) {
        // The rank may have exited since the last look; its status is collected next poll.
        let _ = rank.child.kill();
        rank.killed = true;
    }
}

/// How the ranks ended, for the error message.
fn summary(ranks: &[Rank], size: u32) -> String {
    let killed: Vec<String> = ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.killed)
        .map(|(i, _)| i.to_string())
        .collect();
    let failed: Vec<String> = ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.killed && r.status.is_some_and(|s| !s.success()))
        .map(|(i, r)| {
            format!(
                "{i} ({})",
                r.status.map(|s| s.to_string()).unwrap_or_default()
            )
        })
        .collect();
    let mut parts = Vec::new();
    if !failed.is_empty() {
        parts.push(format!("failed: rank {}", failed.join(", ")));
    }
    if !killed.is_empty() {
        parts.push(format!(
            "killed by the launcher: rank {}",
            killed.join(", ")
        ));
    }
    if ranks.len() < size as usize {
        parts.push(format!("{} of {size} ranks were started", ranks.len()));
    }
    if parts.is_empty() {
        "the other ranks ended by themselves".into()
    } else {
        parts.join("; ")
    }
}
