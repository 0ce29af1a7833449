//! Memory descriptors (`cxil_map`, `cxil_unmap`, `cxil_update_md`): user memory made
//! reachable by the NIC at an IOVA in the LNI's address context, and the IOVA helpers
//! (`CXI_VA_TO_IOVA`, `CXI_IOVA_TO_VA`, `CXI_MD_CONTAINS`).

use std::sync::Arc;

use driver::cassini::uapi::{AtuMapCmd, AtuUnmapCmd, AtuUpdateMdCmd};
use driver::mem::UserMemory;
use firmware_spec::cassini::le::MapFlags;

use super::error::{CxiError, Result};
use super::lni::{Lni, LniInner};

pub(crate) struct MdInner {
    pub(crate) lni: Arc<LniInner>,
    pub(crate) id: u32,
    pub(crate) iova: u64,
    pub(crate) va: u64,
    pub(crate) len: u64,
    pub(crate) lac: u8,
    pub(crate) page_shift: u32,
}

impl Drop for MdInner {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&AtuUnmapCmd {
            id: self.id,
            ..AtuUnmapCmd::default()
        }) {
            tracing::warn!(md = self.id, error = %e, "ATU_UNMAP failed");
        }
    }
}

/// A memory descriptor (`struct cxi_md`): page-aligned `[va, va + len)` mapped at `iova`,
/// named in commands and LEs by `lac`. Unmapped when it and every EQ using it are dropped.
#[derive(Clone)]
pub struct Md {
    pub(crate) inner: Arc<MdInner>,
}

impl std::fmt::Debug for Md {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Md")
            .field("id", &self.inner.id)
            .field("iova", &format_args!("{:#x}", self.inner.iova))
            .field("va", &format_args!("{:#x}", self.inner.va))
            .field("len", &format_args!("{:#x}", self.inner.len))
            .field("lac", &self.inner.lac)
            .finish()
    }
}

impl Md {
    /// MD id.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// IOVA of [`Md::va`].
    pub fn iova(&self) -> u64 {
        self.inner.iova
    }

    /// Page-aligned virtual address.
    pub fn va(&self) -> u64 {
        self.inner.va
    }

    /// Page-aligned length.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Never true: a descriptor maps at least one page.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The LAC commands and LEs name.
    pub fn lac(&self) -> u8 {
        self.inner.lac
    }

    /// Base page shift.
    pub fn page_shift(&self) -> u32 {
        self.inner.page_shift
    }

    /// `CXI_MD_CONTAINS`: whether `[va, va + len)` lies inside the descriptor.
    pub fn contains(&self, va: u64, len: u64) -> bool {
        va >= self.inner.va
            && va
                .checked_add(len)
                .is_some_and(|end| end <= self.inner.va + self.inner.len)
    }

    /// `CXI_VA_TO_IOVA`: the IOVA of `va` (which must be inside the descriptor).
    pub fn va_to_iova(&self, va: u64) -> Result<u64> {
        if !self.contains(va, 0) || va == self.inner.va + self.inner.len {
            return Err(CxiError::Invalid("address outside the memory descriptor"));
        }
        Ok(self.inner.iova + (va - self.inner.va))
    }

    /// `CXI_IOVA_TO_VA`: the virtual address of `iova`.
    pub fn iova_to_va(&self, iova: u64) -> Result<u64> {
        if iova < self.inner.iova || iova >= self.inner.iova + self.inner.len {
            return Err(CxiError::Invalid("IOVA outside the memory descriptor"));
        }
        Ok(self.inner.va + (iova - self.inner.iova))
    }

    /// The IOVA of byte `offset` of `buf` (which this descriptor must cover).
    pub fn iova_of(&self, buf: &UserMemory, offset: u64) -> Result<u64> {
        let va = buf
            .va()
            .checked_add(offset)
            .ok_or(CxiError::Invalid("offset overflows"))?;
        self.va_to_iova(va)
    }

    /// `cxil_update_md`: (re)map `[va, va + len)` (inside the descriptor) with `flags`, e.g.
    /// to fill a descriptor allocated with `CXI_MAP_ALLOC_MD`.
    pub fn update(&self, va: u64, len: u64, flags: MapFlags) -> Result<()> {
        self.inner.lni.dev.client.call(&AtuUpdateMdCmd {
            id: self.inner.id,
            va,
            len,
            flags: flags.bits(),
            ..AtuUpdateMdCmd::default()
        })?;
        Ok(())
    }
}

impl Lni {
    /// `cxil_map(lni, va, len, flags, NULL)`: map user memory for the NIC.
    pub fn map(&self, va: u64, len: u64, flags: MapFlags) -> Result<Md> {
        let r = self.dev().client.call(&AtuMapCmd {
            lni: self.id(),
            va,
            len,
            flags: flags.bits(),
            ..AtuMapCmd::default()
        })?;
        Ok(Md {
            inner: Arc::new(MdInner {
                lni: Arc::clone(&self.inner),
                id: r.md.id,
                iova: r.md.iova,
                va: r.md.va,
                len: r.md.len,
                lac: r.md.lac,
                page_shift: u32::try_from(r.md.page_shift).unwrap_or(12),
            }),
        })
    }

    /// Map a whole user buffer with `flags`.
    pub fn map_buffer(&self, buf: &UserMemory, flags: MapFlags) -> Result<Md> {
        self.map(buf.va(), buf.len(), flags)
    }
}
