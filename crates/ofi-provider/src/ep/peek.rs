//! `fi_trecvmsg` with `FI_PEEK`, `FI_CLAIM` and `FI_DISCARD` (`fi_tagged(3)`, libfabric
//! 1.17), over the transport's probe and claim (docs/mpi-cxi.md: a SEARCH of the NIC's
//! unexpected list, and a SEARCH_AND_DELETE that takes the message out of matching).
//!
//! - `FI_PEEK`: whether a message matching the tag, ignore mask and source has arrived and
//!   is unreceived. A completion reports its length, tag and source (no buffer; its remote
//!   CQ data, which travels in front of the payload, comes with the receive); nothing
//!   matching is an error completion `FI_ENOMSG`.
//! - `FI_PEEK | FI_CLAIM`: the same, and the message found is claimed: no other receive
//!   matches it. A later `fi_trecvmsg` with `FI_CLAIM` and the same context receives it
//!   into its buffer (the context, a `struct fi_context` under `FI_CONTEXT` mode, names
//!   the claim).
//! - `FI_PEEK | FI_DISCARD`: the message found is dropped; the completion is the peek's.
//! - `FI_CLAIM | FI_DISCARD`: a claimed message is dropped; a completion of length 0.

use std::collections::{HashMap, HashSet};

use transport::{Envelope, MatchSpec, OpId, Transport};

use super::{Ep, Op};
use crate::cq::{Entry, ErrEntry};
use crate::error::{Error, Result};
use crate::ffi::mem::UserBuf;
use crate::ffi::types::{
    FI_ADDR_NOTAVAIL, FI_ADDR_UNSPEC, FI_DIRECTED_RECV, FI_ENOMSG, FI_RECV, FI_TAGGED,
};
use crate::wire;

/// Claimed messages and discarding receives of an endpoint.
#[derive(Default)]
pub(super) struct Claims {
    /// Transport operation of each message claimed, by the context of its claim.
    claimed: HashMap<usize, OpId>,
    /// Receives whose message is dropped, not delivered.
    pub(super) discards: HashSet<OpId>,
}

/// A search of `fi_trecvmsg` with `FI_PEEK`.
#[derive(Clone, Copy, Debug)]
pub struct Peek {
    /// Source (`FI_ADDR_UNSPEC`: any).
    pub src: u64,
    /// Tag.
    pub tag: u64,
    /// Ignore mask.
    pub ignore: u64,
    /// Context of the operation (and name of a claim).
    pub context: usize,
    /// `FI_CLAIM`: claim the message found.
    pub claim: bool,
    /// `FI_DISCARD`: drop the message found.
    pub discard: bool,
}

impl Ep {
    /// `fi_trecvmsg` with `FI_PEEK`: one completion (or `FI_ENOMSG` error completion) on the
    /// receive CQ. `buf` becomes the receive buffer of a discarded message (it takes
    /// nothing).
    pub fn peek(&self, p: Peek, buf: UserBuf) -> Result<()> {
        let mut s = self.lock();
        s.ready()?;
        let source = if p.src == FI_ADDR_UNSPEC || self.caps & FI_DIRECTED_RECV == 0 {
            None
        } else {
            Some(s.rank(p.src)?)
        };
        s.sync_av()?;
        let (bits, ignore) = wire::recv_match(Some((p.tag, p.ignore)));
        let spec = MatchSpec {
            source,
            bits,
            ignore,
        };
        let found = if p.claim || p.discard {
            match s.t.claim(spec)? {
                Some((env, id)) => {
                    if p.discard {
                        s.claims.discards.insert(id);
                        s.ops.insert(id, silent(buf));
                    } else {
                        if let Some(old) = s.claims.claimed.insert(p.context, id) {
                            // A context names one claim; the earlier message is dropped.
                            s.claims.discards.insert(old);
                            s.ops.insert(old, silent_empty());
                        }
                    }
                    Some(env)
                }
                None => None,
            }
        } else {
            s.t.probe(spec)?
        };
        let entry = match &found {
            Some(env) => Entry {
                context: p.context,
                flags: FI_RECV | FI_TAGGED,
                len: payload_len(env),
                tag: env.bits & wire::TAG_MASK,
                src: s
                    .addr_of
                    .get(&env.source)
                    .copied()
                    .unwrap_or(FI_ADDR_NOTAVAIL),
                ..Entry::default()
            },
            None => Entry {
                context: p.context,
                flags: FI_RECV | FI_TAGGED,
                tag: p.tag,
                src: FI_ADDR_NOTAVAIL,
                ..Entry::default()
            },
        };
        let cq = s.rx_cq.clone();
        drop(s);
        if let Some(cq) = cq {
            cq.push(match found {
                Some(_) => Ok(entry),
                None => Err(ErrEntry {
                    entry,
                    err: FI_ENOMSG,
                    olen: 0,
                    message: "no message matches the peek".into(),
                }),
            });
        }
        Ok(())
    }

    /// `fi_trecvmsg` with `FI_CLAIM` (no `FI_PEEK`): receive the message claimed under
    /// `context` into `buf`, or drop it with `discard`. `completion` as for a receive.
    pub fn recv_claimed(
        &self,
        context: usize,
        buf: UserBuf,
        discard: bool,
        completion: Option<bool>,
    ) -> Result<()> {
        let mut s = self.lock();
        s.ready()?;
        let Some(id) = s.claims.claimed.remove(&context) else {
            return Err(Error::Invalid(format!(
                "FI_CLAIM: no message was claimed with context {context:#x}"
            )));
        };
        if discard {
            s.claims.discards.insert(id);
        }
        let report =
            discard || completion.unwrap_or(!s.rx_selective || self.defaults.rx_completion);
        s.ops.insert(
            id,
            Op {
                context,
                tagged: true,
                report,
                recv: Some(buf),
            },
        );
        Ok(())
    }
}

/// A message's payload length (without the remote CQ data in front of it).
fn payload_len(env: &Envelope) -> usize {
    if env.bits & wire::DATA != 0 {
        env.len.saturating_sub(wire::DATA_LEN)
    } else {
        env.len
    }
}

/// The operation of a message dropped without a completion.
fn silent(buf: UserBuf) -> Op {
    Op {
        context: 0,
        tagged: true,
        report: false,
        recv: Some(buf),
    }
}

fn silent_empty() -> Op {
    silent(UserBuf::empty())
}
