//! Transfers: the paced BTE step takes TXDs from the channels (`start`, checked against the
//! MDDs), issues their packets (one by one, or as trains), and completes each one when every
//! request is answered (`finish`: CQ event, channel status, interrupt).

use crate::fault::Fault;
use crate::mdd::{Access, Domains};
use crate::packet::{BTE_STREAM_BASE, HEADER_LEN, Header, Kind, TC_BTE, TC_FMA, flag};
use crate::regs::counter;
use crate::request::{Dest, Landing, Owner, Req};
use emu_core::dma::{DmaPort, Segment};
use emu_core::time::SimDuration;
use firmware_spec::gemini::bte::{BteOp, TxDescriptor, TxdFlags, TxdMode1, TxdMode2, txvc_flag};
use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};
use firmware_spec::gemini::pci::{IRQ_TX, irq_index};

use super::port::BtePort;
use super::tx::{Bte, CHANNELS, Local, SEND_MAX_BYTES, XPhase, Xfer};

impl Bte {
    /// One BTE step: refill the token bucket, issue up to the budget, re-arm.
    pub(crate) fn step(&mut self, p: &mut impl BtePort) {
        self.step_armed = false;
        let now = p.now();
        let bw = self.bandwidth;
        let burst = self.max_burst.max(u64::from(self.packet_bytes));
        let budget = if bw == 0 {
            self.step_bytes.max(1)
        } else {
            let elapsed = u128::from(now.since(self.refill).0);
            let add = elapsed * u128::from(bw) / 1_000_000_000_000;
            self.credit = (u128::from(self.credit) + add).min(u128::from(burst)) as u64;
            self.refill = now;
            self.credit
        };
        let used = if budget > 0 {
            self.issue_budget(p, budget)
        } else {
            0
        };
        if bw > 0 {
            self.credit = self.credit.saturating_sub(used);
        }
        if (0..CHANNELS).any(|c| self.has_work(c)) {
            let delay = if bw == 0 {
                SimDuration::ZERO
            } else {
                let want = self.step_bytes.max(1).saturating_sub(self.credit);
                let ps = u128::from(want.max(1)) * 1_000_000_000_000 / u128::from(bw);
                SimDuration(u64::try_from(ps).unwrap_or(u64::MAX))
            };
            self.step_armed = true;
            p.step_after(delay);
        }
    }

    /// Issue packets round-robin over the channels until `budget` bytes are used or no
    /// channel can go on. Returns the bytes used.
    pub(super) fn issue_budget(&mut self, p: &mut impl BtePort, budget: u64) -> u64 {
        let mut used = 0u64;
        let mut idle = 0;
        while used < budget && idle < CHANNELS {
            let ch = self.rr;
            self.rr = (ch + 1) % CHANNELS;
            match self.channel_work(p, ch, budget - used) {
                Some(n) => {
                    used += n;
                    idle = 0;
                }
                None => idle += 1,
            }
        }
        used
    }

    /// Start the next TXD of `ch` if none is active, then issue one packet of the active one
    /// (with `left` bytes of the step's budget left).
    pub(super) fn channel_work(
        &mut self,
        p: &mut impl BtePort,
        ch: usize,
        left: u64,
    ) -> Option<u64> {
        if !self.has_work(ch) {
            return None;
        }
        let x = match self.tx[ch].active {
            Some(x) => x,
            None => {
                let (base, count) = self.ring(ch);
                let pos = self.tx[ch].regs.read_index;
                let txd = self.txd_at(base + pos).unwrap_or_default();
                self.tx[ch].regs.read_index = (pos + 1) % count.max(1);
                p.count(counter::BTE_TXDS, 1);
                match self.start(p, ch, pos, txd) {
                    Some(x) => x,
                    None => return Some(0),
                }
            }
        };
        Some(self.issue_packet(p, x, left))
    }

