//! RMA and atomics on an endpoint: `fi_write`/`fi_read`/`fi_atomic` and friends as puts,
//! gets and AMOs by key on the target's RMA PtlTE
//! (`transport::cxi::CxiTransport::put_keyed` & co., the CXI provider's design on
//! Cassini, cassini.md §2.1), and the target side of the domain's memory regions
//! ([`crate::mr`]): each region open to remote access is exposed on this endpoint's NIC,
//! mirrored to and from the application's buffer.
//!
//! Completions: `FI_RMA | FI_WRITE`, `FI_RMA | FI_READ`, `FI_ATOMIC | FI_WRITE` (plain
//! atomics), `FI_ATOMIC | FI_READ` (fetching and compare atomics) on the transmit CQ; a
//! write with remote CQ data (`fi_writedata`) gives the target's receive CQ an entry with
//! `FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA` and the data. An access the NIC refuses
//! (no region with that key, outside the region, an operation the region does not allow)
//! fails alone, with an error completion (`FI_EACCES`) carrying the NIC's return code in
//! its message.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use firmware_spec::cassini::rc::ReturnCode;
use transport::cxi::KeyedAmo;
use transport::{Completion, OpId};

use crate::cq::{Entry, ErrEntry};
use crate::ep::{Done, Ep, INJECT_SIZE, MAX_MSG_SIZE, State};
use crate::error::{Error, Result};
use crate::ffi::mem::UserBuf;
use crate::ffi::rma_types::{
    FI_EACCES, FI_EIO, FI_EOPNOTSUPP, FI_READ, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_WRITE,
};
use crate::ffi::types::{FI_ADDR_NOTAVAIL, FI_ATOMIC, FI_ENOMEM, FI_REMOTE_CQ_DATA, FI_RMA};
use crate::mr::Mr;

/// A region exposed on this endpoint, and the application's bytes as last mirrored.
struct Exposure {
    mr: Arc<Mr>,
    last: Vec<u8>,
}

/// An RMA or atomic operation in flight.
struct RmaOp {
    context: usize,
    flags: u64,
    report: bool,
    /// Where fetched bytes go (reads, fetching atomics).
    out: Option<UserBuf>,
}

/// The RMA state of an endpoint.
#[derive(Default)]
pub struct RmaState {
    ops: BTreeMap<OpId, RmaOp>,
    exposed: BTreeMap<u64, Exposure>,
}

/// Where an RMA operation goes.
#[derive(Clone, Copy, Debug)]
pub struct Remote {
    /// The peer's `fi_addr_t`.
    pub addr: u64,
    /// Offset in the peer's region.
    pub offset: u64,
    /// The region's key.
    pub key: u64,
}

/// How an operation reports.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    /// User context.
    pub context: usize,
    /// `Some(true)`: report; `Some(false)`: never (inject); `None`: as bound.
    pub completion: Option<bool>,
}

fn errno_of(rc: ReturnCode) -> i32 {
    match rc {
        ReturnCode::EntryNotFound
        | ReturnCode::NoMatch
        | ReturnCode::OpViolation
        | ReturnCode::PermViolation
        | ReturnCode::NoSpace => FI_EACCES,
        ReturnCode::AmoInvalOpError | ReturnCode::AmoLengthError => FI_EOPNOTSUPP,
        _ => FI_EIO,
    }
}

fn offset(o: u64) -> Result<usize> {
    usize::try_from(o).map_err(|_| Error::Invalid(format!("offset {o:#x}")))
}

impl Ep {
    /// Expose region `mr` on this endpoint's NIC (a domain registration, [`crate::mr`]).
    pub fn expose(&self, mr: &Arc<Mr>) -> Result<()> {
        let mut s = self.lock();
        if s.rma.exposed.contains_key(&mr.key) {
            return Ok(());
        }
        let len = mr.region.len();
        s.t.region_expose(
            mr.key,
            len,
            mr.access & FI_REMOTE_READ != 0,
            mr.access & FI_REMOTE_WRITE != 0,
        )
        .map_err(|e| {
            let text = e.to_string();
            if text.contains("ENOMEM") {
                Error::Errno(
                    FI_ENOMEM,
                    format!(
                        "{text}: a region of {len} bytes open to remote access is mirrored in \
                         the emulated node's {} MiB",
                        crate::nic::node_memory() >> 20
                    ),
                )
            } else {
                Error::Transport(e)
            }
        })?;
        let mut last = vec![0u8; len];
        mr.region.read(0, &mut last);
        s.t.region_write(mr.key, 0, &last)?;
        s.rma.exposed.insert(
            mr.key,
            Exposure {
                mr: Arc::clone(mr),
                last,
            },
        );
        Ok(())
    }

