//! RMA windows (cassini.md §§2.1, 7): a window's memory is registered and exposed by one
//! persistent LE on the RMA PtlTE (libfabric's standard MR PtlTE, index 117, matching on the
//! key, which is the window id); puts and gets are DMA commands at an offset of that LE,
//! atomics are Cassini AMOs (DMA AMO commands, operand read from a staging buffer, the old
//! value written back for fetching ones). MPI_NO_OP is a fetching SUM of 0, MPI_REPLACE a
//! SWAP, compare-and-swap CSWAP_EQ with the compare value in `op2` (`cxip_atomic.c` as
//! described in cassini.md §2.1).

use firmware_spec::cassini::amo::{AmoOp as CxiOp, AmoType as CxiType, CswapOp};
use firmware_spec::cassini::cmd::{DmaFlags, DmaOp};
use firmware_spec::cassini::dma::{DmaAmo, FullDma};
use firmware_spec::cassini::le::{LeFlags, PtlList};

use super::endpoint::RMA_INDEX;
use super::proto;
use super::retry::RmaCmd;
use super::{CxiTransport, KeyedAmo, RmaOp, Window};
use crate::error::{Error, Result};
use crate::{AmoOp, AmoType, Atomic, OpId, Rank, WinId};

impl CxiTransport {
    pub(super) fn window(&self, win: WinId) -> Result<&Window> {
        self.windows
            .get(&win.0)
            .ok_or_else(|| Error::Rma(format!("window {} does not exist", win.0)))
    }

    /// The remote key of `target` in `win`, after checking `[offset, offset + len)`.
    fn remote(&self, win: WinId, target: Rank, offset: usize, len: usize) -> Result<u64> {
        let w = self.window(win)?;
        let key = w
            .keys
            .get(target as usize)
            .copied()
            .flatten()
            .ok_or_else(|| Error::Rma(format!("window {} is not connected", win.0)))?;
        // The key carries the target's window length in its high half.
        let tlen = (key >> 32) as usize;
        if offset.checked_add(len).is_none_or(|e| e > tlen) {
            return Err(Error::Rma(format!(
                "{len} bytes at offset {offset} are outside rank {target}'s {tlen}-byte window"
            )));
        }
        Ok(key & 0xFFFF_FFFF)
    }

    pub(super) fn rma_win_create(&mut self, len: usize) -> Result<(WinId, Vec<u8>)> {
        if len > u32::MAX as usize {
            return Err(Error::Rma(format!("a window of {len} bytes is too large")));
        }
        let bid = (0..proto::WIN_BIDS)
            .map(|i| proto::WIN_BID + i)
            .find(|b| self.windows.values().all(|w| w.bid != *b))
            .ok_or_else(|| {
                Error::Rma(format!(
                    "{} windows are live: the transport's limit",
                    proto::WIN_BIDS
                ))
            })?;
        let id = self.next_win;
        self.next_win += 1;
        // Exactly the window's pages (a staging buffer would round a 256 MiB window up to
        // 512 MiB); fresh pages are zeroed, and window memory never comes from the pool.
        let buf = self.ep.buf_exact(len)?;
        let pte = self.ep.rma.pte.clone();
        self.ep.append(
            &pte,
            PtlList::Priority,
            Some((&buf, len as u64)),
            LeFlags::OP_PUT
                | LeFlags::OP_GET
                | LeFlags::EVENT_COMM_DISABLE
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE,
            u32::MAX,
            u64::from(id),
            0,
            bid,
            0,
        )?;
        self.windows.insert(
            id,
            Window {
                buf,
                bid,
                len,
                keys: Vec::new(),
            },
        );
        let key = u64::from(id) | (len as u64) << 32;
        Ok((WinId(id), key.to_le_bytes().to_vec()))
    }

    pub(super) fn rma_win_connect(&mut self, win: WinId, keys: Vec<Vec<u8>>) -> Result<()> {
        let parsed = keys
            .iter()
            .map(|k| k.as_slice().try_into().ok().map(u64::from_le_bytes))
            .collect();
        self.windows
            .get_mut(&win.0)
            .ok_or_else(|| Error::Rma(format!("window {} does not exist", win.0)))?
            .keys = parsed;
        Ok(())
    }

