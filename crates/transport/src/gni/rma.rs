//! RMA on Gemini: a window is registered memory on every rank; its key is (address, memory
//! handle, length). Put and get are FMA posts below the RDMA threshold and BTE posts at or
//! above it; a get is widened to 4-byte boundaries (Gemini's GET alignment rule) into a
//! staging buffer and the asked-for bytes copied out, as Open MPI's ugni path rounds lengths.
//! Atomics are Gemini's 64-bit AMOs (gemini.md §1.7): ADD, AND, OR, XOR, AX (masked XOR, so
//! `MPI_REPLACE` is AX with mask 0), CSWAP, each with its fetching form; the target must be
//! 8-byte aligned. Anything else — MIN/MAX, floats, 32-bit elements — is `MPI_ERR_OP`.

use std::collections::HashMap;

use firmware_spec::gemini::gni::PostType;
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::PostDescriptor;
use userlib::gni::amo::{AmoCmd, amo_desc};
use userlib::gni::post::put_desc;

use super::{Staged, mem_err};
use crate::error::{Error, Result};
use crate::{AmoOp, AmoType, Atomic, Completion, OpId, Rank, WinId};

/// How a tracked post completes.
pub(super) enum Finish {
    /// Remote completion of a put or non-fetching AMO.
    Sent,
    /// The fetched bytes `skip..skip + len` of the staging buffer.
    Fetch { skip: usize, len: usize },
}

struct Win {
    local: Staged,
    peers: Vec<Option<(u64, MemHandle, u64)>>,
}

/// The windows of one rank and its RMA posts in flight.
#[derive(Default)]
pub(super) struct Rma {
    windows: HashMap<u32, Win>,
    next_id: u32,
    inflight: HashMap<u64, (OpId, Staged, Finish)>,
}

/// The 4-byte aligned span covering `len` bytes at `offset`: (start, length).
pub(super) fn aligned(offset: usize, len: usize) -> (usize, usize) {
    let start = offset & !3;
    let end = (offset + len).next_multiple_of(4);
    (start, (end - start).max(4))
}

impl Rma {
    pub(super) fn create(&mut self, local: Staged) -> (WinId, Vec<u8>) {
        self.next_id += 1;
        let id = self.next_id;
        let mut key = Vec::with_capacity(32);
        key.extend_from_slice(&local.mem.va().to_le_bytes());
        key.extend_from_slice(&local.mh.to_bytes());
        key.extend_from_slice(&local.mem.len().to_le_bytes());
        self.windows.insert(
            id,
            Win {
                local,
                peers: Vec::new(),
            },
        );
        (WinId(id), key)
    }

    fn win(&self, w: WinId) -> Result<&Win> {
        self.windows
            .get(&w.0)
            .ok_or_else(|| Error::Rma(format!("no window {}", w.0)))
    }

