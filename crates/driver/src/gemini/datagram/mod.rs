//! Datagrams (`GNI_EpPostData*`): kgni matches them, the NIC only carries them.
//!
//! Semantics (gemini.md §1.5, from uGNI's documentation and the libfabric GNI provider):
//! a datagram posted on a **bound** endpoint goes to the peer `(PE, inst_id)`; one posted on an
//! **unbound** endpoint is a **wildcard** that matches any bound datagram addressed to its
//! instance; an exchange swaps the two payloads (each side's `in` becomes the other's `out`);
//! at most one datagram is outstanding per endpoint; payloads are at most 128 bytes
//! (`GNI_DATAGRAM_MAXSIZE`).
//!
//! Protocol between two kgni instances (ours; the kgni wire format is not public). A message
//! is a [`Wire`] carried by a BTE `SEND` into the peer's RX channel:
//! - posting a bound datagram first looks for a request from that peer that arrived
//!   earlier (the *unexpected* list); if there is one the exchange completes at once and a
//!   `Response` carrying our payload goes back; otherwise a `Request` goes to the peer;
//! - an arriving `Request` matches a pending bound post for its sender, else the oldest
//!   pending wildcard post of the addressed instance, else it waits in the unexpected list
//!   (bounded: when full the sender gets a `Reject` and its post fails with
//!   `GNI_POST_ERROR`); a match completes the local post and answers with a `Response`;
//! - a `Response` completes the post it names; a late one (the post already completed because
//!   both sides' requests crossed) is dropped;
//! - a `Response` that consumed the responder's own crossing request names it (`consumed`) so
//!   that, should that request arrive after the response, it is dropped (a tombstone) instead
//!   of matching a later post;
//! - cancelling a bound post sends `Cancel`, which removes its request from the peer's
//!   unexpected list.
//!
//! Domains are `(ptag, cookie)`: a datagram only ever matches posts of the same domain.
//! Datagrams between two instances on the same NIC never touch the hardware: the matcher
//! loops them back itself.
//!
//! Modules: `wire` (the messages), `matcher` (the matching).

mod matcher;
mod wire;

pub use matcher::{
    DgramCounters, DgramState, Matcher, Outgoing, Post, PostError, PostSpec, REQUEST_RESENDS,
};
pub use wire::{Domain, MAX_PAYLOAD, WIRE_HEADER, WIRE_MAX, Wire, WireError, WireKind};

#[cfg(test)]
mod tests;
