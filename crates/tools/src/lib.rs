//! Tools over the user libraries, run on emulated machines built by `platform`: the
//! HPE-style Cassini diagnostics and latency/bandwidth utilities ([`cxi`]) and their Gemini
//! counterparts ([`gni`]). They are programs, not library: `userlib` stays the library alone,
//! and only these programs (and the CLI) know that the NICs under them are emulated.

#![forbid(unsafe_code)]

pub mod cxi;
pub mod gni;
pub mod osu;
pub mod plot;
pub mod progress;
