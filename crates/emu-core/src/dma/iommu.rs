//! The platform IOMMU context of a device ([`Iommu`]): passthrough, or a translation table
//! the driver side maps and unmaps, shared with the device's port.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::memory::GuestAddress;

use super::access::{MapError, Perm};
use super::table::TranslationTable;

/// How the platform IOMMU treats a device's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IommuMode {
    /// IOVA == host physical address; only bounds are checked, everything is read/write.
    Passthrough,
    /// Every access goes through the table.
    Translate(TranslationTable),
}

/// The platform IOMMU context of one device: shared between the driver side (which maps and
/// unmaps) and the device's [`DmaPort`] (which translates), behind a read/write lock.
///
/// Whether the mode is passthrough is also kept in an atomic flag, so that passthrough
/// accesses (the emulated nodes' default) take no lock at all. A mode change is therefore
/// not synchronised with accesses already under way: one that started under the old mode
/// may complete under it. Drivers change modes while the device is quiescent.
#[derive(Clone)]
pub struct Iommu {
    state: Arc<IommuState>,
}

struct IommuState {
    mode: RwLock<IommuMode>,
    /// `matches!(mode, IommuMode::Passthrough)`, stored under the write lock.
    passthrough: AtomicBool,
}

impl fmt::Debug for Iommu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.state.mode.try_read() {
            Ok(g) => match &*g {
                IommuMode::Passthrough => f.write_str("Iommu(passthrough)"),
                IommuMode::Translate(t) => write!(f, "Iommu(translate, {} mappings)", t.len()),
            },
            Err(_) => f.write_str("Iommu(<locked>)"),
        }
    }
}

impl Iommu {
    /// An IOMMU in passthrough mode.
    pub fn passthrough() -> Self {
        Self::with_mode(IommuMode::Passthrough)
    }
    /// An IOMMU translating through an empty table (every access faults until mapped).
    pub fn translating() -> Self {
        Self::with_mode(IommuMode::Translate(TranslationTable::new()))
    }
    /// An IOMMU in the given mode.
    pub fn with_mode(mode: IommuMode) -> Self {
        let passthrough = AtomicBool::new(matches!(mode, IommuMode::Passthrough));
        Iommu {
            state: Arc::new(IommuState {
                mode: RwLock::new(mode),
                passthrough,
            }),
        }
    }

    /// Whether two handles are the same IOMMU context.
    pub fn same_as(&self, other: &Iommu) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// Whether this context's lock comes before `other`'s in the one global order in which
    /// two of them are taken together (so that two opposite copies cannot deadlock with a
    /// waiting writer).
    pub(super) fn locks_before(&self, other: &Iommu) -> bool {
        Arc::as_ptr(&self.state) < Arc::as_ptr(&other.state)
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, IommuMode> {
        // The lock protects plain data that every writer leaves consistent between calls;
        // a panic elsewhere does not invalidate it.
        self.state.mode.read().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, IommuMode> {
        self.state.mode.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the IOMMU is in passthrough mode (one atomic load, no lock).
    pub fn is_passthrough(&self) -> bool {
        self.state.passthrough.load(Ordering::Acquire)
    }
    /// Replace the mode (e.g. switch to passthrough, or install a table). See the type's
    /// note on accesses under way.
    pub fn set_mode(&self, mode: IommuMode) {
        let mut g = self.write();
        let pt = matches!(mode, IommuMode::Passthrough);
        *g = mode;
        self.state.passthrough.store(pt, Ordering::Release);
    }
    /// A copy of the current mode.
    pub fn mode(&self) -> IommuMode {
        self.read().clone()
    }

    /// Map `[iova, iova + len)` to host memory at `host` with `perm`.
    pub fn map(&self, iova: u64, host: GuestAddress, len: u64, perm: Perm) -> Result<(), MapError> {
        match &mut *self.write() {
            IommuMode::Passthrough => Err(MapError::Passthrough),
            IommuMode::Translate(t) => t.map(iova, host.0, len, perm),
        }
    }
    /// Unmap `[iova, iova + len)`, see [`TranslationTable::unmap`].
    pub fn unmap(&self, iova: u64, len: u64) -> Result<(), MapError> {
        match &mut *self.write() {
            IommuMode::Passthrough => Err(MapError::Passthrough),
            IommuMode::Translate(t) => t.unmap(iova, len),
        }
    }
}