    /// Validate a TXD and create its transfer; on a local error it completes at once.
    pub(super) fn start(
        &mut self,
        p: &mut impl BtePort,
        ch: usize,
        pos: u64,
        txd: TxDescriptor,
    ) -> Option<u32> {
        let id = self.next_xfer;
        self.next_xfer = self.next_xfer.wrapping_add(1);
        let op = txd.op().unwrap_or(BteOp::Send);
        let local = if txd.nat_enabled() {
            Local::Mdd(
                Access {
                    mdh: txd.src_mem_dh as u16,
                    vmdh: false,
                    ptag: txd.src_ptag as u8,
                },
                txd.src_mem_off,
            )
        } else {
            Local::Phys(txd.src_phys_addr())
        };
        let mode1 = txd.mode1;
        let dest = Dest {
            pe: txd.dest_pe as u32,
            acc: Access {
                mdh: txd.dest_mem_dh as u16,
                vmdh: mode1 & u64::from(TxdMode1::VMDH_ENABLE.bits()) != 0,
                ptag: txd.dest_ptag as u8,
            },
            ordered: mode1 & u64::from(TxdMode1::ADP_ENABLE.bits()) == 0,
            stream: BTE_STREAM_BASE + ch as u16,
        };
        let mut x = Xfer {
            ch,
            pos,
            txd,
            op,
            local,
            dest,
            issued: 0,
            total: txd.data_len,
            processed: false,
            outstanding: 0,
            error: None,
            phase: XPhase::Data,
            last_progress: p.now(),
            trained: false,
            local_owed: false,
        };
        let check = Self::validate(p.domains(), p.dma(), &x);
        self.tx[ch].inflight += 1;
        if let Err(f) = check {
            x.error = Some(f);
            x.processed = true;
            self.xfers.insert(id, x);
            p.count(counter::ERRORS, 1);
            self.finish(p, id);
            return None;
        }
        self.tx[ch].active = Some(id);
        self.xfers.insert(id, x);
        Some(id)
    }

    pub(super) fn validate(domains: &Domains, dma: &DmaPort, x: &Xfer) -> Result<(), Fault> {
        x.txd.op().map_err(|_| Fault::BadCommand)?;
        x.txd.mode1().map_err(|_| Fault::BadCommand)?;
        let len = x.total;
        let (local_addr, write_local) = match x.local {
            Local::Mdd(_, off) => (off, x.op == BteOp::Get),
            Local::Phys(a) => (a, x.op == BteOp::Get),
        };
        if x.op == BteOp::Get
            && !firmware_spec::gemini::limits::get_is_aligned(local_addr, x.txd.dest_mem_off, len)
        {
            return Err(Fault::Misaligned);
        }
        if x.op == BteOp::Send && len > SEND_MAX_BYTES {
            return Err(Fault::BadLength);
        }
        match x.local {
            Local::Mdd(acc, off) => domains.check(dma, acc, off, len, write_local),
            Local::Phys(a) => {
                let perm = if write_local {
                    emu_core::dma::Perm::WRITE
                } else {
                    emu_core::dma::Perm::READ
                };
                dma.check(a, len, perm).map_err(|_| Fault::Dma)
            }
        }
    }

    pub(super) fn read_local(
        domains: &Domains,
        dma: &DmaPort,
        local: Local,
        at: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        match local {
            Local::Mdd(acc, off) => domains.read(dma, acc, off + at, buf),
            Local::Phys(a) => dma.read(a + at, buf).map_err(|_| Fault::Dma),
        }
    }

    /// The frames of PUT or GET transfer `id` that may go now as one train: as many as frame by
    /// frame the step would issue with `left` bytes of budget and the flow-control window
    /// would let out. `None` when that is one frame or the destination needs frames.
    pub(super) fn train_frames(&self, p: &impl BtePort, id: u32, left: u64) -> Option<(u32, u64)> {
        let x = self.xfers.get(&id)?;
        if x.op == BteOp::Send || !p.train_ok(x.dest.pe) {
            return None;
        }
        let pb = u64::from(self.packet_bytes.max(4));
        let room = u64::from(self.max_outstanding.saturating_sub(x.outstanding));
        let by_budget = left.max(1).div_ceil(pb);
        let remaining = x.total - x.issued;
        let frames = room.min(by_budget).min(remaining.div_ceil(pb));
        if frames < 2 {
            return None;
        }
        let n = (frames * pb).min(remaining);
        Some((u32::try_from(frames).ok()?, n))
    }

