//! The objects behind the C handles (`gni_cdm_handle_t`, `gni_nic_handle_t`,
//! `gni_cq_handle_t`, `gni_ep_handle_t`) and the tables that resolve a handle.
//!
//! A handle is an opaque non-null number the library chose, never a pointer it would follow:
//! every call looks its handles up in the table of their kind, so a stale, foreign or
//! made-up handle is `GNI_RC_INVALID_PARAM`, never a crash. Numbers are not reused while the
//! process lives.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use firmware_spec::gemini::gni::ReturnCode;
use userlib::gni::{Cdm, Cq, Ep, Nic};

use crate::host::Process;

/// What a C out-buffer of a datagram is: its address and size, written when the exchange
/// completes (the caller keeps it valid until then, uGNI's contract).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutBuf {
    pub(crate) addr: usize,
    pub(crate) len: usize,
}

/// A communication domain.
pub(crate) struct CdmObj {
    pub(crate) cdm: Mutex<Option<Cdm>>,
    pub(crate) process: Arc<Process>,
    /// The NIC handle of its attach, once attached.
    pub(crate) nic: Mutex<Option<usize>>,
}

/// An attached domain's NIC.
pub(crate) struct NicObj {
    pub(crate) nic: Nic,
    pub(crate) cdm: usize,
}

/// A C CQ event handler and its context.
#[derive(Clone, Copy)]
pub(crate) struct Handler {
    pub(crate) func: unsafe extern "C" fn(*mut u64, *mut std::ffi::c_void),
    pub(crate) context: usize,
}

/// A completion queue.
pub(crate) struct CqObj {
    pub(crate) cq: Cq,
    /// The NIC it was made on (for progress while waiting).
    pub(crate) nic: Nic,
    pub(crate) cdm: usize,
    pub(crate) handler: Option<Handler>,
    /// `GNI_CqInterruptMask` depth (blocking CQs).
    pub(crate) masked: Mutex<u32>,
}

/// An endpoint.
pub(crate) struct EpObj {
    pub(crate) ep: Ep,
    pub(crate) cdm: usize,
    /// The out-buffer of the outstanding datagram.
    pub(crate) out: Mutex<Option<OutBuf>>,
}

/// One kind of handle.
pub(crate) struct Table<T> {
    map: RwLock<BTreeMap<usize, Arc<T>>>,
    /// Low bits of every handle of this kind.
    kind: usize,
}

/// The next handle number (shared by every kind, so numbers are never reused).
static NEXT: AtomicUsize = AtomicUsize::new(1);

impl<T> Table<T> {
    const fn new(kind: usize) -> Self {
        Table {
            map: RwLock::new(BTreeMap::new()),
            kind,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<usize, Arc<T>>> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<usize, Arc<T>>> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keep `v` and give its new handle.
    pub(crate) fn insert(&self, v: T) -> usize {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let h = 0x1000 + (n << 4) + self.kind;
        self.write().insert(h, Arc::new(v));
        h
    }

    /// The object of handle `h`; `GNI_RC_INVALID_PARAM` for one that names none.
    pub(crate) fn get(&self, h: usize) -> Result<Arc<T>, ReturnCode> {
        self.read().get(&h).cloned().ok_or(ReturnCode::InvalidParam)
    }

    /// Forget handle `h`.
    pub(crate) fn remove(&self, h: usize) -> Option<Arc<T>> {
        self.write().remove(&h)
    }

    /// Forget every handle whose object `pred` selects.
    pub(crate) fn remove_where(&self, pred: impl Fn(&T) -> bool) {
        self.write().retain(|_, v| !pred(v));
    }

    /// Objects of this kind.
    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }
}

/// Communication domains.
pub(crate) static CDMS: Table<CdmObj> = Table::new(1);
/// NIC handles.
pub(crate) static NICS: Table<NicObj> = Table::new(2);
/// Completion queues.
pub(crate) static CQS: Table<CqObj> = Table::new(3);
/// Endpoints.
pub(crate) static EPS: Table<EpObj> = Table::new(4);

/// Forget every handle made under domain `cdm` (`GNI_CdmDestroy` released their objects).
pub(crate) fn forget_domain(cdm: usize) {
    EPS.remove_where(|e| e.cdm == cdm);
    CQS.remove_where(|c| c.cdm == cdm);
    NICS.remove_where(|n| n.cdm == cdm);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_unique_per_kind_and_never_null() {
        let t: Table<u32> = Table::new(5);
        let a = t.insert(1);
        let b = t.insert(2);
        assert_ne!(a, b);
        assert_ne!(a, 0);
        assert_eq!(a & 0xF, 5);
        assert_eq!(*t.get(a).unwrap(), 1);
        assert_eq!(t.get(a + 1).err(), Some(ReturnCode::InvalidParam));
        assert_eq!(t.get(0).err(), Some(ReturnCode::InvalidParam));
        t.remove(a);
        assert_eq!(t.get(a).err(), Some(ReturnCode::InvalidParam));
        t.remove_where(|v| *v == 2);
        assert_eq!(t.len(), 0);
    }
}
