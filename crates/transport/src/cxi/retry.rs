//! Operations a target refused for want of resources, issued again a little later.
//!
//! A PtlTE without flow control (the rendezvous sources, the RMA windows) that meets a full
//! event queue drops the request and answers `C_RC_ENTRY_NOT_FOUND` (cassini.md §3.2, §4.3):
//! nothing was done at the target, and the condition passes once the target drains its EQ.
//! A Get of a rendezvous message's rest (issued by the NIC or by software) and an RMA
//! operation refused that way go out again [`RETRY_DELAY`] later, up to [`MAX_TRIES`]
//! times; then the refusal is the operation's error, as before. (The target of a
//! message send has flow control instead, `fc`.) A counter in the statistics, `retries`,
//! counts the reissues.

use driver::clock::Instant;
use std::time::Duration;

use firmware_spec::cassini::dma::{DmaAmo, FullDma};
use firmware_spec::cassini::event::EventType;

use super::CxiTransport;
use crate::Rank;
use crate::error::Result;

/// How long a refused operation waits before it is issued again.
pub(super) const RETRY_DELAY: Duration = Duration::from_millis(1);
/// How often one operation is issued again before its refusal is an error.
pub(super) const MAX_TRIES: u32 = 100;

/// Where the rest of a rendezvous message is pulled from.
#[derive(Clone, Copy, Debug)]
pub(super) struct RdzvSource {
    pub(super) source: Rank,
    pub(super) put_bits: u64,
    pub(super) src: u64,
    pub(super) eager: usize,
}

/// An RMA command as issued, to issue it again.
#[derive(Clone, Copy, Debug)]
pub(super) enum RmaCmd {
    Dma(FullDma),
    Amo(DmaAmo),
}

/// What waits to be issued again.
#[derive(Clone, Copy, Debug)]
enum Again {
    /// The rendezvous Get of receive `id`.
    Get(u64),
    /// RMA operation `id`.
    Rma(u64),
}

/// Refused operations waiting for their time.
#[derive(Default)]
pub(super) struct Retries {
    due: Vec<(Instant, Again)>,
}

impl Retries {
    /// Whether an operation waits to be issued again.
    pub(super) fn any(&self) -> bool {
        !self.due.is_empty()
    }
}

impl CxiTransport {
    /// An initiator event said ENTRY_NOT_FOUND for operation `user_ptr`: `true` if it will
    /// be issued again (else the caller reports the error).
    pub(super) fn retry_refused(&mut self, ty: EventType, user_ptr: u64, rendezvous: bool) -> bool {
        let again = match ty {
            EventType::Reply if rendezvous => {
                // `struct cxi_rdzv_user_ptr`: buffer_id@48:16 names the receive.
                let bid = (user_ptr >> 48) as u16;
                match self.bids.get(&bid) {
                    Some(&id) => Again::Get(id),
                    None => return false,
                }
            }
            EventType::Reply if self.recvs.contains_key(&user_ptr) => Again::Get(user_ptr),
            EventType::Reply | EventType::Ack if self.rma_ops.contains_key(&user_ptr) => {
                Again::Rma(user_ptr)
            }
            _ => return false,
        };
        let tries = match again {
            Again::Get(id) => match self.recvs.get_mut(&id) {
                Some(r) if r.rdzv_from.is_some() => &mut r.tries,
                _ => return false,
            },
            Again::Rma(id) => match self.rma_ops.get_mut(&id) {
                Some(op) => &mut op.tries,
                None => return false,
            },
        };
        if *tries >= MAX_TRIES {
            return false;
        }
        *tries += 1;
        let at = Instant::now()
            .checked_add(RETRY_DELAY)
            .unwrap_or_else(Instant::now);
        self.retries.due.push((at, again));
        self.bump("retries");
        true
    }

    /// Issue again what is due.
    pub(super) fn retry_step(&mut self) -> Result<()> {
        if self.retries.due.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries.due)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.retries.due = later;
        for (_, again) in due {
            match again {
                Again::Get(id) => {
                    let Some(from) = self.recvs.get(&id).and_then(|r| r.rdzv_from) else {
                        continue;
                    };
                    self.sw_get(id, from.source, from.put_bits, from.src, from.eager)?;
                }
                Again::Rma(id) => {
                    let Some(cmd) = self.rma_ops.get(&id).map(|op| op.cmd) else {
                        continue;
                    };
                    match cmd {
                        RmaCmd::Dma(c) => self.ep.dma(c)?,
                        RmaCmd::Amo(c) => {
                            self.ep.emit(false, |q| q.emit_dma_amo(&c))?;
                            self.ep.ring_tx()?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
