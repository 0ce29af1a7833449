//! The target side: incoming packets -> RMU (PtlTE) -> LPE (matching decision) -> data moved
//! through the ATU -> target events -> the response (ACK for a put, REPLY segments carrying
//! Get data); target CQ commands (APPEND, SEARCH, SEARCH_AND_DELETE, UNLINK, SETSTATE); and
//! the driver's view of the portal table (`c_lpe_cfg_ptl_table`).
//!
//! States of an incoming request, one module each:
//!
//! ```text
//!  receive   TgtOps::receive (CRC, parse) -> request (DFA check, RMU, LPE decision)
//!     |---------------------------|----------------------------|
//!     v                           v                            v
//!  put       place_put         get   serve_get            amo   serve_amo
//!            (continuation,          send_reply /               do_amo
//!             train: InMsg)          reply_next (trains)        amo_response
//!            complete_put            reply_read
//!     |                           |                            |
//!     v                           v                            v
//!  event     target events to the PtlTE's EQ, counting events (TOU)
//!  answer    ACK / REPLY / NACK back to the initiator through the PCT
//! ```
//!
//! A put longer than one MTU keeps an `InMsg` until its last continuation; a matched
//! rendezvous put ends with the Get that pulls the rest, whose completion applies the CT. A
//! rendezvous put or a Get that went unexpected is remembered with its fabric header until
//! the append that matches it (`command`: target CQ commands) starts the Get or answers it.
//! `state` holds what the target keeps between packets, `ctx` what it needs from the rest
//! of the NIC, and `cfg` the LPE configuration CSRs (portal table, `c_lpe_cfg_get_ctrl`, LE
//! pools). Each stage is an extension trait on [`TgtCtx`]; a stage imports only the stages
//! below it.
//!
//! The target reaches the rest of the NIC only through [`TgtCtx`] (implemented by `hw`):
//! responses go to the initiator, answers leave through the PCT, counting events go to the TOU.

mod amo;
mod answer;
mod cfg;
mod command;
mod ctx;
mod event;
mod get;
mod put;
mod receive;
mod state;

pub(crate) use cfg::{
    get_ctrl_written, le_pool_written, le_shared_written, ptl_table_written, reflect_le_alloc,
    reflect_le_shared, reflect_list_entry, reflect_ptl_table,
};
pub(crate) use command::TgtCommand;
pub(crate) use ctx::TgtCtx;
pub(crate) use get::TgtGet;
pub(crate) use put::TgtPut;
pub(crate) use receive::TgtOps;
pub(crate) use state::{ReplyStream, Tgt};