    pub(super) fn rma_win_read(&mut self, win: WinId, offset: usize, out: &mut [u8]) -> Result<()> {
        let w = self.window(win)?;
        if offset.checked_add(out.len()).is_none_or(|e| e > w.len) {
            return Err(Error::Rma("a local read outside the window".into()));
        }
        let v = w.buf.read(offset as u64, out.len())?;
        out.copy_from_slice(&v);
        Ok(())
    }

    pub(super) fn rma_win_write(&mut self, win: WinId, offset: usize, data: &[u8]) -> Result<()> {
        let w = self.window(win)?;
        if offset.checked_add(data.len()).is_none_or(|e| e > w.len) {
            return Err(Error::Rma("a local write outside the window".into()));
        }
        w.buf.write(offset as u64, data)
    }

    pub(super) fn rma_dma(
        &mut self,
        op: DmaOp,
        target: Rank,
        key: u64,
        offset: usize,
        data: Option<&[u8]>,
        len: usize,
    ) -> Result<OpId> {
        self.rma_dma_with(op, target, key, offset, data, len, 0)
    }

    /// [`rma_dma`](Self::rma_dma) with header data (the remote CQ data of a keyed put).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rma_dma_with(
        &mut self,
        op: DmaOp,
        target: Rank,
        key: u64,
        offset: usize,
        data: Option<&[u8]>,
        len: usize,
        header_data: u64,
    ) -> Result<OpId> {
        let id = self.new_op();
        let buf = self.ep.buf(len)?;
        if let Some(d) = data {
            buf.write(0, d)?;
        }
        let (dfa, index_ext) = self.ep.dfa(self.peers[target as usize], RMA_INDEX);
        let cmd = FullDma {
            opcode: op,
            index_ext,
            lac: buf.md.lac(),
            flags: DmaFlags {
                event_send_disable: true,
                ..DmaFlags::default()
            },
            dfa,
            remote_offset: offset as u64,
            local_addr: buf.iova(0),
            request_len: len as u32,
            eq: self.ep.eq.eqn() as u16,
            initiator: self.ep.my_match_id(),
            match_bits: key,
            header_data,
            user_ptr: id,
            ..FullDma::default()
        };
        self.ep.dma(cmd)?;
        self.rma_ops.insert(
            id,
            RmaOp {
                buf: Some(buf),
                len,
                fetch: op == DmaOp::Get,
                at: 0,
                cmd: RmaCmd::Dma(cmd),
                tries: 0,
            },
        );
        Ok(OpId(id))
    }

    pub(super) fn rma_put(
        &mut self,
        win: WinId,
        target: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<OpId> {
        let key = self.remote(win, target, offset, data.len())?;
        self.rma_dma(DmaOp::Put, target, key, offset, Some(data), data.len())
    }

    pub(super) fn rma_get(
        &mut self,
        win: WinId,
        target: Rank,
        offset: usize,
        len: usize,
    ) -> Result<OpId> {
        let key = self.remote(win, target, offset, len)?;
        self.rma_dma(DmaOp::Get, target, key, offset, None, len)
    }

    pub(super) fn rma_atomic(
        &mut self,
        win: WinId,
        target: Rank,
        offset: usize,
        a: &Atomic,
    ) -> Result<OpId> {
        let size = a.ty.size();
        let key = self.remote(win, target, offset, size)?;
        if !offset.is_multiple_of(size) {
            return Err(Error::Rma(format!(
                "an atomic at offset {offset} is not aligned to its {size}-byte element"
            )));
        }
        let (op, ty, fetch) = amo_of(a)?;
        let word = |v: &[u8]| -> Result<u64> {
            if v.len() != size {
                return Err(Error::Arg(format!(
                    "an atomic operand of {} bytes for a {size}-byte type",
                    v.len()
                )));
            }
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(v);
            Ok(u64::from_le_bytes(b))
        };
        let op1 = if a.op == AmoOp::NoOp {
            0
        } else {
            word(&a.operand)?
        };
        let op2 = if a.op == AmoOp::CompareSwap {
            word(&a.compare)?
        } else {
            0
        };
        let amo = KeyedAmo {
            op,
            ty,
            cswap: CswapOp::Eq,
            op1,
            op2,
            fetch,
        };
        self.issue_amo(target, key, offset, size, amo).map(OpId)
    }

    /// Issue one AMO on the element at `offset` of the LE `key` on `target`'s RMA PtlTE
    /// (the operand from a staging buffer; a fetched old value lands after it). Returns the
    /// operation's id.
    pub(super) fn issue_amo(
        &mut self,
        target: Rank,
        key: u64,
        offset: usize,
        size: usize,
        a: KeyedAmo,
    ) -> Result<u64> {
        let id = self.new_op();
        let buf = self.ep.buf(64)?;
        buf.write(0, &a.op1.to_le_bytes())?;
        let (dfa, index_ext) = self.ep.dfa(self.peers[target as usize], RMA_INDEX);
        let lac = buf.md.lac();
        let cmd = DmaAmo {
            opcode: if a.fetch {
                DmaOp::FetchingAtomic
            } else {
                DmaOp::Atomic
            },
            index_ext,
            lac,
            flags: DmaFlags {
                event_send_disable: true,
                ..DmaFlags::default()
            },
            dfa,
            remote_offset: offset as u64,
            local_read_addr: buf.iova(0),
            eq: self.ep.eq.eqn() as u16,
            initiator: self.ep.my_match_id(),
            match_bits: key,
            user_ptr: id,
            local_write_addr: buf.iova(8),
            atomic_op: a.op,
            atomic_type: a.ty,
            cswap_op: a.cswap,
            write_lac: lac,
            op2_word1: a.op2,
            ..DmaAmo::default()
        };
        self.ep.emit(false, |q| q.emit_dma_amo(&cmd))?;
        self.ep.ring_tx()?;
        self.rma_ops.insert(
            id,
            RmaOp {
                buf: Some(buf),
                len: size,
                fetch: a.fetch,
                // The old value lands after the operand.
                at: 8,
                cmd: RmaCmd::Amo(cmd),
                tries: 0,
            },
        );
        Ok(id)
    }

    pub(super) fn rma_win_free(&mut self, win: WinId) -> Result<()> {
        let w = self
            .windows
            .remove(&win.0)
            .ok_or_else(|| Error::Rma(format!("window {} does not exist", win.0)))?;
        let pte = self.ep.rma.pte.clone();
        self.ep.target_cmd_on(
            &pte,
            firmware_spec::cassini::cmd::TgtOp::Unlink,
            PtlList::Priority,
            w.bid,
        )?;
        // The memory stays registered until the unlink is processed: keep it out of the
        // pool (dropped with this scope only after the command was rung).
        self.retired.push(w.buf);
        Ok(())
    }
}

