//! A reference transport: ranks of one process exchanging messages through shared queues, with
//! software matching. It is the executable form of the `transport::Transport` contract
//! (ordering, wildcards, claim, cancel, truncation, synchronous sends, RMA) with no NIC in the
//! way, so the MPI layer's semantics suite can be checked against it and then, unchanged,
//! against the NIC transports.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use mpi::op::{SystemOperation, apply};
use mpi::{Error, Kind, Result};
use transport::matching::Matcher;
use transport::{
    AmoOp, AmoType, Atomic, Completion, Envelope, MatchSpec, OpId, Rank, SendMode, Stats,
    Transport, WinId,
};

enum Wire {
    Msg {
        env: Envelope,
        data: Vec<u8>,
        ack: Option<(Rank, OpId)>,
    },
    Ack(OpId),
}

type Window = Arc<Mutex<Vec<u8>>>;
/// An unexpected message: its bytes, and whom to acknowledge (synchronous sends).
type Held = (Vec<u8>, Option<(Rank, OpId)>);

/// What the ranks of one loopback job share.
#[derive(Default)]
pub struct Fabric {
    inboxes: Vec<Mutex<VecDeque<Wire>>>,
    windows: Mutex<HashMap<(u32, Rank), Window>>,
}

impl Fabric {
    /// The shared queues of `size` ranks.
    pub fn new(size: u32) -> Arc<Self> {
        Arc::new(Fabric {
            inboxes: (0..size).map(|_| Mutex::new(VecDeque::new())).collect(),
            ..Fabric::default()
        })
    }

    fn push(&self, to: Rank, w: Wire) {
        self.inboxes[to as usize]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(w);
    }
}

/// One rank's loopback transport.
pub struct Loopback {
    fabric: Arc<Fabric>,
    rank: Rank,
    size: u32,
    next: u64,
    matcher: Matcher<usize, Held>,
    done: HashMap<OpId, Completion>,
    waiting_ack: HashMap<OpId, ()>,
    /// For each window of this rank: the window id of every peer (from the keys).
    peers: HashMap<u32, Vec<Option<u32>>>,
    stats: Stats,
}

impl Loopback {
    /// Rank `rank` of the job on `fabric`.
    pub fn new(fabric: Arc<Fabric>, rank: Rank) -> Self {
        let size = fabric.inboxes.len() as u32;
        Loopback {
            fabric,
            rank,
            size,
            next: 1,
            matcher: Matcher::new(),
            done: HashMap::new(),
            waiting_ack: HashMap::new(),
            peers: HashMap::new(),
            stats: Stats::new(),
        }
    }

    fn op(&mut self) -> OpId {
        self.next += 1;
        OpId(self.next)
    }

    fn deliver(
        &mut self,
        op: OpId,
        cap: usize,
        env: Envelope,
        data: Vec<u8>,
        ack: Option<(Rank, OpId)>,
    ) {
        if let Some((to, sop)) = ack {
            self.fabric.push(to, Wire::Ack(sop));
        }
        let mut data = data;
        data.truncate(cap);
        self.done.insert(
            op,
            Completion::Received {
                envelope: env,
                data,
            },
        );
    }

    fn check_rank(&self, r: Rank) -> Result<()> {
        if r >= self.size {
            return Err(Error::Rank {
                rank: i64::from(r),
                size: self.size as usize,
            });
        }
        Ok(())
    }

    fn window(&self, win: WinId, rank: Rank) -> Result<Window> {
        let id = if rank == self.rank {
            win.0
        } else {
            self.peers
                .get(&win.0)
                .and_then(|p| p.get(rank as usize).copied().flatten())
                .ok_or_else(|| Error::Rma(format!("rank {rank} has no part in window {}", win.0)))?
        };
        self.fabric
            .windows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(id, rank))
            .cloned()
            .ok_or_else(|| Error::Rma(format!("no window {} on rank {rank}", win.0)))
    }
}

