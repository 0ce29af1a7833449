//! A two-node exchange printed in the style of the cxi tools: every command written to a
//! ring and every event read from an event queue, one line each. Used by `nicemu demo
//! cassini`.

use std::io::Write;

use firmware_spec::cassini::cmd::{
    CState, DmaFlags, DmaOp, FullDma, IdcMsg, Payload, SetStateCmd, TargetCmd, TgtOp,
};
use firmware_spec::cassini::dfa::{PidBits, match_id};
use firmware_spec::cassini::event::Event;
use firmware_spec::cassini::le::{LeFlags, PtAllocOpts, PtlList, PtlteState};
use thiserror::Error;

use crate::harness::{Cluster, CmdQueue, EqOpts, EqRing, HarnessError, Md, PAGE, dfa};

/// Why the demo failed.
#[derive(Debug, Error)]
pub enum DemoError {
    /// Setting up or driving the emulated NICs failed.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// Writing the transcript failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The exchange did not produce what it should (a bug in the model).
    #[error("unexpected result: {0}")]
    Unexpected(String),
}

/// One line per event, like `cxi_event_to_str` plus the fields that matter.
pub fn event_line(ev: &Event) -> String {
    match ev {
        Event::InitiatorShort(e) => format!(
            "{:<14} rc={:<16} mlength={} user_ptr={:#x}",
            e.event_type.name(),
            e.return_code.name(),
            e.mlength,
            e.user_ptr
        ),
        Event::InitiatorLong(e) => format!(
            "{:<14} rc={:<16} mlength={} user_ptr={:#x}",
            e.event_type.name(),
            e.return_code.name(),
            e.mlength,
            e.user_ptr
        ),
        Event::TargetShort(e) => format!(
            "{:<14} rc={:<16} ptlte={} list={} buffer_id={} mlength={} match_bits={:#x}{}",
            e.event_type.name(),
            e.return_code.name(),
            e.ptlte_index,
            e.ptl_list.name(),
            e.buffer_id,
            e.length,
            e.match_bits,
            if e.auto_unlinked {
                " auto_unlinked"
            } else {
                ""
            }
        ),
        Event::TargetLong(e) => format!(
            "{:<14} rc={:<16} ptlte={} list={} buffer_id={} mlength={} rlength={} start={:#x}",
            e.event_type.name(),
            e.return_code.name(),
            e.ptlte_index,
            e.ptl_list.name(),
            e.buffer_id,
            e.mlength,
            e.rlength,
            e.start
        ),
        Event::CommandFailure(e) => format!(
            "{:<14} rc={:<16} cq={} fail_loc={}",
            "COMMAND_FAILURE",
            e.return_code.name(),
            e.cq_id,
            e.fail_loc
        ),
        other => format!(
            "{:<14} rc={}",
            other.event_type().name(),
            other.return_code().name()
        ),
    }
}

struct Demo<'a> {
    c: Cluster,
    out: &'a mut dyn Write,
}

impl Demo<'_> {
    fn cmd(
        &mut self,
        node: usize,
        q: &mut CmdQueue,
        what: &str,
        bytes: &[u8],
    ) -> Result<(), DemoError> {
        writeln!(
            self.out,
            "  nid{node} {} CQ {:<2} cmd  {what}",
            if q.tgt { "TGT" } else { "TX " },
            q.n
        )?;
        q.emit(&self.c.nodes[node], bytes)?;
        Ok(())
    }

    fn ring(&mut self, node: usize, q: &mut CmdQueue) -> Result<(), DemoError> {
        q.ring(&self.c.nodes[node])?;
        writeln!(
            self.out,
            "  nid{node} {} CQ {:<2} doorbell wr_ptr={}",
            if q.tgt { "TGT" } else { "TX " },
            q.n,
            q.wr_ptr()
        )?;
        Ok(())
    }

    /// Run the engine and print every event that arrived on `eq` of `node`.
    fn events(&mut self, node: usize, eq: &mut EqRing) -> Result<Vec<Event>, DemoError> {
        self.c.settle();
        let mut v = Vec::new();
        while let Some(e) = eq.next(&self.c.nodes[node])? {
            writeln!(
                self.out,
                "  nid{node} EQ {:<2} event {}",
                eq.n,
                event_line(&e)
            )?;
            v.push(e);
        }
        eq.ack(&self.c.nodes[node])?;
        Ok(v)
    }
}

/// An APPEND; `mb` = `None` matches any match bits.
fn le(pt: u16, list: PtlList, bid: u16, md: &Md, flags: LeFlags, mb: Option<u64>) -> [u8; 64] {
    let mut t = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: list,
        ptlte_index: pt,
        buffer_id: bid,
        start: md.iova,
        length: md.len,
        match_id: u32::MAX,
        match_bits: mb.unwrap_or(0),
        ignore_bits: if mb.is_some() { 0 } else { u64::MAX },
        ..TargetCmd::default()
    };
    t.set_opts(flags);
    t.encode()
}

