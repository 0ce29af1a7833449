//! A [`Pmi`] over the PMI-1 wire protocol, for a process started by a PMI launcher (hydra's
//! `mpiexec`, `nicemu run`).
//!
//! **Reaching the launcher.** `PMI_FD` (an inherited socket, hydra's default) or `PMI_PORT`
//! (`host:port`, hydra's `-pmi-port` and `nicemu run`). With `PMI_PORT` and `PMI_ID`, the
//! client first sends `cmd=initack pmiid=<id>` and learns its rank and size from the
//! `cmd=set` lines of the reply; otherwise `PMI_RANK` and `PMI_SIZE` say them.
//!
//! **Session.** `init` (version 1.1), `get_maxes`, `get_my_kvsname`, a `get` of
//! `PMI_process_mapping` for [`Pmi::local`]; then `put` / `barrier_in` / `get`; `finalize`
//! when the client is dropped; `abort` from [`Pmi::abort`].
//!
//! **Keys and values.** The trait's keys are per rank, PMI-1's are job-wide: rank `r`'s key
//! `k` is stored as `k@r`. Values are bytes, PMI-1 values are text without spaces, at most
//! `vallen_max` long inside a request line of at most 1024 bytes: a value is sent as `x` and
//! its hex digits when that fits, otherwise as `m<n>` under `k@r` and `n` chunks of hex digits
//! under `k@r#0` … `k@r#<n-1>`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::Pmi;
use crate::launch::{Endpoint, Launch};
use crate::mapping::local_of;
use crate::wire::{self, MAX_REQUEST_LINE, Message};
use crate::{Error, Result};

/// How long connecting to `PMI_PORT` may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`Drop`] waits for `finalize_ack` before closing anyway.
const FINALIZE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most chunks one value may be split into (a bound on what a `get` will fetch).
const MAX_CHUNKS: usize = 1 << 16;

/// The PMI of this process: `Some` when a PMI launcher started it (see [`Launch`]), `None`
/// for a singleton. Connects and runs the init handshake.
pub fn from_env() -> Result<Option<Box<dyn Pmi>>> {
    match Launch::from_lookup(|v| std::env::var(v).ok())? {
        None => Ok(None),
        Some(launch) => Ok(Some(Box::new(WireClient::connect(&launch)?))),
    }
}

/// The socket to the server.
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

struct Conn {
    reader: BufReader<Stream>,
    writer: Stream,
}

fn pmi_err(what: impl std::fmt::Display) -> Error {
    Error::Failed(format!("PMI: {what}"))
}

impl Conn {
    fn send(&mut self, msg: &Message) -> Result<()> {
        let line = msg.format().map_err(pmi_err)?;
        self.writer
            .write_all(line.as_bytes())
            .and_then(|()| self.writer.flush())
            .map_err(|e| pmi_err(format_args!("sending {:?} to the launcher: {e}", msg.cmd())))
    }

    fn recv(&mut self) -> Result<Message> {
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(wire::MAX_READ_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| pmi_err(format_args!("reading from the launcher: {e}")))?;
        if n == 0 {
            return Err(pmi_err(
                "the launcher closed the connection (the job is ending or the launcher died)",
            ));
        }
        if line.last() != Some(&b'\n') && line.len() > wire::MAX_READ_LINE {
            return Err(pmi_err(format_args!(
                "the launcher sent a line longer than {} bytes",
                wire::MAX_READ_LINE
            )));
        }
        Message::parse(&line).map_err(|e| pmi_err(format_args!("bad reply from the launcher: {e}")))
    }

    /// Send `msg`, read the reply, check it is `expect` with `rc` 0.
    fn call(&mut self, msg: &Message, expect: &str) -> Result<Message> {
        self.send(msg)?;
        let reply = self.recv()?;
        check(&reply, msg.cmd(), expect)?;
        Ok(reply)
    }
}

