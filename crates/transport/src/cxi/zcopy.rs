//! Zero copy on a node hosted in this process (the NIC reaches the process's own memory):
//! a send of the application's buffer is an eager or rendezvous put straight from it, a
//! receive into the application's buffer a priority LE over it, through registrations of
//! the registration cache (`crate::regcache`), as libfabric's CXI provider registers user
//! buffers through its MR cache. What the NIC cannot place in the buffer itself (a message
//! already waiting in software after flow control, software or hybrid matching) is written
//! there at completion, so a zero-copy receive always completes in place.

use super::CxiTransport;
use super::config::MatchMode;
use super::endpoint::Buf;
use crate::error::{Error, Result};
use crate::regcache::Hit;
use crate::{MatchSpec, OpId, Rank, SendMode};
use userlib::cxi::Md;

impl CxiTransport {
    /// The registration of `[va, va + len)` (`len > 0`) of the application's memory, found
    /// in the registration cache or made.
    fn user_reg(&mut self, va: u64, len: usize) -> Result<Hit<Md>> {
        let space = self.ep.dev.space().clone();
        let ep = &mut self.ep;
        self.zc
            .cache
            .get(&space, va, len as u64, |pages| ep.map_user(pages))?
            .ok_or_else(|| {
                Error::Arg(format!(
                    "cxi: the buffer [{va:#x}, +{len}) is not mapped memory of this process"
                ))
            })
    }

    /// A registered buffer over `[va, va + len)` (`len > 0`) of the application's memory.
    fn user_buf(&mut self, va: u64, len: usize) -> Result<Buf> {
        let hit = self.user_reg(va, len)?;
        Ok(Buf {
            mem: hit.mem,
            md: hit.reg.handle.clone(),
            user: true,
        })
    }

    pub(super) fn zc_send(
        &mut self,
        dest: Rank,
        bits: u64,
        va: u64,
        len: usize,
        mode: SendMode,
    ) -> Result<OpId> {
        self.check()?;
        self.check_rank(dest)?;
        let sync = mode == SendMode::Synchronous;
        if len <= super::config::IDC_MAX {
            // Too small to be worth a registration: the command carries it.
            let buf = self.user_buf(va, len.max(1))?;
            let data = buf.read(0, len)?;
            return self.start_send(dest, bits, &data, sync);
        }
        let buf = self.user_buf(va, len)?;
        self.start_send_buf(dest, bits, len, sync, buf)
    }

    pub(super) fn zc_recv(&mut self, spec: MatchSpec, va: u64, capacity: usize) -> Result<OpId> {
        self.check()?;
        if let Some(s) = spec.source {
            self.check_rank(s)?;
        }
        let dest = match capacity {
            0 => None,
            n => Some(self.user_buf(va, n)?),
        };
        self.fc_settle()?;
        let in_hardware = !self.software && self.cfg.mode == MatchMode::Hardware;
        if in_hardware && let Some(buf) = dest {
            if let Some((_, op)) = self.sw_take(&spec, capacity)? {
                // Already in software (replayed after flow control): copied in at the end.
                self.zc.dest.insert(op, Some(buf.mem));
                self.bump("recv_zero_copy_fallback");
                return Ok(op);
            }
            return self.hw_recv_in_place(spec, capacity, buf);
        }
        let op = if self.software {
            self.sw_recv(spec, capacity)?
        } else if let Some((_, op)) = self.sw_take(&spec, capacity)? {
            op
        } else {
            self.hw_recv(spec, capacity)?
        };
        self.zc.dest.insert(op, dest.map(|b| b.mem));
        self.bump("recv_zero_copy_fallback");
        Ok(op)
    }

    pub(super) fn zc_keep(&mut self, va: u64, len: usize) -> Result<()> {
        if len == 0 || self.zc.min(self.ep.dev.process_memory()).is_none() {
            return Ok(());
        }
        let hit = self.user_reg(va, len)?;
        self.zc.keep(va, hit);
        Ok(())
    }
}
