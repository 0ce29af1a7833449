//! Wait objects: MSI-X vectors handed to clients.

use super::*;

impl Op<'_> {
    // ---- Wait objects ----

    pub(crate) fn wait_alloc(&mut self, c: &WaitAllocCmd) -> Result<WaitAllocResp, Errno> {
        self.lni(c.lni)?;
        let vector = self.st.wait_vec.alloc().ok_or(Errno::Enospc)?;
        // A fresh wait object starts with nothing pending.
        if let Some(w) = self.dev.vector(vector) {
            w.poll();
        }
        let id = vector + 1;
        self.st.waits.insert(
            id,
            Wait {
                client: self.client,
                lni: c.lni,
                vector,
                refs: 0,
            },
        );
        lni_ref(self.st, c.lni, 1);
        Ok(WaitAllocResp {
            client_id: self.client,
            wait: id,
        })
    }

    pub(crate) fn wait_free(&mut self, c: &WaitFreeCmd) -> Result<(), Errno> {
        if owned!(self.st.waits, c.wait, self.client).refs > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_wait(self.st, c.wait);
        Ok(())
    }

    /// The wait object behind a wait handle.
    pub(crate) fn wait_object(&self, wait: u32) -> Result<Arc<WaitObject>, Errno> {
        let v = owned!(self.st.waits, wait, self.client).vector;
        self.dev.vector(v).ok_or(Errno::Einval)
    }
}
