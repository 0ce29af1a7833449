//! Zero copy on a node hosted in this process (the NIC reaches the process's own memory):
//! a rendezvous send registers the application's buffer itself (the registration cache,
//! `crate::regcache`, as Cray MPICH's udreg) and names it in the RTS, so the receiver GETs
//! straight from it; a receive into the application's buffer GETs straight into its
//! registration, or, when the GET would break Gemini's 4-byte rule, is granted to the
//! sender's PUT (Put Fallback) as one chunk. Zero-copy sends go by R0 whatever their size
//! (the registration is cached, so R1's bounded registrations buy nothing). What does not
//! land in place (eager messages, a truncated receive, R1 chunks) is written into the
//! buffer at completion, so a zero-copy receive always completes in place.

use driver::mem::UserMemory;
use firmware_spec::gemini::mdd::MemHandle;
use userlib::gni::Nic;

use super::rendezvous::Held;
use super::wire::{Header, Kind};
use super::{GniTransport, Staged, mem_err, register};
use crate::error::{Error, Result};
use crate::regcache::Hit;
use crate::{MatchSpec, OpId, Rank, SendMode};

/// A registration of the application's memory, deregistered when the cache and every
/// operation using it let go.
pub(super) struct GniReg {
    nic: Nic,
    pub(super) mh: MemHandle,
}

impl Drop for GniReg {
    fn drop(&mut self) {
        // A handle the NIC refuses to deregister (its CDM already closed) has nothing left.
        let _ = self.nic.mem_deregister(&self.mh);
    }
}

impl GniTransport {
    /// The registration of `[va, va + len)` (`len > 0`) of the application's memory, found
    /// in the registration cache or made.
    fn user_reg(&mut self, va: u64, len: usize) -> Result<Hit<GniReg>> {
        let space = self.nic.space().clone();
        let nic = self.nic.clone();
        self.zc
            .cache
            .get(&space, va, len as u64, |pages: &UserMemory| {
                let mh = register(&nic, pages, None, |_| {})?;
                Ok(GniReg {
                    nic: nic.clone(),
                    mh,
                })
            })?
            .ok_or_else(|| {
                Error::Arg(format!(
                    "gni: the buffer [{va:#x}, +{len}) is not mapped memory of this process"
                ))
            })
    }

    /// `[va, va + len)` (`len > 0`) of the application's memory, registered.
    fn user_stage(&mut self, va: u64, len: usize) -> Result<Staged> {
        let hit = self.user_reg(va, len)?;
        Ok(Staged {
            mem: hit.mem,
            mh: hit.reg.handle.mh,
            user: Some(hit.reg),
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
        self.check_rank(dest)?;
        if len <= self.cfg.vshort.max(self.cfg.eager) {
            // An eager message: the SMSG or bounce copy is the protocol.
            let mut data = vec![0u8; len];
            if len > 0 {
                self.user_stage(va, len)?
                    .mem
                    .read(0, &mut data)
                    .map_err(mem_err)?;
            }
            return crate::Transport::send(self, dest, bits, &data, mode);
        }
        let stage = self.user_stage(va, len)?;
        let op = self.op();
        let h = Header {
            kind: Kind::Rts,
            sync: mode == SendMode::Synchronous,
            src: self.rank,
            bits,
            len: len as u64,
            id: op.0,
            va,
            mh: stage.mh,
        };
        self.held.insert(
            op.0,
            Held::Staged {
                op,
                stage,
                skew: 0,
                len,
                put: 0,
            },
        );
        self.count("R0");
        self.count("send_zero_copy");
        self.smsg(dest, &h, &[])?;
        Ok(op)
    }

    pub(super) fn zc_recv(&mut self, spec: MatchSpec, va: u64, capacity: usize) -> Result<OpId> {
        if let Some(s) = spec.source {
            self.check_rank(s)?;
        }
        let dest = match capacity {
            0 => None,
            n => Some(self.user_stage(va, n)?),
        };
        crate::Transport::progress(self)?;
        let op = self.op();
        if let Some(d) = &dest {
            self.zc_in.insert(
                op,
                Staged {
                    mem: d.mem.clone(),
                    mh: d.mh,
                    user: d.user.clone(),
                },
            );
        }
        self.zc.dest.insert(op, dest.map(|d| d.mem));
        if let Some((u, cap)) = self.matcher.post(op, spec, capacity) {
            self.deliver(op, cap, u.envelope, u.data)?;
        }
        Ok(op)
    }

    /// The registered destination of zero-copy receive `op` for a message of `len` bytes,
    /// if the whole message fits it (taken: the receive's bytes go there).
    pub(super) fn zc_take_dest(&mut self, op: OpId, len: usize) -> Option<Staged> {
        let d = self.zc_in.remove(&op)?;
        (len as u64 <= d.mem.len()).then_some(d)
    }

    /// Give a destination back for a later step of the same receive.
    pub(super) fn zc_put_back(&mut self, op: OpId, d: Staged) {
        self.zc_in.insert(op, d);
    }

    pub(super) fn zc_keep(&mut self, va: u64, len: usize) -> Result<()> {
        if len == 0 || self.zc.min(self.nic.process_memory()).is_none() {
            return Ok(());
        }
        let hit = self.user_reg(va, len)?;
        self.zc.keep(va, hit);
        Ok(())
    }
}