fn range(len: usize, offset: usize, n: usize) -> Result<std::ops::Range<usize>> {
    let end = offset.checked_add(n).filter(|&e| e <= len);
    end.map(|e| offset..e)
        .ok_or_else(|| Error::Rma(format!("{n} bytes at {offset} outside a window of {len}")))
}

fn kind_of(t: AmoType) -> Kind {
    match t {
        AmoType::I32 => Kind::I32,
        AmoType::U32 => Kind::U32,
        AmoType::I64 => Kind::I64,
        AmoType::U64 => Kind::U64,
        AmoType::F32 => Kind::F32,
        AmoType::F64 => Kind::F64,
    }
}

impl Transport for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn send(&mut self, dest: Rank, bits: u64, data: &[u8], mode: SendMode) -> Result<OpId> {
        self.check_rank(dest)?;
        let op = self.op();
        let env = Envelope {
            source: self.rank,
            bits,
            len: data.len(),
        };
        let ack = (mode == SendMode::Synchronous).then_some((self.rank, op));
        if ack.is_some() {
            self.waiting_ack.insert(op, ());
        } else {
            self.done.insert(op, Completion::Sent);
        }
        *self.stats.entry("messages").or_default() += 1;
        self.fabric.push(
            dest,
            Wire::Msg {
                env,
                data: data.to_vec(),
                ack,
            },
        );
        Ok(op)
    }

    fn recv(&mut self, spec: MatchSpec, capacity: usize) -> Result<OpId> {
        self.progress()?;
        let op = self.op();
        if let Some((u, cap)) = self.matcher.post(op, spec, capacity) {
            let (data, ack) = u.data;
            self.deliver(op, cap, u.envelope, data, ack);
        }
        Ok(op)
    }

    fn cancel(&mut self, op: OpId) -> Result<bool> {
        if self.matcher.cancel(op).is_some() {
            self.done.insert(op, Completion::Cancelled);
            return Ok(true);
        }
        Ok(false)
    }

    fn probe(&mut self, spec: MatchSpec) -> Result<Option<Envelope>> {
        self.progress()?;
        Ok(self.matcher.probe(&spec))
    }

    fn claim(&mut self, spec: MatchSpec) -> Result<Option<(Envelope, OpId)>> {
        self.progress()?;
        let Some(u) = self.matcher.claim(&spec) else {
            return Ok(None);
        };
        let op = self.op();
        let (data, ack) = u.data;
        self.deliver(op, usize::MAX, u.envelope, data, ack);
        Ok(Some((u.envelope, op)))
    }

    fn test(&mut self, op: OpId) -> Result<Option<Completion>> {
        if let Some(c) = self.done.remove(&op) {
            return Ok(Some(c));
        }
        if !self.progress()? {
            std::thread::yield_now();
        }
        Ok(self.done.remove(&op))
    }

    fn progress(&mut self) -> Result<bool> {
        let incoming: Vec<Wire> = self.fabric.inboxes[self.rank as usize]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .collect();
        let did = !incoming.is_empty();
        for w in incoming {
            match w {
                Wire::Ack(op) => {
                    if self.waiting_ack.remove(&op).is_some() {
                        self.done.insert(op, Completion::Sent);
                    }
                }
                Wire::Msg { env, data, ack } => {
                    if let Some((p, d)) = self.matcher.arrive(env, (data, ack)) {
                        self.deliver(p.op, p.data, env, d.0, d.1);
                    } else {
                        *self.stats.entry("unexpected").or_default() += 1;
                    }
                }
            }
        }
        Ok(did)
    }

    fn stats(&self) -> Stats {
        self.stats.clone()
    }

    fn win_create(&mut self, len: usize) -> Result<(WinId, Vec<u8>)> {
        let mut w = self
            .fabric
            .windows
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let id = (0..u32::MAX)
            .find(|i| !w.contains_key(&(*i, self.rank)))
            .ok_or_else(|| Error::Rma("out of windows".into()))?;
        w.insert((id, self.rank), Arc::new(Mutex::new(vec![0; len])));
        Ok((WinId(id), id.to_le_bytes().to_vec()))
    }

    fn win_connect(&mut self, win: WinId, keys: Vec<Vec<u8>>) -> Result<()> {
        let ids = keys
            .iter()
            .map(|k| {
                (!k.is_empty())
                    .then(|| k.as_slice().try_into().map(u32::from_le_bytes))
                    .transpose()
                    .map_err(|_| Error::Rma(format!("a window key of {} bytes", k.len())))
            })
            .collect::<Result<Vec<_>>>()?;
        self.peers.insert(win.0, ids);
        Ok(())
    }

    fn win_read(&mut self, win: WinId, offset: usize, out: &mut [u8]) -> Result<()> {
        let w = self.window(win, self.rank)?;
        let w = w.lock().unwrap_or_else(PoisonError::into_inner);
        out.copy_from_slice(&w[range(w.len(), offset, out.len())?]);
        Ok(())
    }

    fn win_write(&mut self, win: WinId, offset: usize, data: &[u8]) -> Result<()> {
        let w = self.window(win, self.rank)?;
        let mut w = w.lock().unwrap_or_else(PoisonError::into_inner);
        let r = range(w.len(), offset, data.len())?;
        w[r].copy_from_slice(data);
        Ok(())
    }

    fn put(&mut self, win: WinId, target: Rank, offset: usize, data: &[u8]) -> Result<OpId> {
        let w = self.window(win, target)?;
        {
            let mut w = w.lock().unwrap_or_else(PoisonError::into_inner);
            let r = range(w.len(), offset, data.len())?;
            w[r].copy_from_slice(data);
        }
        let op = self.op();
        self.done.insert(op, Completion::Sent);
        Ok(op)
    }

    fn get(&mut self, win: WinId, target: Rank, offset: usize, len: usize) -> Result<OpId> {
        let w = self.window(win, target)?;
        let data = {
            let w = w.lock().unwrap_or_else(PoisonError::into_inner);
            w[range(w.len(), offset, len)?].to_vec()
        };
        let op = self.op();
        self.done.insert(op, Completion::Fetched(data));
        Ok(op)
    }

    fn atomic(&mut self, win: WinId, target: Rank, offset: usize, a: &Atomic) -> Result<OpId> {
        let n = a.ty.size();
        if a.operand.len() != n {
            return Err(Error::Count(format!(
                "an atomic operand of {} bytes",
                a.operand.len()
            )));
        }
        let w = self.window(win, target)?;
        let old = {
            let mut w = w.lock().unwrap_or_else(PoisonError::into_inner);
            let r = range(w.len(), offset, n)?;
            let old = w[r.clone()].to_vec();
            let sys = match a.op {
                AmoOp::Sum => Some(SystemOperation::Sum),
                AmoOp::Min => Some(SystemOperation::Min),
                AmoOp::Max => Some(SystemOperation::Max),
                AmoOp::Band => Some(SystemOperation::BitwiseAnd),
                AmoOp::Bor => Some(SystemOperation::BitwiseOr),
                AmoOp::Bxor => Some(SystemOperation::BitwiseXor),
                AmoOp::Land => Some(SystemOperation::LogicalAnd),
                AmoOp::Lor => Some(SystemOperation::LogicalOr),
                AmoOp::Lxor => Some(SystemOperation::LogicalXor),
                _ => None,
            };
            match (a.op, sys) {
                (_, Some(op)) => apply(op, kind_of(a.ty), &mut w[r], &a.operand)?,
                (AmoOp::Replace, _) => w[r].copy_from_slice(&a.operand),
                (AmoOp::CompareSwap, _) if w[r.clone()] == a.compare[..] => {
                    w[r].copy_from_slice(&a.operand)
                }
                _ => {}
            }
            old
        };
        let op = self.op();
        self.done.insert(
            op,
            if a.fetch {
                Completion::Fetched(old)
            } else {
                Completion::Sent
            },
        );
        Ok(op)
    }

    fn win_free(&mut self, win: WinId) -> Result<()> {
        self.fabric
            .windows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(win.0, self.rank));
        self.peers.remove(&win.0);
        Ok(())
    }
}