    /// Issue the next frames of transfer `id` as one train of `frames` frames and `n`
    /// payload bytes: PUT frames with their payload left in host memory, or GET requests
    /// whose answers come back as one train landing at the first frame's landing, which
    /// covers them all.
    pub(super) fn issue_train(
        &mut self,
        p: &mut impl BtePort,
        id: u32,
        frames: u32,
        n: u64,
    ) -> Result<(), Fault> {
        let Some(x) = self.xfers.get(&id) else {
            return Ok(());
        };
        if x.op == BteOp::Get {
            let landing = match x.local {
                Local::Mdd(acc, off) => Landing::Mdd {
                    acc,
                    offset: off + x.issued,
                    len: u32::try_from(n).map_err(|_| Fault::BadLength)?,
                    flag: false,
                },
                Local::Phys(a) => Landing::Phys { addr: a + x.issued },
            };
            let mut h = Header::new(Kind::GetReq);
            h.offset = x.txd.dest_mem_off + x.issued;
            h.len = u32::try_from(n).map_err(|_| Fault::BadLength)?;
            let req = Req {
                owner: Owner::Xfer(id),
                landing,
                is_get: false,
            };
            let dest = x.dest;
            if let Some(x) = self.xfers.get_mut(&id) {
                x.issued += n;
                x.outstanding += frames;
            }
            p.issue_train(req, &dest, h, frames, Vec::new(), TC_FMA);
            return Ok(());
        }
        let segments = match x.local {
            Local::Mdd(acc, off) => p
                .domains()
                .segments(p.dma(), acc, off + x.issued, n, false)?,
            Local::Phys(a) => vec![Segment {
                addr: a + x.issued,
                len: n,
            }],
        };
        let mut h = Header::new(Kind::Put);
        h.offset = x.txd.dest_mem_off + x.issued;
        let req = Req {
            owner: Owner::Xfer(id),
            landing: Landing::None,
            is_get: false,
        };
        let dest = x.dest;
        if let Some(x) = self.xfers.get_mut(&id) {
            x.issued += n;
            x.outstanding += frames;
            x.trained = true;
        }
        p.issue_train(req, &dest, h, frames, segments, TC_BTE);
        Ok(())
    }