    pub(super) fn connect(&mut self, w: WinId, keys: &[Vec<u8>]) -> Result<()> {
        let peers = keys
            .iter()
            .map(|k| {
                if k.is_empty() {
                    return Ok(None);
                }
                if k.len() != 32 {
                    return Err(Error::Rma(format!("a window key of {} bytes", k.len())));
                }
                let u64_at = |o: usize| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&k[o..o + 8]);
                    u64::from_le_bytes(b)
                };
                let mh = MemHandle::from_bytes(&k[8..24])
                    .map_err(|_| Error::Rma("a bad memory handle in a window key".into()))?;
                Ok(Some((u64_at(0), mh, u64_at(24))))
            })
            .collect::<Result<Vec<_>>>()?;
        self.windows
            .get_mut(&w.0)
            .ok_or_else(|| Error::Rma(format!("no window {}", w.0)))?
            .peers = peers;
        Ok(())
    }

    fn check(len: u64, offset: usize, n: usize) -> Result<()> {
        if (offset as u64)
            .checked_add(n as u64)
            .is_none_or(|e| e > len)
        {
            return Err(Error::Rma(format!(
                "{n} bytes at {offset} outside a window of {len}"
            )));
        }
        Ok(())
    }

    /// Where this rank's part of `w` lives in this process, if it is this process's memory.
    pub(super) fn local_memory(&self, w: WinId) -> Option<*mut u8> {
        self.win(w).ok()?.local.mem.host_ptr()
    }

    pub(super) fn read(&self, w: WinId, offset: usize, out: &mut [u8]) -> Result<()> {
        let win = self.win(w)?;
        Self::check(win.local.mem.len(), offset, out.len())?;
        win.local.mem.read(offset as u64, out).map_err(mem_err)
    }

    pub(super) fn write(&self, w: WinId, offset: usize, data: &[u8]) -> Result<()> {
        let win = self.win(w)?;
        Self::check(win.local.mem.len(), offset, data.len())?;
        win.local.mem.write(offset as u64, data).map_err(mem_err)
    }

    fn peer(&self, w: WinId, target: Rank, offset: usize, n: usize) -> Result<(u64, MemHandle)> {
        let (va, mh, len) = self
            .win(w)?
            .peers
            .get(target as usize)
            .copied()
            .flatten()
            .ok_or_else(|| Error::Rma(format!("rank {target} has no part in window {}", w.0)))?;
        Self::check(len, offset, n)?;
        Ok((va + offset as u64, mh))
    }

    pub(super) fn put_desc(
        &self,
        w: WinId,
        target: Rank,
        offset: usize,
        n: usize,
        stage: &Staged,
        threshold: usize,
    ) -> Result<(PostDescriptor, bool)> {
        let (addr, mh) = self.peer(w, target, offset, n)?;
        let bte = n >= threshold;
        let ty = if bte {
            PostType::RdmaPut
        } else {
            PostType::FmaPut
        };
        Ok((
            put_desc(ty, stage.mem.va(), stage.mh, addr, mh, n as u64),
            bte,
        ))
    }

    pub(super) fn get_desc(
        &self,
        w: WinId,
        target: Rank,
        start: usize,
        span: usize,
        stage: &Staged,
        threshold: usize,
    ) -> Result<(PostDescriptor, bool)> {
        let (addr, mh) = self.peer(w, target, start, span)?;
        let bte = span >= threshold;
        let ty = if bte {
            PostType::RdmaGet
        } else {
            PostType::FmaGet
        };
        Ok((
            put_desc(ty, stage.mem.va(), stage.mh, addr, mh, span as u64),
            bte,
        ))
    }

    pub(super) fn amo_desc(
        &self,
        w: WinId,
        target: Rank,
        offset: usize,
        a: &Atomic,
        stage: &Staged,
    ) -> Result<PostDescriptor> {
        if !matches!(a.ty, AmoType::I64 | AmoType::U64) {
            return Err(Error::Op(format!(
                "Gemini AMOs are 64-bit integer operations; {:?} is not",
                a.ty
            )));
        }
        if !offset.is_multiple_of(8) {
            return Err(Error::Rma(format!(
                "an AMO target at offset {offset} is not 8-byte aligned"
            )));
        }
        let word = |b: &[u8]| -> Result<u64> {
            b.try_into()
                .map(u64::from_le_bytes)
                .map_err(|_| Error::Count(format!("an AMO operand of {} bytes", b.len())))
        };
        let v = word(&a.operand)?;
        let (fetch_cmd, cmd, first, second) = match a.op {
            AmoOp::Sum => (AmoCmd::Fadd, AmoCmd::Add, v, 0),
            AmoOp::Band => (AmoCmd::Fand, AmoCmd::And, v, 0),
            AmoOp::Bor => (AmoCmd::For, AmoCmd::Or, v, 0),
            AmoOp::Bxor => (AmoCmd::Fxor, AmoCmd::Xor, v, 0),
            AmoOp::Replace => (AmoCmd::Fax, AmoCmd::Ax, 0, v),
            AmoOp::NoOp => (AmoCmd::Fadd, AmoCmd::Add, 0, 0),
            AmoOp::CompareSwap => (AmoCmd::Cswap, AmoCmd::Cswap, word(&a.compare)?, v),
            op => {
                return Err(Error::Op(format!("{op:?} is not a Gemini AMO")));
            }
        };
        let (addr, mh) = self.peer(w, target, offset, 8)?;
        let fetch = a.fetch || a.op == AmoOp::CompareSwap;
        Ok(if fetch {
            amo_desc(
                fetch_cmd,
                Some((stage.mem.va(), stage.mh)),
                addr,
                mh,
                first,
                second,
            )
        } else {
            amo_desc(cmd, None, addr, mh, first, second)
        })
    }

    pub(super) fn track(&mut self, token: u64, op: OpId, stage: Staged, finish: Finish) {
        self.inflight.insert(token, (op, stage, finish));
    }

    /// Post `token` completed: its operation, how it ended, and its staging buffer back.
    pub(super) fn complete(&mut self, token: u64) -> Result<Option<(OpId, Completion, Staged)>> {
        let Some((op, stage, finish)) = self.inflight.remove(&token) else {
            return Ok(None);
        };
        let c = match finish {
            Finish::Sent => Completion::Sent,
            Finish::Fetch { skip, len } => {
                let mut b = vec![0u8; len];
                stage.mem.read(skip as u64, &mut b).map_err(mem_err)?;
                Completion::Fetched(b)
            }
        };
        Ok(Some((op, c, stage)))
    }

    pub(super) fn free(&mut self, w: WinId) -> Option<Staged> {
        self.windows.remove(&w.0).map(|w| w.local)
    }

    pub(super) fn drain(&mut self) -> Vec<Staged> {
        let mut v: Vec<Staged> = super::sorted_drain(&mut self.windows)
            .into_iter()
            .map(|(_, w)| w.local)
            .collect();
        v.extend(
            super::sorted_drain(&mut self.inflight)
                .into_iter()
                .map(|(_, (_, s, _))| s),
        );
        v
    }
}