fn check(reply: &Message, sent: &str, expect: &str) -> Result<()> {
    if reply.cmd() != expect {
        return Err(pmi_err(format_args!(
            "expected cmd={expect} in reply to cmd={sent}, got {reply}"
        )));
    }
    let rc = reply.rc().map_err(pmi_err)?;
    if rc != 0 {
        let msg = reply.get("msg").unwrap_or("(no message)");
        // `nicemu run`'s server says why a job was aborted, spaces squeezed to `_`.
        if let Some(why) = msg.strip_prefix("job_aborted:") {
            return Err(pmi_err(format_args!(
                "cmd={sent}: the job was aborted: {}",
                why.replace('_', " ")
            )));
        }
        return Err(pmi_err(format_args!("cmd={sent} failed: rc={rc} {msg}")));
    }
    Ok(())
}

fn field<T: std::str::FromStr>(reply: &Message, key: &str) -> Result<T> {
    let v = reply
        .get(key)
        .ok_or_else(|| pmi_err(format_args!("reply {reply} has no {key}=")))?;
    v.parse()
        .map_err(|_| pmi_err(format_args!("reply {reply}: {key}={v:?} is not a number")))
}

/// The server's limits (`cmd=maxes`).
#[derive(Clone, Copy, Debug)]
struct Maxes {
    keylen: usize,
    vallen: usize,
}

/// A [`Pmi`] speaking PMI-1 to the launcher.
pub struct WireClient {
    conn: Mutex<Conn>,
    rank: u32,
    size: u32,
    local: (u32, u32),
    kvsname: String,
    maxes: Maxes,
    aborted: Mutex<Option<String>>,
    /// `cmd=finalize` was sent (at `MPI_Finalize`, else on drop).
    finalized: bool,
}

impl WireClient {
    /// Connect to the launcher described by `launch` and run the init handshake.
    pub fn connect(launch: &Launch) -> Result<WireClient> {
        let stream = match &launch.endpoint {
            Endpoint::Fd(fd) => Stream::Unix(crate::fd::adopt_socket(*fd).map_err(pmi_err)?),
            Endpoint::Port(addr) => Stream::Tcp(connect_tcp(addr)?),
        };
        Self::handshake(stream, launch)
    }