/// The Cassini operation, type and fetch flag of an MPI atomic; `MPI_ERR_OP` for a pair the
/// NIC cannot do (bitwise and logical operations on floating point).
fn amo_of(a: &Atomic) -> Result<(CxiOp, CxiType, bool)> {
    let float = matches!(a.ty, AmoType::F32 | AmoType::F64);
    let ty = match a.ty {
        AmoType::I32 => CxiType::Int32,
        AmoType::U32 => CxiType::Uint32,
        AmoType::I64 => CxiType::Int64,
        AmoType::U64 => CxiType::Uint64,
        AmoType::F32 => CxiType::Float,
        AmoType::F64 => CxiType::Double,
    };
    let op = match a.op {
        AmoOp::Sum | AmoOp::NoOp => CxiOp::Sum,
        AmoOp::Min => CxiOp::Min,
        AmoOp::Max => CxiOp::Max,
        AmoOp::Band => CxiOp::Band,
        AmoOp::Bor => CxiOp::Bor,
        AmoOp::Bxor => CxiOp::Bxor,
        AmoOp::Land => CxiOp::Land,
        AmoOp::Lor => CxiOp::Lor,
        AmoOp::Lxor => CxiOp::Lxor,
        AmoOp::Replace => CxiOp::Swap,
        AmoOp::CompareSwap => CxiOp::Cswap,
    };
    if float
        && matches!(
            a.op,
            AmoOp::Band | AmoOp::Bor | AmoOp::Bxor | AmoOp::Land | AmoOp::Lor | AmoOp::Lxor
        )
    {
        return Err(Error::Op(format!(
            "{:?} is not defined on {:?} for NIC atomics",
            a.op, a.ty
        )));
    }
    let fetch = a.fetch || a.op == AmoOp::NoOp;
    Ok((op, ty, fetch))
}
