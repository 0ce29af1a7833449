//! The Cassini driver against the emulated device: probe, isolation between clients, cleanup
//! on close, exhaustion, the ATU, the uAPI checks, reset, and a property test over random
//! request sequences.

mod common;
mod e2e;
mod isolation;
mod lifecycle;
mod probe;
mod random;
mod real_uapi;
mod resources;
mod uapi;
