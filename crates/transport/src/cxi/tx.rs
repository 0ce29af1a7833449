//! Sends, by size as the CXI provider chooses (cassini.md §6, fi_cxi.7): an IDC small
//! message when the payload fits the command (≤ 192 B, `C_MAX_IDC_PAYLOAD_UNR`), an eager DMA
//! put up to `FI_CXI_RDZV_THRESHOLD`, and above it a rendezvous put whose first
//! `FI_CXI_RDZV_EAGER_SIZE` bytes travel with it while the rest stays exposed on the
//! rendezvous-source PtlTE for the target NIC's Get. A send completes at its ACK (eager) or
//! when the Get has read the source (rendezvous); a synchronous eager send also needs the
//! match: an ACK from the priority list, or the receiver's notice when it went unexpected
//! (libfabric's match-complete protocol).

use firmware_spec::cassini::cmd::{DmaFlags, DmaOp};
use firmware_spec::cassini::dma::FullDma;

use super::config::IDC_MAX;
use super::endpoint::Buf;
use super::endpoint::RX_INDEX;
use super::proto::{self, LAC_SHIFT, RDZV, RID_SHIFT, SYNC};
use super::{CxiTransport, IdcPayload, SendOp};
use crate::error::Result;
use crate::{Completion, OpId, Rank};

/// A message longer than the NIC's 4 GiB limit is refused.
fn check_len(len: usize) -> Result<()> {
    u32::try_from(len).map(|_| ()).map_err(|_| {
        crate::error::Error::Count(format!(
            "a message of {len} bytes is longer than the NIC's 4 GiB limit"
        ))
    })
}

/// A send of `len` bytes to `dest`, nothing attached yet.
fn send_op(dest: Rank, bits: u64, len: usize, sync: bool) -> SendOp {
    let sync_bit = if sync { SYNC } else { 0 };
    SendOp {
        dest,
        bits: proto::user_bits(bits) | sync_bit,
        len,
        idc: None,
        staging: None,
        sync,
        rdzv: None,
        acked: false,
        matched: false,
        pulled: false,
    }
}

