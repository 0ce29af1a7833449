//! Transmit commands entering the initiator: `exec_tx` decodes a command of a transmit CQ
//! (CQ control, C_STATE, IDC put and small message, IDC atomics, full and non-matching DMA,
//! DMA atomics, CT commands) and turns each data-moving one into a [`Launch`]; fired
//! CT_TRIG_DMAs enter at `launch_full`, `launch_nomatch` and `launch_dma_amo`.

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::cmd::{CState, Command, CqOp, DmaAmo, DmaOp, FullDma, NomatchDma};
use firmware_spec::cassini::rc::ReturnCode;

use crate::block::{Exec, Fail, format_rc};
use crate::cq::is_noop_header;
use crate::wire::AmoPayload;

use super::complete::IxeComplete;
use super::ctx::IxeCtx;
use super::launch::{IxeLaunch, Launch};
use super::requests::{Req, ReqKind};
use super::source::Source;

/// A 16-byte operand from its two words.
fn words(w1: u64, w2: u64) -> u128 {
    u128::from(w1) | (u128::from(w2) << 64)
}

/// A launch of an IDC command: inline data or an AMO under the queue's C_STATE (its PtlTE
/// index extension, initiator, user pointer, flags, EQ and CT).
fn idc<'a>(cs: &CState, opcode: DmaOp, dfa: u32, remote_offset: u64, len: u32) -> Launch<'a> {
    Launch {
        index_ext: cs.index_ext,
        remote_offset,
        initiator: cs.initiator,
        user_ptr: cs.user_ptr,
        flags: cs.flags,
        eq: cs.eq,
        ct: cs.ct,
        ..Launch::new(opcode, dfa, len, Source::Inline(&[]))
    }
}

/// The initiator's behaviour, on anything that provides an [`IxeCtx`]: where transmit
/// commands enter.
pub(crate) trait IxeOps: IxeCtx {
    /// Execute one transmit command of CQ `n` at half-slot `cur32`; `next` is the first byte
    /// of the following 64 B slot if it has been fetched.
    fn exec_tx(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        bytes: &[u8],
        cur32: u64,
        next: Option<u8>,
    ) -> Result<Exec, Fail> {
        let cmd = Command::decode(bytes).map_err(|e| format_rc(&e))?;
        cmd.validate().map_err(|e| format_rc(&e))?;
        let q = *self.tx_cq(n)?;
        if q.trig && !matches!(cmd, Command::Ct(_) | Command::TrigDma(_)) {
            return Err(ReturnCode::CmdAlignError);
        }
        let cs = q.cstate;
        match cmd {
            Command::IdcNoop(_) => {
                self.counters().num_idc_cmds += 1;
                Ok(Exec::Next)
            }
            Command::Cq(c) => {
                self.counters().num_cq_cmds += 1;
                match c.opcode {
                    CqOp::CqNoop => Ok(Exec::Next),
                    CqOp::CqFence => Ok(if q.outstanding > 0 {
                        Exec::Fence
                    } else {
                        Exec::Next
                    }),
                    CqOp::CqLcid => {
                        // cxi_cq_emit_cq_lcid: 128 B aligned, followed by a 64 B NOOP.
                        if !cur32.is_multiple_of(4) || next.is_some_and(|b| !is_noop_header(b)) {
                            return Err(ReturnCode::CmdAlignError);
                        }
                        let t = self.tx_cq(n)?;
                        t.lcid = c.lcid & 0xF;
                        t.cp_cache = None;
                        Ok(Exec::Next)
                    }
                }
            }
            Command::CState(s) => {
                self.counters().num_idc_cmds += 1;
                self.tx_cq(n)?.cstate = s;
                Ok(Exec::Next)
            }
            Command::IdcPut(p) => {
                self.counters().num_idc_cmds += 1;
                let len = p.payload.len() as u32;
                let l = Launch {
                    src: Source::Inline(p.payload.as_slice()),
                    ..idc(&cs, DmaOp::Put, p.dfa, p.remote_offset, len)
                };
                self.launch(io, n, &l)
            }
            Command::IdcMsg(m) => {
                self.counters().num_idc_cmds += 1;
                let len = m.payload.len() as u32;
                let l = Launch {
                    match_bits: m.match_bits,
                    header_data: m.header_data,
                    user_ptr: m.user_ptr,
                    src: Source::Inline(m.payload.as_slice()),
                    small: true,
                    ..idc(&cs, DmaOp::SmallMessage, m.dfa, 0, len)
                };
                self.launch(io, n, &l)
            }
            Command::Dma(d) => {
                self.counters().num_dma_cmds += 1;
                self.launch_full(io, n, &d)
            }
            Command::NomatchDma(d) => {
                self.counters().num_dma_cmds += 1;
                self.launch_nomatch(io, n, &d)
            }
            Command::Ct(_) | Command::TrigDma(_) => self.ct_command(io, n, bytes),
            Command::IdcAmo(c) => {
                self.counters().num_idc_cmds += 1;
                let fetching = c.opcode == DmaOp::FetchingAtomic;
                let amo = AmoPayload {
                    op: c.atomic_op as u8,
                    ty: c.atomic_type as u8,
                    cswap: c.cswap_op as u8,
                    op1: words(c.op1_word1, c.op1_word2),
                    op2: words(c.op2_word1, c.op2_word2),
                };
                let len = c.atomic_type.size() as u32;
                let l = Launch {
                    amo: Some((amo, fetching.then_some((cs.write_lac, c.local_addr)))),
                    ..idc(&cs, c.opcode, c.dfa, c.remote_offset, len)
                };
                self.launch(io, n, &l)
            }
            Command::IdcSmallAmo(c) => {
                self.counters().num_idc_cmds += 1;
                let amo = AmoPayload {
                    op: c.atomic_op as u8,
                    ty: c.atomic_type as u8,
                    cswap: 0,
                    op1: u128::from(c.op1_word1),
                    op2: 0,
                };
                // One 8-byte operand travels: a 16-byte type arrives short and the target
                // answers AMO_LENGTH_ERROR.
                let len = (c.atomic_type.size() as u32).min(8);
                let l = Launch {
                    amo: Some((amo, None)),
                    ..idc(&cs, DmaOp::Atomic, c.dfa, c.remote_offset, len)
                };
                self.launch(io, n, &l)
            }
            Command::DmaAmo(c) => {
                self.counters().num_dma_cmds += 1;
                self.launch_dma_amo(io, n, &c)
            }
            _ => Err(ReturnCode::IllegalOp),
        }
    }

