//! Keyed memory regions: libfabric-style memory registration over the RMA PtlTE.
//!
//! A region is one persistent LE on the RMA PtlTE (index 117, the CXI provider's standard MR
//! PtlTE), matching on the region's key (cassini.md §2.1: a "MR" PtlTE with the key as match
//! bits), with `NO_TRUNCATE` so that an access outside the region matches nothing and the
//! initiator gets the NIC's error (`ENTRY_NOT_FOUND`), and with only the operations the
//! region allows (a refused one: `OP_VIOLATION`). Unlike windows ([`super::rma`]), the
//! initiator names the target by key alone, without a local copy of the target's keys, the
//! NIC alone checks bounds and permissions, a failed operation fails alone (the transport goes
//! on), and the target sees each put and atomic as an [`Arrival`] (communication events are
//! on) so that its owner can mirror the region's memory.
//!
//! Match bits: the key (below bit 62); bit 62 ([`KEYED_DATA`]) marks a put that carries
//! remote CQ data in its header data, and the LE ignores it. Bit 63 stays the control
//! messages' (`proto::CTRL`).

use std::collections::HashSet;

use firmware_spec::cassini::amo::{AmoOp as CxiOp, AmoType as CxiType, CswapOp};
use firmware_spec::cassini::cmd::DmaOp;
use firmware_spec::cassini::event::{EventType, TargetLong};
use firmware_spec::cassini::le::{LeFlags, PtlList};
use firmware_spec::cassini::rc::ReturnCode;

use super::CxiTransport;
use super::endpoint::Buf;
use crate::error::{Error, Result};
use crate::{Completion, OpId, Rank};

/// The match bit of a put carrying remote CQ data.
pub const KEYED_DATA: u64 = 1 << 62;
/// The largest key.
pub const KEY_MAX: u64 = KEYED_DATA - 1;
/// Buffer ids of region LEs: between the landing buffers' and the receives'.
const FIRST_BID: u16 = 0x0800;
const BIDS: u16 = 0x0800;

/// A region exposed by this transport.
pub(super) struct Region {
    buf: Buf,
    len: usize,
    bid: u16,
}

/// The keyed state of a transport.
#[derive(Default)]
pub(super) struct Keyed {
    regions: std::collections::BTreeMap<u64, Region>,
    /// Operations issued by key (their failures fail them alone).
    ops: HashSet<u64>,
    /// Failed operations and why.
    failed: std::collections::HashMap<u64, (ReturnCode, String)>,
    arrivals: Vec<Arrival>,
    next_bid: u16,
}

/// What the NIC did to an exposed region on behalf of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The region's key.
    pub key: u64,
    /// Where in the region.
    pub offset: usize,
    /// How many bytes changed.
    pub len: usize,
    /// Remote CQ data of a put that carried some.
    pub data: Option<u64>,
    /// An atomic (else a put).
    pub atomic: bool,
}

/// Why an operation by key failed: the NIC's return code, and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedFailure {
    /// The initiator event's return code.
    pub rc: ReturnCode,
    /// What failed.
    pub message: String,
}

/// One Cassini AMO by key.
#[derive(Clone, Copy, Debug)]
pub struct KeyedAmo {
    /// The operation.
    pub op: CxiOp,
    /// The element type.
    pub ty: CxiType,
    /// The comparison of a `CSWAP`.
    pub cswap: CswapOp,
    /// The operand (little-endian in the low bytes).
    pub op1: u64,
    /// The second operand (compare value, mask).
    pub op2: u64,
    /// Whether the old value comes back.
    pub fetch: bool,
}

/// Operand size of a Cassini AMO type (`amo_size[]`, cassini.md §2.1); `None` for the
/// 16-byte types this interface does not carry.
pub fn amo_size(ty: CxiType) -> Option<usize> {
    Some(match ty {
        CxiType::Int8 | CxiType::Uint8 => 1,
        CxiType::Int16 | CxiType::Uint16 => 2,
        CxiType::Int32 | CxiType::Uint32 | CxiType::Float => 4,
        CxiType::Int64 | CxiType::Uint64 | CxiType::Double | CxiType::FloatComplex => 8,
        _ => return None,
    })
}

