//! uGNI-like user library for Gemini (gemini.md §1), in idiomatic Rust.
//!
//! Modules follow uGNI: [`cdm`] (`GNI_CdmCreate` / `GNI_CdmAttach` → a [`Nic`] handle),
//! [`cq`] (completion queues: create, get/test/wait event, overrun, `GetCompleted`, the
//! `gni_cq_get_*` accessors), [`mem`] (`GNI_MemRegister` / `GNI_MemDeregister`), [`ep`]
//! (endpoints: create, bind, event data, datagrams), [`post`] (`GNI_PostFma`,
//! `GNI_PostRdma`, `GNI_PostCqWrite`), [`amo`] (AMO descriptors, posted with `PostFma`),
//! [`smsg`] (short messages into per-peer mailboxes with credits), and [`wait`] (waiting on
//! either engine). The `nicemu gni-*` latency and bandwidth tools live in the `tools` crate.
//!
//! The fast path is OS bypass: FMA posts (PUT, GET, AMO, CQ write, SMSG) program the CDM's
//! FMA descriptor through its mapped user alias page and store into the mapped FMA windows;
//! CQ events are loads from the CQ ring in host memory, and the consumed index goes back with
//! a store to the CQ's mapped alias page. Only the control path (CDM, CQ, registration,
//! endpoints, datagrams, the FMA descriptor's CQ) and the BTE (`PostRdma`, OS-mediated as in
//! kgni) are driver requests. Every value that crosses to the device is a
//! `firmware_spec::gemini` format, and every return code is a real `gni_return_t`
//! ([`ReturnCode`]). The library never sees emulator types.
//!
//! Layout choices of our own (SMSG mailbox protocol, CQE packing, GetCompleted matching) are
//! described in `docs/userlib-gni.md`.

pub mod amo;
pub mod cdm;
pub mod cq;
pub mod ep;
pub mod error;
mod fma;
pub mod mem;
mod objects;
pub mod post;
pub mod smsg;
mod sync;
pub mod wait;

pub use cdm::{Cdm, Nic};
pub use cq::{Completed, Cq, CqEvent};
pub use ep::Ep;
pub use error::{GniError, Result};
pub use smsg::{SmsgInPlace, SmsgMsg};
pub use wait::{Progress, ProgressHook};

pub use driver::gemini::{DatagramResult, EpId};
pub use firmware_spec::gemini::amo::AmoCmd;
pub use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};
pub use firmware_spec::gemini::gni::{
    CdmMode, CqEventMode, CqEventType, CqMode, DlvrMode, MemFlags, NicDevice, PostState, PostType,
    RdmaMode, ReturnCode, SmsgType,
};
pub use firmware_spec::gemini::mdd::MemHandle;
pub use firmware_spec::gemini::post::PostDescriptor;
pub use firmware_spec::gemini::smsg::SmsgAttr;

/// `gni_err_str[rc]`: the C name of a return code.
pub fn err_str(rc: ReturnCode) -> &'static str {
    rc.name()
}

/// `GNI_GetVersion`: the uGNI version this library implements (`gni_pub.h` 0x5c).
pub fn get_version() -> u32 {
    firmware_spec::gemini::gni::VERSION
}

/// `GNI_GetDeviceType`.
pub fn get_device_type() -> NicDevice {
    NicDevice::Gemini
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_their_real_values() {
        assert_eq!(ReturnCode::NotDone.code(), 1);
        assert_eq!(ReturnCode::ErrorResource.code(), 3);
        assert_eq!(ReturnCode::ErrorNomem.code(), 13);
        assert_eq!(err_str(ReturnCode::NoMatch), "GNI_RC_NO_MATCH");
        assert_eq!(get_version(), 0x5c_0000);
        assert_eq!(get_device_type().code(), 0);
    }
}
