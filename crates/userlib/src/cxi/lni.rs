//! Logical network interfaces (`cxil_alloc_lni`): a process's group of resources on one
//! device (a resource group, RGID, with its address contexts). Every other object is
//! allocated through an [`Lni`] and keeps it alive; the LNI is freed when the last of them
//! goes.

use std::sync::Arc;

use driver::cassini::uapi::{LniFreeCmd, WaitAllocCmd, WaitFreeCmd};
use driver::pci::WaitObject;

use super::devinfo::DevShared;
use super::error::Result;

/// The LNI itself, shared by everything allocated through it.
pub(crate) struct LniInner {
    pub(crate) dev: Arc<DevShared>,
    pub(crate) id: u32,
}

impl Drop for LniInner {
    fn drop(&mut self) {
        if let Err(e) = self.dev.client.call(&LniFreeCmd {
            lni: self.id,
            ..LniFreeCmd::default()
        }) {
            tracing::warn!(lni = self.id, error = %e, "LNI_FREE failed");
        }
    }
}

/// A logical network interface (`struct cxil_lni`).
#[derive(Clone)]
pub struct Lni {
    pub(crate) inner: Arc<LniInner>,
}

impl std::fmt::Debug for Lni {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lni").field("id", &self.inner.id).finish()
    }
}

impl Lni {
    pub(crate) fn new(dev: Arc<DevShared>, id: u32) -> Self {
        Lni {
            inner: Arc::new(LniInner { dev, id }),
        }
    }

    /// The LNI handle (its resource group).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    pub(crate) fn dev(&self) -> &Arc<DevShared> {
        &self.inner.dev
    }

    /// `cxil_alloc_wait_obj`: a wait object that EQ interrupts can wake.
    pub fn alloc_wait_obj(&self) -> Result<WaitObj> {
        let r = self.inner.dev.client.call(&WaitAllocCmd {
            lni: self.inner.id,
            ..WaitAllocCmd::default()
        })?;
        let obj = self.inner.dev.client.wait_object(r.wait)?;
        Ok(WaitObj {
            inner: Arc::new(WaitInner {
                lni: Arc::clone(&self.inner),
                id: r.wait,
                obj,
            }),
        })
    }
}

pub(crate) struct WaitInner {
    pub(crate) lni: Arc<LniInner>,
    pub(crate) id: u32,
    pub(crate) obj: Arc<WaitObject>,
}

impl Drop for WaitInner {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&WaitFreeCmd {
            wait: self.id,
            ..WaitFreeCmd::default()
        }) {
            tracing::warn!(wait = self.id, error = %e, "WAIT_FREE failed");
        }
    }
}

/// A wait object (`struct cxil_wait_obj`): where the interrupts of EQs allocated with it
/// land. [`WaitObj::wait`] blocks; [`WaitObj::clear`] is `cxil_clear_wait_obj`.
#[derive(Clone)]
pub struct WaitObj {
    pub(crate) inner: Arc<WaitInner>,
}

impl std::fmt::Debug for WaitObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitObj")
            .field("id", &self.inner.id)
            .finish()
    }
}

impl WaitObj {
    /// The wait handle.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// Block until an interrupt arrives or `timeout` passes; the number of interrupts taken
    /// (read-to-clear), `None` on timeout.
    pub fn wait(&self, timeout: Option<std::time::Duration>) -> Option<u64> {
        self.inner.obj.wait(timeout)
    }

    /// `cxil_clear_wait_obj`: take pending interrupts without blocking; how many there were.
    pub fn clear(&self) -> u64 {
        self.inner.obj.poll()
    }

    /// Interrupts ever delivered to this object.
    pub fn interrupts(&self) -> u64 {
        self.inner.obj.signal_count()
    }
}