/// Print a two-node exchange: an expected small message, an unexpected one and its late
/// receive (PUT_OVERFLOW), a 64 KiB DMA put and a DMA get.
pub fn run(out: &mut dyn Write) -> Result<(), DemoError> {
    let c = Cluster::deterministic(2, 1)?;
    let mut d = Demo { c, out };
    writeln!(
        d.out,
        "cassini demo: 2 emulated Cassini NICs (nid0, nid1), one switch, deterministic engine"
    )?;
    writeln!(
        d.out,
        "setup (CSR stores): CP 0 = VNI 10 TC 1; EQ 1 on each node; TX CQ 0 on nid0; TGT CQ 0 on nid1;"
    )?;
    writeln!(
        d.out,
        "                    PtlTE 5 (matching) at PID 3 index 0, PtlTE 6 (non-matching) at index 1 on nid1"
    )?;
    let (mut eq0, mut txq) = {
        let n = &mut d.c.nodes[0];
        n.set_cp(0, 0, 10, 1)?;
        (
            n.alloc_eq(1, 4 * PAGE, EqOpts::default())?,
            n.alloc_txq(0, 256, 1, 0)?,
        )
    };
    let (mut eq1, mut tgq) = {
        let n = &mut d.c.nodes[1];
        let eq = n.alloc_eq(1, 4 * PAGE, EqOpts::default())?;
        let q = n.alloc_tgq(0, 256, 1)?;
        n.alloc_pte(5, 1, PtAllocOpts::IS_MATCHING, 10, 3, 0, 0, 0)?;
        n.alloc_pte(6, 1, PtAllocOpts::empty(), 10, 3, 1, 0, 1)?;
        (eq, q)
    };
    for pt in [5u16, 6] {
        let s = SetStateCmd {
            ptlte_state: PtlteState::Enabled,
            ptlte_index: pt,
            current_addr: 0,
            drop_count: 0,
        };
        d.cmd(
            1,
            &mut tgq,
            &format!("SETSTATE pt={pt} state=ENABLED"),
            &s.encode(),
        )?;
    }
    d.ring(1, &mut tgq)?;
    d.events(1, &mut eq1)?;

    writeln!(d.out, "\n-- expected message: receive posted first --")?;
    let rbuf = d.c.nodes[1].map(4096, true, true)?;
    let small = Md { len: 64, ..rbuf };
    let cmd = le(
        5,
        PtlList::Priority,
        77,
        &small,
        LeFlags::OP_PUT | LeFlags::USE_ONCE,
        Some(0x42),
    );
    d.cmd(
        1,
        &mut tgq,
        "APPEND pt=5 list=PRIORITY buffer_id=77 len=64 match_bits=0x42 USE_ONCE OP_PUT",
        &cmd,
    )?;
    d.ring(1, &mut tgq)?;
    d.events(1, &mut eq1)?;
    let (dfa5, ext5) = dfa(1, 3, 0);
    let cs = CState {
        flags: DmaFlags::default(),
        initiator: match_id(PidBits::DEFAULT, 7, 0),
        index_ext: ext5,
        user_ptr: 0xC0FFEE,
        eq: 1,
        ..CState::default()
    };
    d.cmd(
        0,
        &mut txq,
        &format!("C_STATE initiator={:#x} eq=1", cs.initiator),
        &cs.encode(),
    )?;
    let m = IdcMsg {
        dfa: dfa5,
        match_bits: 0x42,
        header_data: 0,
        user_ptr: 0xAB,
        payload: Payload::new(b"hello from nid0!")
            .map_err(|e| DemoError::Unexpected(e.to_string()))?,
    };
    let bytes = m
        .encode()
        .map_err(|e| DemoError::Unexpected(e.to_string()))?;
    d.cmd(
        0,
        &mut txq,
        &format!("IDC_MSG dfa={dfa5:#x} match_bits=0x42 len=16 \"hello from nid0!\""),
        &bytes,
    )?;
    d.ring(0, &mut txq)?;
    d.events(1, &mut eq1)?;
    d.events(0, &mut eq0)?;
    let got = d.c.nodes[1].read_host(rbuf.host, 16)?;
    writeln!(
        d.out,
        "  nid1 buffer 77 now holds {:?}",
        String::from_utf8_lossy(&got)
    )?;

    writeln!(
        d.out,
        "\n-- unexpected message: overflow buffer first, receive posted later --"
    )?;
    let ovf = d.c.nodes[1].map(8192, true, true)?;
    let cmd = le(
        5,
        PtlList::Overflow,
        900,
        &ovf,
        LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL,
        None,
    );
    d.cmd(
        1,
        &mut tgq,
        "APPEND pt=5 list=OVERFLOW buffer_id=900 len=8192 MANAGE_LOCAL (match any)",
        &cmd,
    )?;
    d.ring(1, &mut tgq)?;
    d.events(1, &mut eq1)?;
    let m = IdcMsg {
        match_bits: 0x43,
        payload: Payload::new(b"early bird").map_err(|e| DemoError::Unexpected(e.to_string()))?,
        ..m
    };
    let bytes = m
        .encode()
        .map_err(|e| DemoError::Unexpected(e.to_string()))?;
    d.cmd(
        0,
        &mut txq,
        "IDC_MSG match_bits=0x43 len=10 \"early bird\"",
        &bytes,
    )?;
    d.ring(0, &mut txq)?;
    d.events(1, &mut eq1)?;
    d.events(0, &mut eq0)?;
    let late = d.c.nodes[1].map(64, true, true)?;
    let cmd = le(
        5,
        PtlList::Priority,
        78,
        &late,
        LeFlags::OP_PUT | LeFlags::USE_ONCE,
        Some(0x43),
    );
    d.cmd(
        1,
        &mut tgq,
        "APPEND pt=5 list=PRIORITY buffer_id=78 match_bits=0x43 USE_ONCE",
        &cmd,
    )?;
    d.ring(1, &mut tgq)?;
    let evs = d.events(1, &mut eq1)?;
    if !evs
        .iter()
        .any(|e| e.event_type() == firmware_spec::cassini::event::EventType::PutOverflow)
    {
        return Err(DemoError::Unexpected("no PUT_OVERFLOW".into()));
    }

    writeln!(
        d.out,
        "\n-- RMA: 64 KiB DMA put and get through a non-matching PtlTE --"
    )?;
    let win = d.c.nodes[1].map(1 << 17, true, true)?;
    let cmd = le(
        6,
        PtlList::Priority,
        1,
        &win,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        None,
    );
    d.cmd(
        1,
        &mut tgq,
        "APPEND pt=6 list=PRIORITY buffer_id=1 len=128KiB OP_PUT OP_GET",
        &cmd,
    )?;
    d.ring(1, &mut tgq)?;
    d.events(1, &mut eq1)?;
    let src = d.c.nodes[0].map(1 << 16, true, true)?;
    let data: Vec<u8> = (0..1u32 << 16).map(|i| (i * 7) as u8).collect();
    d.c.nodes[0].write_host(src.host, &data)?;
    let (dfa6, ext6) = dfa(1, 3, 1);
    let put = FullDma {
        opcode: DmaOp::Put,
        index_ext: ext6,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        dfa: dfa6,
        local_addr: src.iova,
        request_len: 1 << 16,
        eq: 1,
        user_ptr: 0x1,
        ..FullDma::default()
    };
    d.cmd(
        0,
        &mut txq,
        &format!(
            "DMA PUT dfa={dfa6:#x} local={:#x} len=65536 (32 packets of 2 KiB)",
            src.iova
        ),
        &put.encode(),
    )?;
    let dst = d.c.nodes[0].map(1 << 16, true, true)?;
    let get = FullDma {
        opcode: DmaOp::Get,
        local_addr: dst.iova,
        user_ptr: 0x2,
        ..put
    };
    d.cmd(
        0,
        &mut txq,
        &format!("DMA GET dfa={dfa6:#x} local={:#x} len=65536", dst.iova),
        &get.encode(),
    )?;
    d.ring(0, &mut txq)?;
    d.events(1, &mut eq1)?;
    d.events(0, &mut eq0)?;
    let back = d.c.nodes[0].read_host(dst.host, 1 << 16)?;
    if back != data {
        return Err(DemoError::Unexpected("GET returned other bytes".into()));
    }
    writeln!(
        d.out,
        "  nid0 GET buffer matches the PUT source: 65536 bytes verified"
    )?;
    let f = d.c.engine.fabric_counters();
    writeln!(
        d.out,
        "\nfabric: {} packets, {} bytes injected",
        f.injected, f.bytes_injected
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn demo_prints_the_exchange() {
        let mut out = Vec::new();
        super::run(&mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        for needle in [
            "IDC_MSG",
            "PUT_OVERFLOW",
            "LINK",
            "ACK",
            "REPLY",
            "65536 bytes verified",
            "\"hello from nid0!\"",
        ] {
            assert!(s.contains(needle), "missing {needle} in\n{s}");
        }
    }
}
