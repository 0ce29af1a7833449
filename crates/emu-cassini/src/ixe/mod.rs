//! The initiator side (transmit command execution, OXE in the hardware; the response path of
//! IXE): decoding transmit commands, IDC put and small message, full DMA put and get,
//! rendezvous put (only the eager bytes travel), non-matching put/get, atomics (IDC, small
//! IDC, DMA; also fired CT_TRIG_DMAs), MTU segmentation, the Gets the NIC issues itself to
//! pull the rest of a rendezvous put, the table of outstanding requests waiting for an ACK or
//! a REPLY, and the initiator events (SEND, ACK, REPLY) with their suppression flags and
//! counting events (cassini.md §2.1, §3.2, §5, §6).
//!
//! States of a request, one module each:
//!
//! ```text
//!  command     IxeOps::exec_tx: decode, CQ control, C_STATE -> a Launch
//!     v
//!  launch      IxeLaunch::launch: profile (RGID, CP) -> check_buffers (ATU) -> a handle
//!              (requests) -> request_frame (source) -> PCT -> put_rest: stream_next as
//!              the window opens, a train, or every frame now; the SEND event (complete)
//!     v
//!  response    IxeResponse::response: ACK -> ACK event; REPLY -> data into the local
//!              buffer, REPLY event on the last frame
//!     v
//!  complete    IxeComplete::complete / finish: events, counting events, the handle freed,
//!              a waiting FENCE or a stalled queue released
//! ```
//!
//! Beside them: `rendezvous` (the Gets the NIC issues itself), `timeout` (the scan that
//! completes lost requests UNDELIVERABLE), `source` (where a request's bytes come from, and
//! trains), `requests` (the request table and the initiator's state) and `ctx` (what the
//! initiator needs from the rest of the NIC). Each stage is an extension trait on
//! [`IxeCtx`]; a stage imports only the stages below it.
//!
//! The initiator reaches the rest of the NIC only through [`IxeCtx`] (implemented by `hw`):
//! frames leave through the PCT, counting events and CT commands go to the TOU.

mod command;
mod complete;
mod ctx;
mod launch;
mod rendezvous;
mod requests;
mod response;
mod source;
mod timeout;

pub(crate) use command::IxeOps;
pub(crate) use complete::IxeComplete;
pub(crate) use ctx::IxeCtx;
pub(crate) use launch::IxeLaunch;
pub(crate) use rendezvous::IxeRendezvous;
#[cfg(test)]
pub(crate) use requests::REQUEST_TIMEOUT;
pub(crate) use requests::{Ixe, OutStream, TOKEN_SCAN};
pub(crate) use response::IxeResponse;
pub(crate) use timeout::IxeTimeout;