impl CxiTransport {
    pub(super) fn start_send(
        &mut self,
        dest: Rank,
        bits: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<OpId> {
        let id = self.new_op();
        if data.len() <= IDC_MAX {
            let mut op = send_op(dest, bits, data.len(), sync);
            op.idc = Some(IdcPayload::new(data));
            self.bump("idc");
            return self.queue_send(id, op);
        }
        check_len(data.len())?;
        let rid = self.rid_for(data.len())?;
        let buf = self.ep.buf(data.len())?;
        buf.write(0, data)?;
        self.bump("send_staged");
        self.send_with_buf(id, dest, bits, data.len(), sync, buf, rid)
    }

    /// Send the `len` bytes at the start of `buf`, the application's own memory (zero
    /// copy): eager or rendezvous by length.
    pub(super) fn start_send_buf(
        &mut self,
        dest: Rank,
        bits: u64,
        len: usize,
        sync: bool,
        buf: Buf,
    ) -> Result<OpId> {
        check_len(len)?;
        let id = self.new_op();
        let rid = self.rid_for(len)?;
        self.bump("send_zero_copy");
        self.send_with_buf(id, dest, bits, len, sync, buf, rid)
    }

    /// A rendezvous id for a message of `len` bytes that goes by rendezvous.
    fn rid_for(&mut self, len: usize) -> Result<Option<u8>> {
        if len > self.cfg.rdzv_threshold {
            self.free_rid().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Send `id`: the `len` bytes at the start of `buf`, eager, or by rendezvous `rid`.
    #[allow(clippy::too_many_arguments)]
    fn send_with_buf(
        &mut self,
        id: u64,
        dest: Rank,
        bits: u64,
        len: usize,
        sync: bool,
        buf: Buf,
        rid: Option<u8>,
    ) -> Result<OpId> {
        let mut op = send_op(dest, bits, len, sync);
        match rid {
            None => self.bump("eager"),
            Some(rid) => {
                self.ep.expose_lac(buf.md.lac())?;
                self.rdzv_ids.insert(rid, id);
                op.rdzv = Some(rid);
                self.bump("rendezvous");
            }
        }
        op.staging = Some(buf);
        self.queue_send(id, op)
    }

    fn queue_send(&mut self, id: u64, op: SendOp) -> Result<OpId> {
        let dest = op.dest;
        self.sends.insert(id, op);
        // A peer whose PtlTE refused our messages gets nothing new until it resumes them
        // (flow control, `fc`): queued behind the dropped ones, in order.
        if self.fc_holds(dest) {
            self.fc_queue(dest, id);
        } else {
            self.issue_send(id)?;
        }
        Ok(OpId(id))
    }

    /// Put send `id` on the wire (again, when it is replayed after flow control).
    pub(super) fn issue_send(&mut self, id: u64) -> Result<()> {
        let Some(op) = self.sends.get(&id) else {
            return Ok(());
        };
        let to = self.peers[op.dest as usize];
        let my_id = self.ep.my_match_id();
        let eq = self.ep.eq.eqn() as u16;
        let (dfa, index_ext) = self.ep.dfa(to, RX_INDEX);
        let dest = op.dest;
        // Sends go without their doorbell: the next progress (every wait makes progress)
        // rings once for all the sends issued since (`Endpoint::dma_more`).
        if let Some(data) = &op.idc {
            self.ep
                .idc_msg(to, RX_INDEX, op.bits, id, id, data.bytes(), true)?;
        } else if let (Some(buf), None) = (&op.staging, op.rdzv) {
            let cmd = FullDma {
                opcode: DmaOp::Put,
                index_ext,
                lac: buf.md.lac(),
                flags: DmaFlags {
                    event_send_disable: true,
                    ..DmaFlags::default()
                },
                dfa,
                local_addr: buf.iova(0),
                request_len: op.len as u32,
                eq,
                initiator: my_id,
                match_bits: op.bits,
                header_data: id,
                user_ptr: id,
                ..FullDma::default()
            };
            self.ep.dma_more(cmd)?;
        } else if let (Some(buf), Some(rid)) = (&op.staging, op.rdzv) {
            let lac = buf.md.lac();
            let eager = self.cfg.rdzv_eager.min(op.len) as u32;
            let cmd = FullDma {
                opcode: DmaOp::RendezvousPut,
                index_ext,
                lac,
                flags: DmaFlags {
                    event_send_disable: true,
                    use_offset_for_get: true,
                    ..DmaFlags::default()
                },
                dfa,
                // The offset the target NIC's Get reads from (`use_offset_for_get`).
                remote_offset: buf.iova(0),
                local_addr: buf.iova(0),
                request_len: op.len as u32,
                eq,
                eager_length: eager,
                rendezvous_id: rid,
                initiator: my_id,
                match_bits: op.bits
                    | RDZV
                    | u64::from(rid) << RID_SHIFT
                    | u64::from(lac) << LAC_SHIFT,
                header_data: buf.iova(0),
                user_ptr: id,
                ..FullDma::default()
            };
            self.ep.dma(cmd)?;
        }
        self.fc_issued(dest);
        Ok(())
    }

    /// Whether a send of `len` bytes would wait in [`CxiTransport::start_send`] for a
    /// rendezvous id, all 256 being held by rendezvous sends not yet pulled: a caller that
    /// must not block (libfabric's `-FI_EAGAIN`) asks first.
    pub fn send_would_wait(&self, len: usize) -> bool {
        len > self.cfg.rdzv_threshold && self.rdzv_ids.len() > usize::from(u8::MAX)
    }

    /// A rendezvous id not in use (8 bits in the command, cassini.md §6); waits for one
    /// when all 256 are.
    fn free_rid(&mut self) -> Result<u8> {
        self.wait_for("waiting for a free rendezvous id", |t| {
            (0..=255u8)
                .map(|k| t.next_rid.wrapping_add(k))
                .find(|r| !t.rdzv_ids.contains_key(r))
                .inspect(|r| t.next_rid = r.wrapping_add(1))
        })
    }

    /// Complete send `id` if everything it waits for happened.
    pub(super) fn try_finish_send(&mut self, id: u64) {
        let Some(op) = self.sends.get(&id) else {
            return;
        };
        let done = if op.rdzv.is_some() {
            op.acked && op.pulled
        } else {
            op.acked && (!op.sync || op.matched)
        };
        if done && let Some(op) = self.sends.remove(&id) {
            if let Some(b) = op.staging {
                self.ep.release(b);
            }
            self.done.insert(OpId(id), Completion::Sent);
        }
    }

    /// The receiver matched synchronous send `id` (its notice arrived).
    pub(super) fn on_notice(&mut self, id: u64) {
        if let Some(op) = self.sends.get_mut(&id) {
            op.matched = true;
            self.try_finish_send(id);
        }
    }

    /// Tell `source` that its synchronous send `id` was matched: a control message to its
    /// control LE.
    pub(super) fn send_notice(&mut self, source: Rank, id: u64) -> Result<()> {
        self.send_ctrl(source, proto::NOTICE, id)?;
        self.bump("sync_notices");
        Ok(())
    }
}
