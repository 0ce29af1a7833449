//! Counters bound to an endpoint (`fi_ep_bind` of an `fi_cntr`; [`crate::cntr`]).

use std::sync::Arc;

use super::{Ep, Op};
use crate::cntr::{BIND_FLAGS, Cntr, Event};
use crate::error::{Error, Result};

impl Ep {
    /// `fi_ep_bind` of a counter with `flags` (`FI_SEND`, `FI_RECV`, `FI_WRITE`, `FI_READ`,
    /// `FI_REMOTE_WRITE`, `FI_REMOTE_READ`): it counts those operations of this endpoint
    /// from now on, and reading it progresses the endpoint.
    pub fn bind_cntr(self: &Arc<Self>, cntr: &Arc<Cntr>, flags: u64) -> Result<()> {
        if !self.lock().cntrs.bind(cntr, flags) {
            return Err(Error::Invalid(format!(
                "a counter binding takes FI_SEND, FI_RECV, FI_WRITE, FI_READ, FI_REMOTE_WRITE or \
                 FI_REMOTE_READ (flags {flags:#x}; allowed {BIND_FLAGS:#x})"
            )));
        }
        cntr.attach(self);
        Ok(())
    }
}

/// The counter event an operation of the message tables completes as.
pub(super) fn event_of(op: &Op) -> Event {
    if op.recv.is_some() {
        Event::Recv
    } else {
        Event::Send
    }
}