    /// The init handshake over `stream`.
    fn handshake(stream: Stream, launch: &Launch) -> Result<WireClient> {
        let reader = BufReader::new(
            stream
                .try_clone()
                .map_err(|e| pmi_err(format_args!("cloning the PMI socket: {e}")))?,
        );
        let mut conn = Conn {
            reader,
            writer: stream,
        };
        let (mut rank, mut size) = (launch.rank, launch.size);
        if let (Endpoint::Port(_), Some(id)) = (&launch.endpoint, launch.id) {
            let (r, s) = initack(&mut conn, id)?;
            for (var, env, got) in [("PMI_RANK", rank, r), ("PMI_SIZE", size, s)] {
                if let Some(e) = env
                    && e != got
                {
                    return Err(pmi_err(format_args!(
                        "{var}={e} but the launcher says {got} for PMI_ID={id}"
                    )));
                }
            }
            (rank, size) = (Some(r), Some(s));
        }
        let (Some(rank), Some(size)) = (rank, size) else {
            return Err(pmi_err("the launcher gave no rank and size"));
        };
        if size == 0 || rank >= size {
            return Err(pmi_err(format_args!(
                "the launcher gave rank {rank} of a job of {size}"
            )));
        }
        // hydra 4.0.2 reads these two fields by position: version first.
        let init = Message::new("init")
            .with("pmi_version", 1)
            .with("pmi_subversion", 1);
        let reply = conn.call(&init, "response_to_init")?;
        if reply.get("pmi_version") != Some("1") {
            return Err(pmi_err(format_args!(
                "the launcher speaks another PMI version: {reply}"
            )));
        }
        let reply = conn.call(&Message::new("get_maxes"), "maxes")?;
        let maxes = Maxes {
            keylen: field(&reply, "keylen_max")?,
            vallen: field(&reply, "vallen_max")?,
        };
        let reply = conn.call(&Message::new("get_my_kvsname"), "my_kvsname")?;
        let kvsname = reply
            .get("kvsname")
            .filter(|k| !k.is_empty())
            .ok_or_else(|| pmi_err(format_args!("reply {reply} has no kvsname")))?
            .to_string();
        let get = Message::new("get")
            .with("kvsname", &kvsname)
            .with("key", "PMI_process_mapping");
        conn.send(&get)?;
        let reply = conn.recv()?;
        let mapping = match check(&reply, "get", "get_result") {
            Ok(()) => reply.get("value").and_then(|m| local_of(m, rank, size)),
            // A launcher that publishes no mapping answers with rc != 0.
            Err(_) if reply.cmd() == "get_result" => None,
            Err(e) => return Err(e),
        };
        let local = mapping.or(launch.local).unwrap_or((size, rank));
        tracing::debug!(rank, size, ?local, kvsname, "PMI-1 client initialised");
        Ok(WireClient {
            conn: Mutex::new(conn),
            rank,
            size,
            local,
            kvsname,
            maxes,
            aborted: Mutex::new(None),
            finalized: false,
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_aborted(&self, why: &str) {
        let mut a = self.aborted.lock().unwrap_or_else(PoisonError::into_inner);
        if a.is_none() {
            *a = Some(why.to_string());
        }
    }

    fn fail_if_aborted(&self) -> Result<()> {
        match self.aborted() {
            Some(why) => Err(pmi_err(format_args!("the job was aborted: {why}"))),
            None => Ok(()),
        }
    }

    fn wire_key(&self, rank: u32, key: &str) -> Result<String> {
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_graphic() && !matches!(c, '=' | '@' | '#'))
        {
            return Err(pmi_err(format_args!(
                "key {key:?}: keys are printable ASCII without spaces, '=', '@' or '#'"
            )));
        }
        Ok(format!("{key}@{rank}"))
    }

    fn check_key_len(&self, key: &str) -> Result<()> {
        // keylen_max counts C's terminating NUL.
        if key.len() >= self.maxes.keylen {
            return Err(pmi_err(format_args!(
                "key {key:?} is {} bytes; the launcher takes keys below {}",
                key.len(),
                self.maxes.keylen
            )));
        }
        Ok(())
    }

    fn put_raw(&self, key: &str, value: &str) -> Result<()> {
        let msg = Message::new("put")
            .with("kvsname", &self.kvsname)
            .with("key", key)
            .with("value", value);
        self.conn().call(&msg, "put_result").map(drop)
    }

    fn get_raw(&self, key: &str) -> Result<std::result::Result<String, String>> {
        let msg = Message::new("get")
            .with("kvsname", &self.kvsname)
            .with("key", key);
        let mut conn = self.conn();
        conn.send(&msg)?;
        let reply = conn.recv()?;
        if reply.cmd() != "get_result" {
            return Err(pmi_err(format_args!(
                "expected cmd=get_result in reply to cmd=get, got {reply}"
            )));
        }
        if reply.rc().map_err(pmi_err)? != 0 {
            return Ok(Err(reply.get("msg").unwrap_or("not found").to_string()));
        }
        Ok(Ok(reply.get("value").unwrap_or_default().to_string()))
    }

    /// The longest value text one `put` of `key` can carry.
    fn value_room(&self, key: &str) -> usize {
        let line = format!("cmd=put kvsname={} key={key} value=\n", self.kvsname).len();
        MAX_REQUEST_LINE
            .saturating_sub(line)
            .min(self.maxes.vallen.saturating_sub(1))
    }
}

fn connect_tcp(addr: &str) -> Result<TcpStream> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| pmi_err(format_args!("PMI_PORT={addr}: cannot resolve: {e}")))?
        .collect();
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                // Best effort: a lost Nagle setting only delays the small request lines.
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(pmi_err(format_args!(
        "PMI_PORT={addr}: cannot connect to the launcher: {}",
        last.map_or("no address".to_string(), |e| e.to_string())
    )))
}