    /// Withdraw region `key` (its `fi_close`), after copying out what peers wrote.
    pub fn withdraw(&self, key: u64) -> Result<()> {
        let mut s = self.lock();
        if !s.rma.exposed.contains_key(&key) {
            return Ok(());
        }
        // Whatever failed here shows at the next progress.
        let _ = transport::Transport::progress(&mut s.t);
        arrivals(&mut s, &mut Vec::new())?;
        s.rma.exposed.remove(&key);
        s.t.region_withdraw(key)?;
        Ok(())
    }

    fn report(&self, s: &State, r: Report) -> bool {
        r.completion
            .unwrap_or(!s.tx_selective || self.defaults.tx_completion)
    }

    /// `fi_write` & co.: put `data` into the peer's region, with remote CQ data if `cq_data`.
    pub fn rma_write(
        &self,
        to: Remote,
        data: &[u8],
        cq_data: Option<u64>,
        r: Report,
    ) -> Result<()> {
        if data.len() > MAX_MSG_SIZE {
            return Err(Error::TooLong(data.len()));
        }
        if r.completion == Some(false) && data.len() > INJECT_SIZE {
            return Err(Error::TooLong(data.len()));
        }
        let mut s = self.lock();
        s.ready()?;
        let dest = s.rank(to.addr)?;
        let id =
            s.t.put_keyed(dest, to.key, offset(to.offset)?, data, cq_data)
                .map_err(crate::error::posting)?;
        let report = self.report(&s, r);
        s.rma.ops.insert(
            id,
            RmaOp {
                context: r.context,
                flags: FI_RMA | FI_WRITE,
                report,
                out: None,
            },
        );
        Ok(())
    }

    /// `fi_read` & co.: get `into.len()` bytes of the peer's region into `into`.
    pub fn rma_read(&self, from: Remote, into: UserBuf, r: Report) -> Result<()> {
        if into.len() > MAX_MSG_SIZE {
            return Err(Error::TooLong(into.len()));
        }
        let mut s = self.lock();
        s.ready()?;
        let src = s.rank(from.addr)?;
        let id =
            s.t.get_keyed(src, from.key, offset(from.offset)?, into.len())
                .map_err(crate::error::posting)?;
        let report = self.report(&s, r);
        s.rma.ops.insert(
            id,
            RmaOp {
                context: r.context,
                flags: FI_RMA | FI_READ,
                report,
                out: Some(into),
            },
        );
        Ok(())
    }

    /// One atomic on the element at `to`; the old value goes to `result` when fetching.
    pub fn rma_atomic(
        &self,
        to: Remote,
        amo: KeyedAmo,
        result: Option<UserBuf>,
        r: Report,
    ) -> Result<()> {
        let mut s = self.lock();
        s.ready()?;
        let dest = s.rank(to.addr)?;
        let id =
            s.t.amo_keyed(dest, to.key, offset(to.offset)?, amo)
                .map_err(crate::error::posting)?;
        let report = self.report(&s, r);
        s.rma.ops.insert(
            id,
            RmaOp {
                context: r.context,
                flags: FI_ATOMIC | if amo.fetch { FI_READ } else { FI_WRITE },
                report,
                out: result,
            },
        );
        Ok(())
    }
}

