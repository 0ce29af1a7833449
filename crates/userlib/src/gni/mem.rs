//! Memory registration (gemini.md §1.4): `GNI_MemRegister` / `GNI_MemDeregister` through
//! kgni, which programs an MDD for the region and returns the memory handle
//! ([`MemHandle`], sent to peers as is).

use firmware_spec::gemini::gni::MemFlags;
use firmware_spec::gemini::mdd::{MemHandle, MemHandleInfo};

use super::cdm::Nic;
use super::cq::Cq;
use super::error::{GniError, Result};

impl Nic {
    /// `GNI_MemRegister(nic, addr, len, dst_cq, flags)`: register `[addr, addr + len)` of
    /// the process's memory. `dst_cq` receives the remote events of PUTs, SMSG messages and
    /// CQ writes that land in the region. `GNI_RC_INVALID_PARAM` for a zero length or a
    /// range outside the process's buffers.
    pub fn mem_register(
        &self,
        addr: u64,
        len: u64,
        dst_cq: Option<&Cq>,
        flags: MemFlags,
    ) -> Result<MemHandle> {
        if len == 0 {
            return Err(GniError::param("zero-length registration"));
        }
        Ok(self.inner.client.mem_register(
            self.inner.cdm_id(),
            addr,
            len,
            dst_cq.map(|c| driver::gemini::CqId(c.id())),
            flags,
        )?)
    }

    /// `GNI_MemDeregister(nic, &mh)`.
    pub fn mem_deregister(&self, handle: &MemHandle) -> Result<()> {
        self.inner
            .client
            .mem_deregister(self.inner.cdm_id(), *handle)?;
        Ok(())
    }
}

/// What a memory handle says (`GNI_MemHndlQueryAttr`-like): region start, MDH, pages,
/// flags. `GNI_RC_INVALID_PARAM` for a corrupt handle (bad CRC).
pub fn handle_info(handle: &MemHandle) -> Result<MemHandleInfo> {
    handle
        .decode()
        .map_err(|_| GniError::param("corrupt memory handle"))
}

/// The offset of `addr` inside the region of `info` (how the NIC addresses it), checking
/// that `[addr, addr + len)` lies inside.
pub(crate) fn offset_in(
    info: &MemHandleInfo,
    addr: u64,
    len: u64,
    what: &'static str,
) -> Result<u64> {
    if !info.contains(addr, len) {
        return Err(GniError::param(what));
    }
    Ok(addr - info.va)
}