/// `cmd=initack pmiid=<id>`; the reply is `cmd=initack` then `cmd=set` lines giving `size`,
/// `rank` and `debug` (hydra's `-pmi-port` mode).
fn initack(conn: &mut Conn, id: u32) -> Result<(u32, u32)> {
    conn.call(&Message::new("initack").with("pmiid", id), "initack")?;
    let (mut rank, mut size, mut debug) = (None, None, false);
    while rank.is_none() || size.is_none() || !debug {
        let set = conn.recv()?;
        check(&set, "initack", "set")?;
        if set.get("size").is_some() {
            size = Some(field::<u32>(&set, "size")?);
        } else if set.get("rank").is_some() {
            rank = Some(field::<u32>(&set, "rank")?);
        } else if set.get("debug").is_some() {
            debug = true;
        } else {
            return Err(pmi_err(format_args!("unexpected {set} after initack")));
        }
    }
    Ok((rank.unwrap_or_default(), size.unwrap_or_default()))
}

impl Pmi for WireClient {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn local(&self) -> (u32, u32) {
        self.local
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.fail_if_aborted()?;
        let key = self.wire_key(self.rank, key)?;
        let hex = wire::hex_encode(value);
        // Room for the largest chunk key, `key#<MAX_CHUNKS>`.
        let chunk_key = format!("{key}#{MAX_CHUNKS}");
        self.check_key_len(&chunk_key)?;
        if hex.len() < self.value_room(&key) {
            return self.put_raw(&key, &format!("x{hex}"));
        }
        let room = self.value_room(&chunk_key);
        if room < 2 {
            return Err(pmi_err(format_args!(
                "key {key:?}: no room for a value in a {MAX_REQUEST_LINE}-byte line"
            )));
        }
        let chunks: Vec<&str> = hex
            .as_bytes()
            .chunks(room)
            // Hex digits are ASCII: every split is at a character boundary.
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        if chunks.len() > MAX_CHUNKS {
            return Err(pmi_err(format_args!(
                "key {key:?}: a value of {} bytes needs more than {MAX_CHUNKS} chunks",
                value.len()
            )));
        }
        for (i, chunk) in chunks.iter().enumerate() {
            self.put_raw(&format!("{key}#{i}"), chunk)?;
        }
        self.put_raw(&key, &format!("m{}", chunks.len()))
    }

