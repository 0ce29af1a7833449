//! Posts (gemini.md §1.6): `GNI_PostFma` (OS bypass: the library programs the CDM's FMA
//! descriptor through its mapped user alias and stores into the mapped windows),
//! `GNI_PostRdma` (the BTE, OS-mediated through kgni as on the real system) and
//! `GNI_PostCqWrite`. Completions are reported by [`crate::gni::Cq::get_completed`].
//!
//! Event data (uGNI's defaults, see [`crate::gni::Ep::set_event_data`]): local events carry
//! the endpoint's local event data, global and remote events its remote event data. An FMA
//! post produces one local event when all its requests are answered (LOCAL and GLOBAL both
//! mean that one event); it carries the remote event data if GLOBAL or REMOTE was asked for,
//! else the local one, and the post's transaction id in `GNI_CQ_GET_TID`.

use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::fma::SyncType;
use firmware_spec::gemini::gni::{CqEventMode, CqEventType, DlvrMode, PostType, ReturnCode};
use firmware_spec::gemini::limits;
use firmware_spec::gemini::post::PostDescriptor;

use super::ep::Ep;
use super::error::{GniError, Result};
use super::fma::{Target, Win};
use super::mem::{handle_info, offset_in};
use super::objects::{Pending, RdmaPending};
use super::sync::lock;

/// Whether `mode` asks for a local completion event.
pub(crate) fn local_events(mode: CqEventMode) -> bool {
    mode.contains(CqEventMode::LOCAL_EVENT) || mode.contains(CqEventMode::GLOBAL_EVENT)
}

/// The 56 bits of CQ data of an FMA post's events.
pub(crate) fn fma_data56(ty: CqEventType, data: u64) -> Result<u64> {
    Cqe::sw(ty, data)
        .sw_data56()
        .map_err(|_| GniError::param("event data out of range"))
}

fn check(desc: &PostDescriptor, rdma: bool, ep: &Ep) -> Result<()> {
    let rc = desc.check(rdma, ep.inner.nic.modes());
    if rc != ReturnCode::Success {
        return Err(GniError::new(rc, "post descriptor refused"));
    }
    super::amo::check_mode(desc, ep.inner.nic.modes())
}

impl Ep {
    /// `GNI_PostFma(ep, desc)`: an FMA PUT (optionally with a sync flag), GET (optionally
    /// flagged), AMO or CQ write, written straight to the NIC. Returns before the target
    /// answers. `GNI_RC_INVALID_PARAM`, `GNI_RC_ALIGNMENT_ERROR` (Gemini: GETs need
    /// 4-byte aligned addresses and length, AMO targets 8-byte alignment),
    /// `GNI_RC_ILLEGAL_OP` (an RDMA type), `GNI_RC_ERROR_RESOURCE` (too many transactions
    /// in flight), `GNI_RC_INVALID_STATE` (not bound). One post moves at most 1 GiB (the
    /// chained-FMA limit of `gni_pub.h`; our bound for a single post).
    pub fn post_fma(&self, desc: &PostDescriptor) -> Result<()> {
        self.post_fma_as(desc, 0)
    }