    /// Issue the next packet of transfer `id` (a train of frames when allowed, with `left`
    /// bytes of the step's budget left); returns the bytes it accounts for.
    pub(super) fn issue_packet(&mut self, p: &mut impl BtePort, id: u32, left: u64) -> u64 {
        if let Some((frames, n)) = self.train_frames(p, id, left) {
            let r = self.issue_train(p, id, frames, n);
            return self.issued(p, id, n, r.err());
        }
        let Some(x) = self.xfers.get(&id) else {
            return 0;
        };
        let (op, local, dest, issued, total) = (x.op, x.local, x.dest, x.issued, x.total);
        let (txd, ch) = (x.txd, x.ch);
        let max = if op == BteOp::Send {
            SEND_MAX_BYTES
        } else {
            u64::from(self.packet_bytes.max(4))
        };
        let n = (total - issued).min(max);
        let req = Req {
            owner: Owner::Xfer(id),
            landing: Landing::None,
            is_get: false,
        };
        let mut fault = None;
        match op {
            BteOp::Put | BteOp::Send => {
                // The payload is read from host memory straight into the frame, in a
                // buffer the receiver gives back: no second copy, no fresh allocation.
                let mut frame = p.frame_buffer(HEADER_LEN + n as usize);
                frame.resize(HEADER_LEN + n as usize, 0);
                if let Err(f) = Self::read_local(
                    p.domains(),
                    p.dma(),
                    local,
                    issued,
                    &mut frame[HEADER_LEN..],
                ) {
                    fault = Some(f);
                } else {
                    let mut h = if op == BteOp::Put {
                        Header::new(Kind::Put)
                    } else {
                        Header::new(Kind::Send)
                    };
                    h.offset = txd.dest_mem_off + issued;
                    if op == BteOp::Send {
                        h.cmd = ch as u16;
                        if txd.mode1 & u64::from(TxdMode1::IMMED.bits()) != 0 {
                            h.flags |= flag::IMMED;
                            h.op1 = txd.user_data;
                        }
                    }
                    self.note_issue(id, n);
                    p.issue_frame(req, &dest, h, frame, TC_BTE);
                }
            }
            BteOp::Get => {
                let landing = match local {
                    Local::Mdd(acc, off) => Landing::Mdd {
                        acc,
                        offset: off + issued,
                        len: n as u32,
                        flag: false,
                    },
                    Local::Phys(a) => Landing::Phys { addr: a + issued },
                };
                let mut h = Header::new(Kind::GetReq);
                h.offset = txd.dest_mem_off + issued;
                h.len = n as u32;
                self.note_issue(id, n);
                p.issue(Req { landing, ..req }, &dest, h, &[], TC_FMA);
            }
        }
        self.issued(p, id, n, fault)
    }

    /// After `n` bytes of transfer `id` were issued (or `fault` stopped it): when it was
    /// the last of them, the local event (now, or once every request is answered if part
    /// went as a train) and, with nothing outstanding, the next phase. Returns `n`.
    pub(super) fn issued(
        &mut self,
        p: &mut impl BtePort,
        id: u32,
        n: u64,
        fault: Option<Fault>,
    ) -> u64 {
        let Some(x) = self.xfers.get_mut(&id) else {
            return n;
        };
        if let Some(f) = fault {
            x.error.get_or_insert(f);
            x.issued = x.total;
        }
        if x.issued >= x.total {
            x.processed = true;
            let ch = x.ch;
            let done = x.outstanding == 0;
            let local_event = x.error.is_none()
                && x.txd.mode1 & u64::from(TxdMode1::CQ_LOCAL.bits()) != 0
                && x.txd.mode1 & u64::from(TxdMode1::CONCAT.bits()) == 0;
            let (cqh, data) = (x.txd.src_cq_hndl, x.txd.src_cq_data);
            if self.tx[ch].active == Some(id) {
                self.tx[ch].active = None;
            }
            if local_event && x.trained {
                // The source is read when the train lands: the event that lets software
                // reuse it waits for the answers.
                x.local_owed = true;
            } else if local_event {
                p.post_cqe(cqh, Cqe::from_hw(CqeSource::Bte, HwStatus::Ok, data));
            }
            if done {
                self.advance(p, id);
            }
        }
        n
    }

    pub(super) fn note_issue(&mut self, id: u32, n: u64) {
        if let Some(x) = self.xfers.get_mut(&id) {
            x.issued += n;
            x.outstanding += 1;
        }
    }

    /// An answer (or timeout) for a request of transfer `id`.
    pub(crate) fn xfer_answered(&mut self, p: &mut impl BtePort, id: u32, fault: Option<Fault>) {
        let now = p.now();
        let Some(x) = self.xfers.get_mut(&id) else {
            return;
        };
        x.outstanding = x.outstanding.saturating_sub(1);
        x.last_progress = now;
        if let Some(f) = fault {
            if x.error.is_none() && x.phase == XPhase::Data && !x.processed {
                // Stop issuing the rest of a failed transfer.
                x.issued = x.total;
            }
            x.error.get_or_insert(f);
        }
        if x.processed && x.outstanding == 0 {
            self.advance(p, id);
        } else if x.issued < x.total {
            // Flow control: an answer makes room for more requests.
            self.kick(p);
        } else if x.issued >= x.total && !x.processed {
            // The failure above ended the transfer early.
            x.processed = true;
            let ch = x.ch;
            if self.tx[ch].active == Some(id) {
                self.tx[ch].active = None;
            }
            if x.outstanding == 0 {
                self.advance(p, id);
            }
        }
    }