impl CxiTransport {
    /// Expose `len` bytes of fresh, zeroed NIC memory as region `key`, for remote gets
    /// (`read`) and puts and atomics (`write`).
    pub fn region_expose(&mut self, key: u64, len: usize, read: bool, write: bool) -> Result<()> {
        self.check()?;
        if key > KEY_MAX {
            return Err(Error::Rma(format!("key {key:#x} is above {KEY_MAX:#x}")));
        }
        if self.keyed.regions.contains_key(&key) {
            return Err(Error::Rma(format!("key {key:#x} is already exposed")));
        }
        if self.keyed.regions.len() >= usize::from(BIDS) {
            return Err(Error::Rma(format!(
                "no more than {BIDS} regions per endpoint"
            )));
        }
        let bid = loop {
            let b = FIRST_BID + self.keyed.next_bid % BIDS;
            self.keyed.next_bid = self.keyed.next_bid.wrapping_add(1);
            if self.keyed.regions.values().all(|r| r.bid != b) {
                break b;
            }
        };
        let buf = self.ep.buf_exact(len)?;
        let mut flags =
            LeFlags::NO_TRUNCATE | LeFlags::EVENT_LINK_DISABLE | LeFlags::EVENT_UNLINK_DISABLE;
        if read {
            flags |= LeFlags::OP_GET;
        }
        if write {
            flags |= LeFlags::OP_PUT;
        }
        let pte = self.ep.rma.pte.clone();
        self.ep.append(
            &pte,
            PtlList::Priority,
            Some((&buf, len as u64)),
            flags,
            u32::MAX,
            key,
            KEYED_DATA,
            bid,
            0,
        )?;
        self.keyed.regions.insert(key, Region { buf, len, bid });
        Ok(())
    }

    /// Stop exposing region `key` (its memory stays registered until the transport goes,
    /// as the unlink is asynchronous).
    pub fn region_withdraw(&mut self, key: u64) -> Result<()> {
        let r = self
            .keyed
            .regions
            .remove(&key)
            .ok_or_else(|| Error::Rma(format!("key {key:#x} is not exposed")))?;
        let pte = self.ep.rma.pte.clone();
        self.ep.target_cmd_on(
            &pte,
            firmware_spec::cassini::cmd::TgtOp::Unlink,
            PtlList::Priority,
            r.bid,
        )?;
        self.retired.push(r.buf);
        Ok(())
    }

    fn region(&self, key: u64, offset: usize, len: usize) -> Result<&Region> {
        let r = self
            .keyed
            .regions
            .get(&key)
            .ok_or_else(|| Error::Rma(format!("key {key:#x} is not exposed")))?;
        if offset.checked_add(len).is_none_or(|e| e > r.len) {
            return Err(Error::Rma(format!(
                "{len} bytes at {offset} are outside the {}-byte region",
                r.len
            )));
        }
        Ok(r)
    }

    /// Copy `out.len()` bytes of region `key` at `offset` out of NIC memory.
    pub fn region_read(&mut self, key: u64, offset: usize, out: &mut [u8]) -> Result<()> {
        let r = self.region(key, offset, out.len())?;
        if !out.is_empty() {
            r.buf
                .mem
                .read(offset as u64, out)
                .map_err(|e| Error::Rma(format!("reading region {key:#x}: {e}")))?;
        }
        Ok(())
    }

    /// Copy `data` into region `key` at `offset`.
    pub fn region_write(&mut self, key: u64, offset: usize, data: &[u8]) -> Result<()> {
        self.region(key, offset, data.len())?
            .buf
            .write(offset as u64, data)
    }

    /// What peers did to this transport's regions since the last call.
    pub fn take_arrivals(&mut self) -> Vec<Arrival> {
        std::mem::take(&mut self.keyed.arrivals)
    }

    fn keyed_check(&self, target: Rank, key: u64) -> Result<()> {
        self.check()?;
        self.check_rank(target)?;
        if key > KEY_MAX {
            return Err(Error::Rma(format!("key {key:#x} is above {KEY_MAX:#x}")));
        }
        Ok(())
    }

