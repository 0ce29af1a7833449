//! The C boundary: every exported `MPI_*` function. Each converts its pointer arguments
//! (out-parameters, arrays, strings, data buffers) with [`mem`] and calls the safe logic of
//! the crate through `state::call`, which also routes errors to the error handlers.
//!
//! Safety: every exported function relies on its caller following the MPI standard's
//! contract for its arguments (valid pointers of the sizes the arguments say, or null where
//! the standard allows it); that contract is the `# Safety` section of each of them.

#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc, non_snake_case)]

pub(crate) mod callbacks;
pub(crate) mod coll;
pub(crate) mod comm;
pub(crate) mod convert;
pub(crate) mod dtype;
pub(crate) mod env;
pub(crate) mod mem;
pub(crate) mod p2p;
pub(crate) mod rma;
pub(crate) mod unsupported;

use std::ffi::c_int;

use crate::requests::StatusInfo;

/// `MPI_Status` of the standard ABI: 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MpiStatus {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    /// Ours: the length in bytes (low, high 32 bits), cancelled flag.
    pub internal: [c_int; 5],
}

const _: () = assert!(std::mem::size_of::<MpiStatus>() == 32);

impl MpiStatus {
    fn set(&mut self, st: &StatusInfo) {
        self.source = st.source;
        self.tag = st.tag;
        self.internal[0] = (st.len as u64 & 0xffff_ffff) as u32 as c_int;
        self.internal[1] = ((st.len as u64) >> 32) as u32 as c_int;
        self.internal[2] = c_int::from(st.cancelled);
    }

    fn len(&self) -> usize {
        (u64::from(self.internal[0] as u32) | (u64::from(self.internal[1] as u32) << 32)) as usize
    }
}

/// Fill an optional status.
fn fill(p: Option<&mut MpiStatus>, st: &StatusInfo) {
    if let Some(p) = p {
        p.set(st);
    }
}
