//! libcxi-like user library for Cassini (cassini.md §8.1), in idiomatic Rust.
//!
//! Modules follow libcxi: [`device`] (device list, open), [`lni`] (LNIs, wait objects),
//! [`cp`] (communication profiles), [`domain`], [`md`] (memory descriptors), [`cmdq`]
//! (command queues: the ring writer and an emitter for every command), [`evtq`] (event
//! queues), [`pte`] (portal table entries), [`ct`] (counting events), [`trig`] (triggered
//! operations), [`csr`] (CSR and counter reads), and [`wait`] (waiting on either engine).
//! The tools built on it (`nicemu stat`, `dump-csrs`, the latency/bandwidth tools) live in
//! the `tools` crate.
//!
//! Control operations are driver uAPI requests and mmap tokens; commands are stores into the
//! mapped ring, doorbells 64-bit stores into mapped BAR pages, events and counter
//! write-backs loads from user memory: no driver call on the fast path. Every value that
//! crosses to the device is a `firmware_spec::cassini` format. Objects free themselves on
//! drop, after the objects that depend on them (each holds its parents).

pub mod cmdq;
pub mod cp;
pub mod csr;
pub mod ct;
pub mod device;
pub mod devinfo;
pub mod domain;
pub mod error;
pub mod evtq;
pub mod lni;
pub mod md;
pub mod pte;
pub mod ring;
pub mod trig;
pub mod wait;

pub use cmdq::{CmdQueue, CqOptions};
pub use cp::Cp;
pub use csr::{Counter, Csrs};
pub use ct::Ct;
pub use device::{Device, OpenOptions, open_device, open_device_with};
pub use devinfo::{CXI_DEFAULT_SVC_ID, DeviceInfo, get_device_list};
pub use domain::Domain;
pub use error::{CxiError, Result};
pub use evtq::{EqOptions, EventQueue};
pub use lni::{Lni, WaitObj};
pub use md::Md;
pub use pte::{Pte, PteMap, PteStatusInfo};
pub use ring::{RingMemory, RingWriter};

/// Addressing helpers (`cxi_build_dfa`, `CXI_MATCH_ID`, ...), from `firmware_spec`.
pub mod dfa {
    pub use firmware_spec::cassini::dfa::{
        C_NID_ANY, C_PID_ANY, C_RANK_ANY, CXI_MATCH_ID_ANY, PidBits, build_dfa, build_mcast_dfa,
        dfa_ep, dfa_nid, dfa_pid, dfa_to_init, match_id, match_id_ep, match_id_pid,
    };
}

use firmware_spec::cassini::event::Event;
use firmware_spec::cassini::rc::ReturnCode;

/// `cxi_event_rc`: the return code of an event.
pub fn event_rc(ev: &Event) -> ReturnCode {
    ev.return_code()
}

/// `cxi_event_to_str`: the event type's name.
pub fn event_to_str(ev: &Event) -> &'static str {
    ev.event_type().name()
}

/// `cxi_rc_to_str`: a return code's name.
pub fn rc_to_str(rc: ReturnCode) -> &'static str {
    rc.name()
}