    pub(super) fn advance(&mut self, p: &mut impl BtePort, id: u32) {
        let Some(x) = self.xfers.get_mut(&id) else {
            return;
        };
        if std::mem::take(&mut x.local_owed) && x.error.is_none() {
            let (cqh, data) = (x.txd.src_cq_hndl, x.txd.src_cq_data);
            p.post_cqe(cqh, Cqe::from_hw(CqeSource::Bte, HwStatus::Ok, data));
        }
        if x.phase == XPhase::Data && x.error.is_none() && x.op == BteOp::Put {
            x.phase = XPhase::Remote;
            let dest = x.dest;
            let mut h = Header::new(Kind::RemoteEvent);
            h.op1 = x.txd.user_data & firmware_spec::bits::mask(56);
            h.cmd = u16::from(CqeSource::RmtDreq.code());
            x.outstanding += 1;
            let req = Req {
                owner: Owner::Xfer(id),
                landing: Landing::None,
                is_get: false,
            };
            p.issue(req, &dest, h, &[], TC_BTE);
            return;
        }
        self.finish(p, id);
    }

    /// Retire a transfer: status write-back, events, interrupt.
    pub(super) fn finish(&mut self, p: &mut impl BtePort, id: u32) {
        let Some(x) = self.xfers.remove(&id) else {
            return;
        };
        let ch = x.ch;
        let status = x.error.map_or(HwStatus::Ok, Fault::status);
        let mut txd = x.txd;
        txd.flags = u64::from(TxdFlags::COMPLETE.bits());
        if x.error == Some(Fault::Timeout) {
            txd.flags |= u64::from(TxdFlags::TIMEOUT_ERR.bits());
        }
        txd.bte_tx_status = u64::from(status.code());
        let Some(c) = self.tx.get_mut(ch) else {
            return;
        };
        c.inflight = c.inflight.saturating_sub(1);
        c.completed += 1;
        if let Some(f) = x.error {
            tracing::debug!(
                target: "gemini::bte",
                channel = ch,
                pos = x.pos,
                fault = %f,
                "TXD failed"
            );
            c.err_rc = f.return_code().code();
        }
        let ring = c.regs.cpu_ring_addr;
        let chan_irq = c.regs.flags & txvc_flag::IRQ_ENABLE != 0;
        if ring != 0
            && let Some(at) = ring.checked_add(64 * x.pos)
            && let Ok(img) = txd.encode()
        {
            // A faulting ring address loses only the copy; the CQE still reports.
            let _ = p.dma().write(at, &img);
        }
        let concat = txd.mode1 & u64::from(TxdMode1::CONCAT.bits()) != 0;
        let global = txd.mode1 & u64::from(TxdMode1::CQ_GLOBAL.bits()) != 0;
        if x.error.is_some() {
            // The error takes the place of the event the transfer still owes: the global
            // event's data when one was asked for (the local event may already have been
            // posted when the last request left, and software waits for the global one),
            // else the local event's.
            let data = if global {
                txd.user_data & firmware_spec::bits::mask(56)
            } else {
                txd.src_cq_data
            };
            p.post_cqe(txd.src_cq_hndl, Cqe::from_hw(CqeSource::Bte, status, data));
        } else if global && !concat {
            let data = txd.user_data & firmware_spec::bits::mask(56);
            p.post_cqe(
                txd.src_cq_hndl,
                Cqe::from_hw(CqeSource::Bte, HwStatus::Ok, data),
            );
        }
        if chan_irq || txd.mode2 & u64::from(TxdMode2::IRQ_ENABLE.bits()) != 0 {
            p.raise(irq_index(ch as u32, IRQ_TX) as u16);
        }
        self.kick(p);
    }
}