    /// [`Ep::post_fma`] with a token of the caller's that [`crate::gni::Cq::get_completed`]
    /// hands back with the completion ([`crate::gni::Completed::user`]): a C interface
    /// gives back the address of the caller's own descriptor this way.
    pub fn post_fma_as(&self, desc: &PostDescriptor, user: u64) -> Result<()> {
        check(desc, false, self)?;
        if desc.post_type == PostType::CqWrite {
            return self.post_cq_write_as(desc, user);
        }
        let (pe, ev_local, ev_remote) = lock(&self.inner.st).peer()?;
        let nic = &self.inner.nic;
        let rinfo = handle_info(&desc.remote_mem_hndl)?;
        let roff = desc
            .remote_addr
            .checked_sub(rinfo.va)
            .ok_or(GniError::param("remote address below its memory handle"))?;
        let events = local_events(desc.cq_mode);
        let cq = if events { Some(self.cq()?) } else { None };
        let t = desc.post_type;
        if desc.length > limits::FMA_CHAIN_MAX {
            return Err(GniError::param("FMA transfers are at most 1 GiB"));
        }
        if desc.local_addr.checked_add(desc.length).is_none() {
            return Err(GniError::param("local range overflows"));
        }
        let needs_local = t.is_get() || desc.amo().is_ok_and(|a| a.is_fetching());
        let local = if needs_local {
            let linfo = handle_info(&desc.local_mem_hndl)?;
            let len = if t.is_amo() { 8 } else { desc.length };
            let extra = u64::from(matches!(t, PostType::FmaGetWFlag | PostType::AmoWFlag)) * 4;
            let loff = offset_in(
                &linfo,
                desc.local_addr,
                len.saturating_add(extra),
                "local range outside its memory handle",
            )?;
            Some((linfo.mdh, loff))
        } else {
            None
        };
        let remote_data = desc.cq_mode.contains(CqEventMode::GLOBAL_EVENT)
            || desc.cq_mode.contains(CqEventMode::REMOTE_EVENT);
        let data = u64::from(if remote_data { ev_remote } else { ev_local });
        let mut sync = SyncType::NO_EVENT;
        if events {
            sync |= SyncType::LOCAL_EVENT;
        }
        if desc.cq_mode.contains(CqEventMode::REMOTE_EVENT) {
            sync |= SyncType::REMOTE_EVENT;
        }

        let mut fma = lock(&nic.fma);
        if let Some(cq) = cq {
            nic.fma_cq(&mut fma, cq.id)?;
        }
        fma.reserve(1)?;
        let tid = match cq {
            Some(cq) => {
                let mut book = lock(&cq.book);
                let tid = fma.tid(|t| book.fma.contains_key(&t));
                book.fma.insert(
                    tid,
                    Pending {
                        desc: *desc,
                        ep: self.inner.id.0,
                        user,
                    },
                );
                tid
            }
            None => 0,
        };
        let data56 = fma_data56(CqEventType::Post, u64::from(tid) << 32 | data)?;
        let target = |command: u64, src_mdh: u16| Target {
            command,
            rem_mdh: rinfo.mdh,
            src_mdh,
            dlvr: desc.dlvr_mode,
            pe,
        };
        let space = nic.client.space();
        let res = (|| -> Result<()> {
            match t {
                PostType::FmaPut | PostType::FmaPutWSyncflag => {
                    fma.put(Win::PutWc, &target(0, 0), roff, desc.length, |off, buf| {
                        space
                            .copy_from_user(desc.local_addr + off, buf)
                            .ok_or(GniError::param("local buffer outside the process's memory"))
                    })?;
                    if t == PostType::FmaPutWSyncflag {
                        let flag_off = desc
                            .sync_flag_addr
                            .checked_sub(rinfo.va)
                            .ok_or(GniError::param("sync flag address below its handle"))?;
                        fma.scratch((desc.sync_flag_value, flag_off))?;
                        sync |= SyncType::WITH_FLAG;
                    }
                }
                PostType::FmaGet | PostType::FmaGetWFlag => {
                    let (mdh, loff) = local.unwrap_or_default();
                    fma.get(
                        &target(0, mdh),
                        roff,
                        loff,
                        desc.length,
                        t == PostType::FmaGetWFlag,
                    )?;
                }
                PostType::Amo | PostType::AmoWFlag => {
                    let cmd = desc
                        .amo()
                        .map_err(|_| GniError::param("not a Gemini AMO command"))?;
                    let ops = (desc.first_operand, desc.second_operand);
                    if cmd.is_fetching() {
                        let (mdh, loff) = local.unwrap_or_default();
                        if loff % 8 != 0 {
                            return Err(GniError::new(
                                ReturnCode::AlignmentError,
                                "fetched AMO result must be 8-byte aligned",
                            ));
                        }
                        fma.amo_fetch(
                            &target(0, mdh),
                            roff,
                            loff,
                            cmd.fma_command(),
                            ops,
                            t == PostType::AmoWFlag,
                        )?;
                    } else {
                        fma.aim(&target(cmd.fma_command(), 0), roff)?;
                        fma.scratch(ops)?;
                        // The store triggers the AMO; its value is not an operand.
                        fma.store_u64(Win::PutUc, 0)?;
                    }
                }
                _ => return Err(GniError::new(ReturnCode::IllegalOp, "not an FMA post")),
            }
            fma.sync(sync, data56)
        })();
        if res.is_err() {
            // Close whatever the failed post opened, without events.
            let _ = fma.sync(SyncType::NO_EVENT, 0);
            if let Some(cq) = cq {
                lock(&cq.book).fma.remove(&tid);
            }
        }
        res
    }

    /// `GNI_PostCqWrite(ep, desc)`: a CQ write of the low 48 bits of `cqwrite_value` into
    /// the CQ of the remote region `remote_mem_hndl` names (registered with a `dst_cq`).
    pub fn post_cq_write(&self, desc: &PostDescriptor) -> Result<()> {
        self.post_cq_write_as(desc, 0)
    }