    fn fence(&mut self) -> Result<()> {
        self.fail_if_aborted()?;
        let res = self.conn().call(&Message::new("barrier_in"), "barrier_out");
        if let Err(e) = &res {
            self.set_aborted(&e.to_string());
        }
        res.map(drop)
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<Vec<u8>> {
        self.fail_if_aborted()?;
        if rank >= self.size {
            return Err(Error::Rank {
                rank: rank.into(),
                size: self.size as usize,
            });
        }
        let wkey = self.wire_key(rank, key)?;
        let head = self.get_raw(&wkey)?.map_err(|why| {
            pmi_err(format_args!(
                "rank {rank} published no {key:?} (launcher: {why})"
            ))
        })?;
        let bad = |what: &str| {
            pmi_err(format_args!(
                "rank {rank}'s {key:?} is not a value of this client ({what}): {head:?}"
            ))
        };
        let hex = if let Some(h) = head.strip_prefix('x') {
            h.to_string()
        } else if let Some(n) = head.strip_prefix('m') {
            let n: usize = n.parse().map_err(|_| bad("bad chunk count"))?;
            if n > MAX_CHUNKS {
                return Err(bad("too many chunks"));
            }
            let mut hex = String::new();
            for i in 0..n {
                let part = self
                    .get_raw(&format!("{wkey}#{i}"))?
                    .map_err(|why| bad(&format!("chunk {i} missing: {why}")))?;
                hex.push_str(&part);
            }
            hex
        } else {
            return Err(bad("unknown encoding"));
        };
        wire::hex_decode(&hex).ok_or_else(|| bad("not hex"))
    }

    fn abort(&self, why: &str) {
        self.set_aborted(why);
        eprintln!("PMI abort from rank {}: {why}", self.rank);
        let msg = Message::new("abort")
            .with("exitcode", 1)
            .with("msg", wire::squeeze(why));
        // The launcher ends the job; nothing to wait for, and a broken socket leaves no
        // better way to tell it.
        let _ = self.conn().send(&msg);
    }

    fn aborted(&self) -> Option<String> {
        self.aborted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn finalize(&mut self) {
        self.finalize_once();
    }
}

impl WireClient {
    /// Send `cmd=finalize` once (bounded wait for the answer), unless the job was aborted.
    fn finalize_once(&mut self) {
        if self.finalized || self.aborted().is_some() {
            return;
        }
        self.finalized = true;
        let mut conn = self.conn();
        // Bounded: a launcher that never answers must not hang the exit.
        let _ = conn
            .reader
            .get_ref()
            .set_read_timeout(Some(FINALIZE_TIMEOUT));
        if let Err(e) = conn.call(&Message::new("finalize"), "finalize_ack") {
            tracing::warn!("PMI finalize: {e}");
        }
    }
}

impl Drop for WireClient {
    fn drop(&mut self) {
        self.finalize_once();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Launch::from_lookup(|k| map.get(k).cloned())
    }

    fn config_var(r: Result<Option<Launch>>) -> String {
        match r {
            Err(Error::Config { var, .. }) => var,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn singleton_and_good_launches() {
        assert_eq!(launch(&[]).unwrap(), None);
        let l = launch(&[("PMI_FD", "7"), ("PMI_RANK", "2"), ("PMI_SIZE", "4")])
            .unwrap()
            .unwrap();
        assert_eq!(l.endpoint, Endpoint::Fd(7));
        assert_eq!((l.rank, l.size, l.local), (Some(2), Some(4), None));
        let l = launch(&[
            ("PMI_PORT", "127.0.0.1:4000"),
            ("PMI_ID", "1"),
            ("MPI_LOCALNRANKS", "2"),
            ("MPI_LOCALRANKID", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(l.endpoint, Endpoint::Port("127.0.0.1:4000".into()));
        assert_eq!((l.id, l.rank, l.local), (Some(1), None, Some((2, 1))));
    }

    #[test]
    fn bad_launch_variables_name_the_variable() {
        let fd = [("PMI_FD", "7"), ("PMI_SIZE", "4")];
        assert_eq!(
            config_var(launch(&[fd[0], fd[1], ("PMI_RANK", "abc")])),
            "PMI_RANK"
        );
        assert_eq!(
            config_var(launch(&[fd[0], fd[1], ("PMI_RANK", "-1")])),
            "PMI_RANK"
        );
        assert_eq!(
            config_var(launch(&[fd[0], fd[1], ("PMI_RANK", "4")])),
            "PMI_RANK"
        );
        assert_eq!(config_var(launch(&[fd[0], fd[1]])), "PMI_RANK");
        assert_eq!(
            config_var(launch(&[fd[0], ("PMI_RANK", "0"), ("PMI_SIZE", "0")])),
            "PMI_SIZE"
        );
        assert_eq!(
            config_var(launch(&[
                ("PMI_FD", "x"),
                ("PMI_RANK", "0"),
                ("PMI_SIZE", "1")
            ])),
            "PMI_FD"
        );
        for port in ["4000", "host:", ":4000", "h:0", "h:99999", "h:p"] {
            assert_eq!(
                config_var(launch(&[("PMI_PORT", port), ("PMI_ID", "0")])),
                "PMI_PORT",
                "{port}"
            );
        }
        // A rank without a way to reach the launcher is not a singleton.
        let e = launch(&[("PMI_RANK", "0")]).unwrap_err().to_string();
        assert!(e.contains("PMI_RANK") && e.contains("PMI_FD"), "{e}");
        assert_eq!(
            config_var(launch(&[
                ("PMI_PORT", "h:1"),
                ("PMI_ID", "0"),
                ("MPI_LOCALNRANKS", "2"),
                ("MPI_LOCALRANKID", "2"),
            ])),
            "MPI_LOCALRANKID"
        );
    }

    #[test]
    fn an_fd_that_is_no_socket_is_refused() {
        // Standard streams and closed descriptors are refused without being taken.
        assert!(crate::fd::adopt_socket(1).is_err());
        let e = crate::fd::adopt_socket(1 << 20).unwrap_err();
        assert!(e.contains("not an open descriptor"), "{e}");
    }

    /// A client over a socket pair whose other end answers each request line with the next
    /// of `replies` (a `None` closes the connection).
    fn scripted(launch: &Launch, replies: Vec<Option<&'static str>>) -> Result<WireClient> {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut reader = BufReader::new(theirs.try_clone().unwrap());
            let mut writer = theirs;
            for reply in replies {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                match reply {
                    Some(r) => writer.write_all(r.as_bytes()).unwrap(),
                    None => return,
                }
            }
            // Answer the finalize of a client that got through.
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = writer.write_all(b"cmd=finalize_ack\n");
        });
        let res = WireClient::handshake(Stream::Unix(ours), launch);
        if res.is_err() {
            server.join().unwrap();
        }
        res
    }

    fn fd_launch() -> Launch {
        Launch {
            endpoint: Endpoint::Fd(99),
            rank: Some(1),
            size: Some(2),
            id: None,
            local: Some((2, 1)),
        }
    }

    const INIT: &str = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n";
    const MAXES: &str = "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n";
    const KVS: &str = "cmd=my_kvsname kvsname=kvs_1_0\n";

    #[test]
    fn handshake_with_a_hydra_like_server() {
        let c = scripted(
            &fd_launch(),
            vec![
                Some(INIT),
                Some(MAXES),
                Some(KVS),
                Some("cmd=get_result rc=0 msg=success value=(vector,(0,2,1))\n"),
            ],
        )
        .unwrap();
        assert_eq!((c.rank(), c.size()), (1, 2));
        // From the mapping (two nodes of one rank), not from MPI_LOCAL*.
        assert_eq!(c.local(), (1, 0));
        // No mapping published: the MPI_LOCAL* fallback.
        let c = scripted(
            &fd_launch(),
            vec![
                Some(INIT),
                Some(MAXES),
                Some(KVS),
                Some("cmd=get_result rc=-1 msg=key_not_found value=unknown\n"),
            ],
        )
        .unwrap();
        assert_eq!(c.local(), (2, 1));
    }

    #[test]
    fn broken_servers_give_errors() {
        let cases: Vec<(Vec<Option<&'static str>>, &str)> = vec![
            (vec![None], "closed the connection"),
            (vec![Some("garbage\n")], "bad reply from the launcher"),
            (
                vec![Some("cmd=maxes\n")],
                "expected cmd=response_to_init in reply to cmd=init",
            ),
            (
                vec![Some("cmd=response_to_init rc=-1 msg=no\n")],
                "cmd=init failed: rc=-1 no",
            ),
            (
                vec![Some("cmd=response_to_init pmi_version=2 rc=0\n")],
                "another PMI version",
            ),
            (
                vec![Some(INIT), Some("cmd=maxes keylen_max=x vallen_max=1\n")],
                "keylen_max=\"x\" is not a number",
            ),
            (
                vec![Some(INIT), Some(MAXES), Some("cmd=my_kvsname\n")],
                "has no kvsname",
            ),
            (
                vec![Some(INIT), Some(MAXES), Some(KVS), Some("cmd=oops\n")],
                "expected cmd=get_result",
            ),
            (
                vec![Some("cmd=response_to_init rc=zero pmi_version=1\n")],
                "non-numeric rc",
            ),
        ];
        for (replies, expect) in cases {
            let e = scripted(&fd_launch(), replies)
                .err()
                .expect(expect)
                .to_string();
            assert!(e.contains(expect), "{expect}: {e}");
        }
        // initack: the launcher's rank must agree with PMI_RANK.
        let launch = Launch {
            endpoint: Endpoint::Port("h:1".into()),
            id: Some(1),
            ..fd_launch()
        };
        let e = scripted(
            &launch,
            vec![Some(
                "cmd=initack rc=0\ncmd=set size=2\ncmd=set rank=0\ncmd=set debug=0\n",
            )],
        )
        .err()
        .expect("rank mismatch")
        .to_string();
        assert!(e.contains("PMI_RANK=1 but the launcher says 0"), "{e}");
    }

    /// Rank by rank, as the format describes it.
    fn local_of_by_rank(mapping: &[(u32, u32, u32)], rank: u32, size: u32) -> (u32, u32) {
        let mut node_of = Vec::new();
        while node_of.len() < size as usize {
            for &(start, nodes, per) in mapping {
                for node in start..start + nodes {
                    for _ in 0..per {
                        node_of.push(node);
                    }
                }
            }
        }
        node_of.truncate(size as usize);
        let mine = node_of[rank as usize];
        let count = |ranks: &[u32]| ranks.iter().filter(|&&n| n == mine).count() as u32;
        (count(&node_of), count(&node_of[..rank as usize]))
    }

    #[test]
    fn process_mapping_agrees_with_placing_rank_by_rank() {
        let mappings: &[&[(u32, u32, u32)]] = &[
            &[(0, 1, 4)],
            &[(0, 3, 2)],
            &[(0, 2, 3), (2, 1, 1)],
            &[(5, 2, 1), (0, 1, 0), (5, 1, 2)],
            &[(1, 2, 2), (0, 3, 1)],
        ];
        for m in mappings {
            let text = format!(
                "(vector,{})",
                m.iter()
                    .map(|(s, n, p)| format!("({s},{n},{p})"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            for size in 1..20 {
                for rank in 0..size {
                    assert_eq!(
                        local_of(&text, rank, size),
                        Some(local_of_by_rank(m, rank, size)),
                        "{text} rank {rank} of {size}"
                    );
                }
                assert_eq!(local_of(&text, size, size), None);
            }
        }
    }

    #[test]
    fn a_huge_job_size_from_the_launcher_is_counted_not_laid_out() {
        // A size of 4 billion in the launcher's reply used to allocate (and fill) a vector of
        // one entry per rank.
        assert_eq!(
            local_of("(vector,(0,2,1))", 6, u32::MAX),
            Some((u32::MAX / 2 + 1, 3))
        );
        assert_eq!(
            local_of("(vector,(0,2,1))", 7, u32::MAX),
            Some((u32::MAX / 2, 3))
        );
        assert_eq!(
            local_of("(vector,(0,1,4294967295),(1,1,4294967295))", 0, u32::MAX),
            Some((u32::MAX, 0))
        );
        // Block sizes whose sum overflows are not a mapping.
        let many = ["(0,4294967295,4294967295)"; 3].join(",");
        assert_eq!(local_of(&format!("(vector,{many})"), 0, 2), None);
    }

    #[test]
    fn process_mapping() {
        assert_eq!(local_of("(vector,(0,1,4))", 2, 4), Some((4, 2)));
        // Two nodes of two ranks each.
        assert_eq!(local_of("(vector,(0,2,2))", 1, 4), Some((2, 1)));
        assert_eq!(local_of("(vector,(0,2,2))", 2, 4), Some((2, 0)));
        // Uneven blocks: 3 ranks on node 0, 1 on node 1.
        assert_eq!(local_of("(vector,(0,1,3),(1,1,1))", 3, 4), Some((1, 0)));
        assert_eq!(local_of("(vector,(0,1,3),(1,1,1))", 1, 4), Some((3, 1)));
        // The vector repeats: round-robin of 5 ranks over 2 nodes.
        assert_eq!(local_of("(vector,(0,2,1))", 4, 5), Some((3, 2)));
        assert_eq!(local_of("(vector,(0,2,1))", 3, 5), Some((2, 1)));
        for bad in [
            "",
            "(vector)",
            "(vector,(0,1))",
            "(vector,(0,0,0))",
            "(vector,(a,1,1))",
            "(list,(0,1,1))",
            "(vector,(4294967295,2,1))",
        ] {
            assert_eq!(local_of(bad, 0, 2), None, "{bad}");
        }
    }
}