    /// Launch a DMA AMO from CQ `n` (also a fired CT_TRIG_DMA): operand 1 is read from
    /// local memory (`cxi_cq_emit_dma_amo`), `request_len` travels as it is (the target
    /// answers AMO_LENGTH_ERROR unless it is the operand size).
    fn launch_dma_amo(&mut self, io: &mut DeviceIo<'_>, n: u32, c: &DmaAmo) -> Result<Exec, Fail> {
        let fetching = c.opcode == DmaOp::FetchingAtomic;
        let size = c.atomic_type.size();
        let rgid = self.tx_cqs().get(n as usize).map_or(0, |q| q.ring.rgid);
        let ac = self.tables().lac_ac(rgid, c.lac);
        let mut b = [0u8; 16];
        if let Err(rc) = self
            .atu()
            .read(io.dma(), ac, c.local_read_addr, &mut b[..size])
        {
            self.count_local_error(rc);
            let req = Req {
                active: false,
                kind: if fetching {
                    ReqKind::FetchAmo
                } else {
                    ReqKind::Amo
                },
                cq: n,
                eq: c.eq,
                ct: c.ct,
                user_ptr: c.user_ptr,
                flags: c.flags,
                ..Req::default()
            };
            self.fail_request(io, &req, rc);
            return Ok(Exec::Next);
        }
        let amo = AmoPayload {
            op: c.atomic_op as u8,
            ty: c.atomic_type as u8,
            cswap: c.cswap_op as u8,
            op1: u128::from_le_bytes(b),
            op2: words(c.op2_word1, c.op2_word2),
        };
        let l = Launch {
            index_ext: c.index_ext,
            remote_offset: c.remote_offset,
            initiator: c.initiator,
            match_bits: c.match_bits,
            header_data: c.header_data,
            user_ptr: c.user_ptr,
            flags: c.flags,
            eq: c.eq,
            ct: c.ct,
            amo: Some((amo, fetching.then_some((c.write_lac, c.local_write_addr)))),
            ..Launch::new(c.opcode, c.dfa, c.request_len, Source::Inline(&[]))
        };
        self.launch(io, n, &l)
    }

    /// Launch a full DMA command (PUT, GET or RENDEZVOUS_PUT) from CQ `n` (also a fired
    /// CT_TRIG_DMA).
    fn launch_full(&mut self, io: &mut DeviceIo<'_>, n: u32, d: &FullDma) -> Result<Exec, Fail> {
        if !d.is_valid_opcode() {
            return Err(ReturnCode::IllegalOp);
        }
        let src = Source::Dma {
            lac: d.lac,
            addr: d.local_addr,
        };
        let l = Launch {
            index_ext: d.index_ext,
            remote_offset: d.remote_offset,
            initiator: d.initiator,
            match_bits: d.match_bits,
            header_data: d.header_data,
            user_ptr: d.user_ptr,
            flags: d.flags,
            eq: d.eq,
            ct: d.ct,
            eager_length: d.eager_length,
            rendezvous_id: d.rendezvous_id,
            ..Launch::new(d.opcode, d.dfa, d.request_len, src)
        };
        self.launch(io, n, &l)
    }

    /// Launch a non-matching DMA command (NOMATCH_PUT / NOMATCH_GET) from CQ `n`.
    fn launch_nomatch(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        d: &NomatchDma,
    ) -> Result<Exec, Fail> {
        let src = Source::Dma {
            lac: d.lac,
            addr: d.local_addr,
        };
        let l = Launch {
            index_ext: d.index_ext,
            remote_offset: d.remote_offset,
            flags: d.flags,
            eq: d.eq,
            ct: d.ct,
            nomatch: true,
            ..Launch::new(d.opcode, d.dfa, d.request_len, src)
        };
        self.launch(io, n, &l)
    }
}

impl<T: IxeCtx + ?Sized> IxeOps for T {}