    /// [`Ep::post_cq_write`] with the caller's token (see [`Ep::post_fma_as`]).
    pub fn post_cq_write_as(&self, desc: &PostDescriptor, user: u64) -> Result<()> {
        if desc.post_type != PostType::CqWrite {
            return Err(GniError::param(
                "GNI_PostCqWrite needs a CQWRITE descriptor",
            ));
        }
        check(desc, false, self)?;
        let (pe, ev_local, ev_remote) = lock(&self.inner.st).peer()?;
        let nic = &self.inner.nic;
        let rinfo = handle_info(&desc.remote_mem_hndl)?;
        let roff = desc.remote_addr.saturating_sub(rinfo.va);
        let events = local_events(desc.cq_mode);
        let cq = if events { Some(self.cq()?) } else { None };
        let data = u64::from(if desc.cq_mode.contains(CqEventMode::GLOBAL_EVENT) {
            ev_remote
        } else {
            ev_local
        });
        let mut fma = lock(&nic.fma);
        if let Some(cq) = cq {
            nic.fma_cq(&mut fma, cq.id)?;
        }
        fma.reserve(1)?;
        let tid = match cq {
            Some(cq) => {
                let mut book = lock(&cq.book);
                let tid = fma.tid(|t| book.fma.contains_key(&t));
                book.fma.insert(
                    tid,
                    Pending {
                        desc: *desc,
                        ep: self.inner.id.0,
                        user,
                    },
                );
                tid
            }
            None => 0,
        };
        let data56 = fma_data56(CqEventType::Post, u64::from(tid) << 32 | data)?;
        let t = Target {
            command: 0,
            rem_mdh: rinfo.mdh,
            src_mdh: 0,
            dlvr: desc.dlvr_mode,
            pe,
        };
        let res = fma
            .aim(&t, roff)
            .and_then(|_| fma.cq_write(desc.cqwrite_payload()))
            .and_then(|_| {
                let sync = if events {
                    SyncType::LOCAL_EVENT
                } else {
                    SyncType::NO_EVENT
                };
                fma.sync(sync, data56)
            });
        if res.is_err()
            && let Some(cq) = cq
        {
            lock(&cq.book).fma.remove(&tid);
        }
        res
    }

    /// `GNI_PostRdma(ep, desc)`: a BTE PUT or GET, queued by kgni to a BTE channel; returns
    /// at once. `src_cq_hndl` (a CQ id of this NIC, 0 = the endpoint's CQ) receives the local
    /// and global events. `GNI_RC_ERROR_RESOURCE` when the BTE queues are full.
    pub fn post_rdma(&self, desc: &PostDescriptor) -> Result<()> {
        self.post_rdma_as(desc, 0)
    }

    /// [`Ep::post_rdma`] with the caller's token (see [`Ep::post_fma_as`]).
    pub fn post_rdma_as(&self, desc: &PostDescriptor, user: u64) -> Result<()> {
        check(desc, true, self)?;
        let (_, ev_local, ev_remote) = lock(&self.inner.st).peer()?;
        let nic = &self.inner.nic;
        let local = desc.cq_mode.contains(CqEventMode::LOCAL_EVENT);
        let global = desc.cq_mode.contains(CqEventMode::GLOBAL_EVENT);
        let cq = if local || global {
            Some(match desc.src_cq_hndl {
                0 => std::sync::Arc::clone(self.cq()?),
                h => u32::try_from(h)
                    .ok()
                    .and_then(|h| nic.cq_by_id(h))
                    .ok_or(GniError::param("src_cq_hndl names no CQ of this NIC"))?,
            })
        } else {
            None
        };
        let seq = match &cq {
            Some(cq) => {
                let mut book = lock(&cq.book);
                let seq = book.next_seq;
                book.next_seq += 1;
                book.rdma.push_back(RdmaPending {
                    seq,
                    desc: *desc,
                    ep: self.inner.id.0,
                    user,
                    local: local.then_some(ev_local),
                    global: global.then_some(ev_remote),
                });
                Some(seq)
            }
            None => None,
        };
        match nic.client.post_rdma(self.inner.id, *desc) {
            Ok(_) => Ok(()),
            Err(e) => {
                if let (Some(cq), Some(seq)) = (&cq, seq) {
                    lock(&cq.book).rdma.retain(|p| p.seq != seq);
                }
                Err(e.into())
            }
        }
    }
}

/// A descriptor for an FMA or RDMA PUT of `length` bytes from `local_addr` to
/// `remote_addr` (a convenience; every field stays public).
pub fn put_desc(
    post_type: PostType,
    local_addr: u64,
    local_mem_hndl: firmware_spec::gemini::mdd::MemHandle,
    remote_addr: u64,
    remote_mem_hndl: firmware_spec::gemini::mdd::MemHandle,
    length: u64,
) -> PostDescriptor {
    let mut d = PostDescriptor::new(post_type);
    d.local_addr = local_addr;
    d.local_mem_hndl = local_mem_hndl;
    d.remote_addr = remote_addr;
    d.remote_mem_hndl = remote_mem_hndl;
    d.length = length;
    d.cq_mode = CqEventMode::GLOBAL_EVENT;
    d.dlvr_mode = DlvrMode::PERFORMANCE;
    d
}