/// The application's stores since the last mirror reach the NIC-side copies: only the bytes
/// that changed, so a peer's write not yet copied out is kept. Called when the endpoint
/// posts a message (`crate::ep::Ep::send`): the point where a target tells its peers that
/// its memory is ready. Scanning every exposed byte at each RMA post would cost a bandwidth
/// loop a full pass over its (often hundreds of MiB of) registered memory per operation.
pub(crate) fn refresh(s: &mut State) -> Result<()> {
    const CHUNK: usize = 64 << 10;
    let State { t, rma, .. } = s;
    let mut now = vec![0u8; CHUNK];
    for (key, x) in rma.exposed.iter_mut() {
        let len = x.last.len();
        let mut at = 0;
        while at < len {
            let n = CHUNK.min(len - at);
            let cur = &mut now[..n];
            x.mr.region.read(at, cur);
            let last = &mut x.last[at..at + n];
            // Whole chunks compare as slices (memcmp); bytes only where they differ.
            if cur != last {
                let mut i = 0;
                while i < n {
                    if cur[i] == last[i] {
                        i += 1;
                        continue;
                    }
                    let start = i;
                    while i < n && cur[i] != last[i] {
                        i += 1;
                    }
                    t.region_write(*key, at + start, &cur[start..i])?;
                }
                last.copy_from_slice(cur);
            }
            at += n;
        }
    }
    Ok(())
}

/// What peers did to the exposed regions reaches the application's buffers; writes with
/// remote CQ data report on the receive CQ.
fn arrivals(s: &mut State, done: &mut Done) -> Result<()> {
    for a in s.t.take_arrivals() {
        let Some(x) = s.rma.exposed.get_mut(&a.key) else {
            continue;
        };
        let end = (a.offset + a.len).min(x.last.len());
        if a.offset < end {
            let mut b = vec![0u8; end - a.offset];
            s.t.region_read(a.key, a.offset, &mut b)?;
            x.mr.region.write(a.offset, &b);
            x.last[a.offset..end].copy_from_slice(&b);
        }
        if let (Some(data), Some(cq)) = (a.data, &s.rx_cq) {
            done.push((
                Arc::clone(cq),
                Ok(Entry {
                    flags: FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA,
                    len: a.len,
                    data,
                    src: FI_ADDR_NOTAVAIL,
                    ..Entry::default()
                }),
            ));
        }
    }
    Ok(())
}

/// Progress the RMA side: arrivals, then the operations that ended.
pub(crate) fn step(s: &mut State, done: &mut Done) -> Result<()> {
    arrivals(s, done)?;
    let ids: Vec<OpId> = s.rma.ops.keys().copied().collect();
    for id in ids {
        let Some(outcome) = s.t.keyed_outcome(id)? else {
            continue;
        };
        let Some(op) = s.rma.ops.remove(&id) else {
            continue;
        };
        let entry = Entry {
            context: op.context,
            flags: op.flags,
            src: FI_ADDR_NOTAVAIL,
            ..Entry::default()
        };
        let e = match outcome {
            Ok(Completion::Fetched(data)) => {
                if let Some(out) = &op.out {
                    out.write(&data);
                }
                Ok(entry)
            }
            Ok(_) => Ok(entry),
            Err(f) => Err(ErrEntry {
                entry,
                err: errno_of(f.rc),
                olen: 0,
                message: f.message,
            }),
        };
        if (op.report || e.is_err())
            && let Some(cq) = &s.tx_cq
        {
            done.push((Arc::clone(cq), e));
        }
    }
    // A peer's atomic or write may have landed while this step ran.
    arrivals(s, done)
}

/// The transport failed: every RMA operation in flight ends with an `FI_EOTHER` error
/// completion carrying `message`.
pub(crate) fn fail_all(s: &mut State, message: &str, done: &mut Done) {
    let pending = std::mem::take(&mut s.rma.ops);
    let Some(cq) = &s.tx_cq else { return };
    // As for messages (`crate::ep`): entries without a context are left out.
    for op in pending.into_values().filter(|o| o.context != 0) {
        done.push((
            Arc::clone(cq),
            Err(ErrEntry {
                entry: Entry {
                    context: op.context,
                    flags: op.flags,
                    src: FI_ADDR_NOTAVAIL,
                    ..Entry::default()
                },
                err: crate::ffi::types::FI_EOTHER,
                olen: 0,
                message: message.to_owned(),
            }),
        ));
    }
}