    /// Put `data` at `offset` of `target`'s region `key`, with remote CQ data if `cq_data`.
    pub fn put_keyed(
        &mut self,
        target: Rank,
        key: u64,
        offset: usize,
        data: &[u8],
        cq_data: Option<u64>,
    ) -> Result<OpId> {
        self.keyed_check(target, key)?;
        let bits = key | if cq_data.is_some() { KEYED_DATA } else { 0 };
        let id = self
            .rma_dma_with(
                DmaOp::Put,
                target,
                bits,
                offset,
                Some(data),
                data.len(),
                cq_data.unwrap_or(0),
            )?
            .0;
        self.keyed.ops.insert(id);
        Ok(OpId(id))
    }

    /// Get `len` bytes at `offset` of `target`'s region `key` ([`Completion::Fetched`]).
    pub fn get_keyed(&mut self, target: Rank, key: u64, offset: usize, len: usize) -> Result<OpId> {
        self.keyed_check(target, key)?;
        let op = self.rma_dma(DmaOp::Get, target, key, offset, None, len)?;
        self.keyed.ops.insert(op.0);
        Ok(op)
    }

    /// One AMO on the element at `offset` of `target`'s region `key` (the old value comes
    /// back as [`Completion::Fetched`] when fetching).
    pub fn amo_keyed(
        &mut self,
        target: Rank,
        key: u64,
        offset: usize,
        a: KeyedAmo,
    ) -> Result<OpId> {
        self.keyed_check(target, key)?;
        let size =
            amo_size(a.ty).ok_or_else(|| Error::Rma(format!("no {:?} atomics by key", a.ty)))?;
        let id = self.issue_amo(target, key, offset, size, a)?;
        self.keyed.ops.insert(id);
        Ok(OpId(id))
    }

    /// How operation `op` by key ended, if it did by the last progress: its completion, or
    /// the NIC's error. Does not progress (a caller polling many operations progresses
    /// once, then asks for each).
    pub fn keyed_outcome(
        &mut self,
        op: OpId,
    ) -> Result<Option<std::result::Result<Completion, KeyedFailure>>> {
        self.check()?;
        if let Some((rc, message)) = self.keyed.failed.remove(&op.0) {
            self.keyed.ops.remove(&op.0);
            return Ok(Some(Err(KeyedFailure { rc, message })));
        }
        Ok(self.done.remove(&op).map(|c| {
            self.keyed.ops.remove(&op.0);
            Ok(c)
        }))
    }

    /// An initiator event with an error for an operation by key: it fails alone. Returns
    /// whether the event was one.
    pub(super) fn keyed_failed(&mut self, ty: EventType, rc: ReturnCode, user_ptr: u64) -> bool {
        if rc == ReturnCode::Ok || !self.keyed.ops.contains(&user_ptr) {
            return false;
        }
        if let Some(mut op) = self.rma_ops.remove(&user_ptr)
            && let Some(b) = op.buf.take()
        {
            self.ep.release(b);
        }
        self.keyed.failed.insert(
            user_ptr,
            (
                rc,
                format!("cxi: {ty:?} of operation {user_ptr:#x} failed: {rc:?}"),
            ),
        );
        true
    }

    /// A target event on the RMA PtlTE for an exposed region: recorded as an [`Arrival`].
    /// Returns whether it was one.
    pub(super) fn keyed_target(&mut self, t: &TargetLong) -> bool {
        let key = t.match_bits & !KEYED_DATA;
        if t.match_bits & proto_ctrl() != 0 || !self.keyed.regions.contains_key(&key) {
            return false;
        }
        let atomic = match t.event_type {
            EventType::Put => false,
            EventType::Atomic | EventType::FetchAtomic => true,
            _ => return true,
        };
        if t.return_code != ReturnCode::Ok {
            return true;
        }
        self.keyed.arrivals.push(Arrival {
            key,
            offset: t.remote_offset as usize,
            len: t.mlength as usize,
            data: (t.match_bits & KEYED_DATA != 0).then_some(t.header_data),
            atomic,
        });
        true
    }
}

fn proto_ctrl() -> u64 {
    super::proto::CTRL
}
