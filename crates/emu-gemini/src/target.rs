//! What a NIC does with frames from the network: requests are checked against the local
//! memory domains and executed (PUT, GET, AMO, CQ write, remote event, BTE SEND), answers are
//! matched to the requests that wait for them.
//!
//! Requests of an in-order stream (`flag::ORDERED`) are applied in stream order; a gap that
//! does not fill within half the request timeout is skipped (docs/gemini-programming.md,
//! "Ordering").

use crate::amo;
use crate::device::Gemini;
use crate::fault::Fault;
use crate::mdd::Access;
use crate::packet::{BTE_STREAM_BASE, HEADER_LEN, Header, Kind, TC_BTE, TC_FMA, flag};
use crate::regs::counter;
use crate::request::Landing;
use emu_core::engine::DeviceIo;
use emu_core::fabric::Packet;
use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};

/// Largest GET one request may ask for.
pub const MAX_GET_BYTES: u32 = 1 << 20;

impl Gemini {
    /// A frame arrived.
    pub(crate) fn on_packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        self.count(counter::PACKETS_RX, 1);
        self.count(counter::BYTES_RX, pkt.data.len() as u64);
        if !pkt.crc_ok() {
            self.count(counter::CRC_DROPS, 1);
            return;
        }
        let hdr = match Header::decode(&pkt.data) {
            Ok((h, _)) => h,
            Err(_) => {
                self.count(counter::BAD_FRAMES, 1);
                return;
            }
        };
        let src = pkt.src.0;
        let payload = pkt.data.get(HEADER_LEN..).unwrap_or(&[]);
        if hdr.kind.is_answer() {
            self.on_answer(io, &hdr, payload);
        } else if hdr.flags & flag::ORDERED != 0 {
            self.on_ordered(io, src, hdr, pkt);
        } else {
            self.on_request(io, src, &hdr, payload);
        }
    }

    fn on_ordered(&mut self, io: &mut DeviceIo<'_>, src: u32, hdr: Header, pkt: Packet) {
        let key = (src, hdr.stream);
        let now = io.now();
        let st = self.order_rx.entry(key).or_default();
        let ahead = hdr.seq.wrapping_sub(st.next) as i32;
        if ahead > 0 {
            if st.held.is_empty() {
                st.since = now;
            }
            st.held.insert(hdr.seq, pkt);
            self.ensure_watchdog(io);
            return;
        }
        if ahead == 0 {
            st.next = st.next.wrapping_add(1);
        }
        let payload = pkt.data.get(HEADER_LEN..).unwrap_or(&[]);
        self.on_request(io, src, &hdr, payload);
        self.drain_order(io, key);
    }

    /// Apply held requests of a stream while the next one in order is there.
    fn drain_order(&mut self, io: &mut DeviceIo<'_>, key: (u32, u16)) {
        let now = io.now();
        loop {
            let Some(st) = self.order_rx.get_mut(&key) else {
                return;
            };
            let Some(pkt) = st.held.remove(&st.next) else {
                return;
            };
            st.next = st.next.wrapping_add(1);
            st.since = now;
            if let Ok((hdr, payload)) = Header::decode(&pkt.data) {
                self.on_request(io, key.0, &hdr, payload);
            }
        }
    }

    /// Give up on the missing requests before the first held one of a stream.
    pub(crate) fn skip_order_gap(&mut self, io: &mut DeviceIo<'_>, key: (u32, u16)) {
        if let Some(st) = self.order_rx.get_mut(&key)
            && let Some(&first) = st.held.keys().next()
        {
            st.next = first;
        }
        self.drain_order(io, key);
    }

    #[allow(clippy::too_many_arguments)]
    fn reply(
        &mut self,
        io: &mut DeviceIo<'_>,
        to: u32,
        req: &Header,
        kind: Kind,
        result: Result<(), Fault>,
        flags: u8,
        op1: u64,
        payload: &[u8],
    ) {
        let status = match result {
            Ok(()) => HwStatus::Ok,
            Err(f) => {
                tracing::debug!(
                    target: "gemini::target",
                    nic = self.core.cfg.pe,
                    from = to,
                    kind = ?req.kind,
                    fault = %f,
                    "remote request rejected"
                );
                self.count(counter::REMOTE_REJECTS, 1);
                f.status()
            }
        };
        let mut h = req.answer(kind, status.code());
        h.flags = flags;
        h.op1 = op1;
        let tc = if req.stream >= BTE_STREAM_BASE {
            TC_BTE
        } else {
            TC_FMA
        };
        let frame = h.encode(payload);
        self.send_frame(io, to, tc, frame);
    }

    /// Raise an event in the CQ of the domain `acc` names. `Ok(true)` if it was lost to a
    /// full CQ. Without a CQ: `NoCq` if `require_cq`, else nothing happens.
    fn raise_remote(
        &mut self,
        io: &mut DeviceIo<'_>,
        acc: Access,
        source: CqeSource,
        data56: u64,
        require_cq: bool,
    ) -> Result<bool, Fault> {
        let cqh = self.core.domains.resolve(acc)?.cqh;
        if cqh == 0 {
            return if require_cq {
                Err(Fault::NoCq)
            } else {
                Ok(false)
            };
        }
        let cqe = Cqe::from_hw(source, HwStatus::Ok, data56);
        Ok(self.post_cqe(io, cqh, cqe) == crate::cq::Posted::Lost)
    }

    fn on_request(&mut self, io: &mut DeviceIo<'_>, src: u32, hdr: &Header, payload: &[u8]) {
        let acc = Access {
            mdh: hdr.mdh,
            vmdh: hdr.flags & flag::VMDH != 0,
            ptag: hdr.ptag,
        };
        match hdr.kind {
            Kind::Put if hdr.flags & flag::MSG != 0 => {
                let r = self.write_message(io, acc, hdr.offset, payload);
                self.reply(io, src, hdr, Kind::Ack, r, 0, 0, &[]);
            }
            Kind::Put => {
                let r = self.core.domains.write(io.dma(), acc, hdr.offset, payload);
                self.reply(io, src, hdr, Kind::Ack, r, 0, 0, &[]);
            }
            Kind::GetReq => {
                if hdr.len > MAX_GET_BYTES {
                    return self.reply(
                        io,
                        src,
                        hdr,
                        Kind::GetResp,
                        Err(Fault::BadLength),
                        0,
                        0,
                        &[],
                    );
                }
                let mut buf = vec![0u8; hdr.len as usize];
                match self.core.domains.read(io.dma(), acc, hdr.offset, &mut buf) {
                    Ok(()) => self.reply(io, src, hdr, Kind::GetResp, Ok(()), 0, 0, &buf),
                    Err(f) => self.reply(io, src, hdr, Kind::GetResp, Err(f), 0, 0, &[]),
                }
            }
            Kind::AmoReq => {
                let r = amo::execute(
                    &self.core.domains,
                    io.dma(),
                    acc,
                    hdr.offset,
                    hdr.cmd,
                    hdr.op1,
                    hdr.op2,
                );
                let old = *r.as_ref().unwrap_or(&0);
                self.reply(io, src, hdr, Kind::AmoResp, r.map(|_| ()), 0, old, &[]);
            }
            Kind::CqWrite | Kind::RemoteEvent => {
                let cq_write = hdr.kind == Kind::CqWrite;
                let source = if cq_write {
                    CqeSource::RmtSreq
                } else {
                    CqeSource::try_from(hdr.cmd as u8)
                        .ok()
                        .filter(|s| s.is_remote())
                        .unwrap_or(CqeSource::RmtDreq)
                };
                let data = if cq_write {
                    hdr.op1 & firmware_spec::bits::mask(firmware_spec::gemini::cqe::DATA_BITS)
                } else {
                    hdr.op1 & firmware_spec::bits::mask(firmware_spec::gemini::cqe::HW_DATA_BITS)
                };
                let r = self.raise_remote(io, acc, source, data, cq_write);
                let flags = if matches!(r, Ok(true)) {
                    flag::REM_OVERRUN
                } else {
                    0
                };
                self.reply(io, src, hdr, Kind::Ack, r.map(|_| ()), flags, 0, &[]);
            }
            Kind::Send => {
                let r = self.bte_receive(io, hdr, payload);
                self.reply(io, src, hdr, Kind::Ack, r, 0, 0, &[]);
            }
            Kind::GetResp | Kind::AmoResp | Kind::Ack => {}
        }
    }

    /// Write an SMSG message so that its first 8 bytes (the slot header's seqno, tag and
    /// kind) become visible last, with a release store when they are 8-byte aligned: a
    /// receiver polling the mailbox never sees a header before its payload.
    fn write_message(
        &self,
        io: &DeviceIo<'_>,
        acc: Access,
        offset: u64,
        msg: &[u8],
    ) -> Result<(), Fault> {
        if msg.len() < 8 || !offset.is_multiple_of(8) {
            return self.core.domains.write(io.dma(), acc, offset, msg);
        }
        self.core
            .domains
            .check(io.dma(), acc, offset, msg.len() as u64, true)?;
        self.core
            .domains
            .write(io.dma(), acc, offset + 8, &msg[8..])?;
        let mut first = [0u8; 8];
        first.copy_from_slice(&msg[..8]);
        let v = u64::from_le_bytes(first);
        self.core.domains.atomic(io.dma(), acc, offset, |w| {
            w.store(v, std::sync::atomic::Ordering::Release)
        })
    }

    /// Put the data of an answer where the request asked.
    fn land(&self, io: &DeviceIo<'_>, landing: Landing, bytes: &[u8]) -> Result<(), Fault> {
        match landing {
            Landing::None => Ok(()),
            Landing::Mdd {
                acc,
                offset,
                len,
                flag,
            } => {
                if bytes.len() != len as usize {
                    return Err(Fault::BadLength);
                }
                self.core.domains.write(io.dma(), acc, offset, bytes)?;
                if flag {
                    self.core.domains.write(
                        io.dma(),
                        acc,
                        offset + u64::from(len),
                        &1u32.to_le_bytes(),
                    )?;
                }
                Ok(())
            }
            Landing::Phys { addr } => io.dma().write(addr, bytes).map_err(|_| Fault::Dma),
        }
    }

    fn on_answer(&mut self, io: &mut DeviceIo<'_>, hdr: &Header, payload: &[u8]) {
        let Some(req) = self.core.requests.take(hdr.tag) else {
            self.count(counter::STRAY_ANSWERS, 1);
            return;
        };
        let mut fault = Fault::from_wire(hdr.status);
        if fault.is_none() {
            let r = match hdr.kind {
                Kind::GetResp => self.land(io, req.landing, payload),
                Kind::AmoResp => self.land(io, req.landing, &hdr.op1.to_le_bytes()),
                _ => Ok(()),
            };
            fault = r.err();
        }
        self.answered(io, req, fault, hdr.flags & flag::REM_OVERRUN != 0);
    }
}
