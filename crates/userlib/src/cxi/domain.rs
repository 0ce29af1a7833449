//! Domains (`cxil_alloc_domain`, `cxil_reserve_domain`): an addressable (VNI, PID) endpoint
//! range; PtlTEs are mapped at indices inside its PID granule.

use std::sync::Arc;

use driver::cassini::uapi::{DomainAllocCmd, DomainFreeCmd, DomainReserveCmd};

use super::error::Result;
use super::lni::{Lni, LniInner};

pub(crate) struct DomainInner {
    pub(crate) lni: Arc<LniInner>,
    pub(crate) id: u32,
    pub(crate) vni: u32,
    pub(crate) pid: u32,
}

impl Drop for DomainInner {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&DomainFreeCmd {
            domain: self.id,
            ..DomainFreeCmd::default()
        }) {
            tracing::warn!(domain = self.id, error = %e, "DOMAIN_FREE failed");
        }
    }
}

/// A domain (`struct cxil_domain`): VNI and PID. Freed when it and every PtlTE mapping of it
/// are dropped.
#[derive(Clone)]
pub struct Domain {
    pub(crate) inner: Arc<DomainInner>,
}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain")
            .field("vni", &self.inner.vni)
            .field("pid", &self.inner.pid)
            .finish()
    }
}

impl Domain {
    /// The VNI.
    pub fn vni(&self) -> u32 {
        self.inner.vni
    }

    /// The PID (the one the driver gave for `C_PID_ANY`).
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// The domain handle.
    pub fn id(&self) -> u32 {
        self.inner.id
    }
}

impl Lni {
    /// `cxil_alloc_domain(lni, vni, pid)`; `pid` may be `C_PID_ANY`.
    pub fn alloc_domain(&self, vni: u32, pid: u32) -> Result<Domain> {
        let r = self.dev().client.call(&DomainAllocCmd {
            lni: self.id(),
            vni,
            pid,
            ..DomainAllocCmd::default()
        })?;
        Ok(Domain {
            inner: Arc::new(DomainInner {
                lni: Arc::clone(&self.inner),
                id: r.domain,
                vni: r.vni,
                pid: r.pid,
            }),
        })
    }

    /// `cxil_reserve_domain(lni, vni, pid, count)`: reserve `count` contiguous PIDs
    /// (`pid` may be `C_PID_ANY`); returns the first.
    pub fn reserve_domain(&self, vni: u32, pid: u32, count: u32) -> Result<u32> {
        let r = self.dev().client.call(&DomainReserveCmd {
            lni: self.id(),
            vni,
            pid,
            count,
            ..DomainReserveCmd::default()
        })?;
        Ok(r.pid)
    }
}
