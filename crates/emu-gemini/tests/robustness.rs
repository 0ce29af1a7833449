//! Bad input never panics the model: random MMIO accesses (biased to the real registers and
//! windows) and random frames, with everything the model sends looped back to it and every
//! timer fired, driven through the `DeviceModel` methods directly.

use emu_core::dma::DmaPort;
use emu_core::engine::{Action, DeviceIo, DeviceModel};
use emu_core::fabric::{Packet, PortId, TrafficClass};
use emu_core::memory::HostMemory;
use emu_core::rng::SimRng;
use emu_core::time::SimTime;
use emu_gemini::packet::{Header, Kind};
use emu_gemini::{Gemini, GeminiConfig};
use firmware_spec::gemini::{bte, map};
use proptest::prelude::*;
use std::collections::VecDeque;

/// (base, span) of the places worth poking.
const REGIONS: &[(u64, u64)] = &[
    (map::NODE_ID_OFFSET, 16),
    (map::NTT_BASE, 64),
    (map::MRT_BASE, 64),
    (map::MRT_PAGESIZE_OFFSET, 8),
    (map::MDD_BASE, 64),
    (map::VMDH_BASE, 64),
    (map::CQ_BASE, 96),
    (map::CQ_DESC_USER_BASE, 0x2020),
    (map::FMA_DESC_BASE, 0x2100),
    (map::FMA_DESC_USER_BASE, 0x2100),
    (map::FMA_PUTWC_BASE, 0x200),
    (map::FMA_GET_BASE, 0x200),
    (map::FMA_PUTUC_BASE, 0x200),
    (map::FMA_PUTWC_OS_BASE, 0x100),
    (map::BTE_TX_BASE, 0x200),
    (map::BTE_TX_CHANNEL_BASE, 0x100),
    (bte::TCHNL_BASE_OFFSET, 16),
    (map::BTE_RX_BASE, 64),
    (map::BTE_RX_CHANNEL_BASE, 0x100),
    (bte::RCHNL_BASE_OFFSET, 16),
    (emu_gemini::regs::COUNTERS_BASE, 0x100),
    (0, map::ADDRESS_SPACE_SIZE),
];

#[derive(Clone, Debug)]
enum Op {
    Write {
        region: usize,
        off: u64,
        width: u32,
        value: u64,
    },
    Read {
        region: usize,
        off: u64,
        width: u32,
    },
    Frame {
        kind: u8,
        flags: u8,
        status: u8,
        ptag: u8,
        tag: u32,
        seq: u32,
        mdh: u16,
        cmd: u16,
        len: u32,
        offset: u64,
        op1: u64,
        payload: usize,
    },
    Garbage(Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    let region = 0..REGIONS.len();
    let width = prop::sample::select(vec![1u32, 2, 4, 8, 8, 8]);
    prop_oneof![
        6 => (region.clone(), any::<u64>(), width.clone(), prop_oneof![any::<u64>(), 0u64..0x1_0000, Just(0xFF)])
            .prop_map(|(region, off, width, value)| Op::Write { region, off, width, value }),
        2 => (region, any::<u64>(), width).prop_map(|(region, off, width)| Op::Read { region, off, width }),
        2 => (1u8..=9, any::<u8>(), 0u8..16, 0u8..4, 0u32..64, 0u32..8, 0u16..8, 0u16..0x120,
              0u32..(2 << 20), prop_oneof![0u64..0x10000, any::<u64>()], any::<u64>(), 0usize..300)
            .prop_map(|(kind, flags, status, ptag, tag, seq, mdh, cmd, len, offset, op1, payload)| {
                Op::Frame { kind, flags, status, ptag, tag, seq, mdh, cmd, len, offset, op1, payload }
            }),
        1 => proptest::collection::vec(any::<u8>(), 0..80).prop_map(Op::Garbage),
    ]
}

fn frame_kind(k: u8) -> Kind {
    match k {
        1 => Kind::Put,
        2 => Kind::GetReq,
        3 => Kind::GetResp,
        4 => Kind::AmoReq,
        5 => Kind::AmoResp,
        6 => Kind::Ack,
        7 => Kind::CqWrite,
        8 => Kind::RemoteEvent,
        _ => Kind::Send,
    }
}

struct Rig {
    g: Gemini,
    dma: DmaPort,
    rng: SimRng,
    now: u64,
    queue: VecDeque<Action>,
}

impl Rig {
    fn io_run(&mut self, f: impl FnOnce(&mut Gemini, &mut DeviceIo<'_>)) {
        let mut actions = Vec::new();
        let mut io = DeviceIo::new(
            SimTime(self.now),
            Some(PortId(0)),
            &self.dma,
            &mut self.rng,
            &mut actions,
        );
        f(&mut self.g, &mut io);
        self.queue.extend(actions);
    }

    /// Loop sends back in and fire timers, a bounded number of steps.
    fn drain(&mut self) {
        for _ in 0..200 {
            let Some(a) = self.queue.pop_front() else {
                return;
            };
            match a {
                Action::Send(mut p) => {
                    p.src = PortId(1);
                    p.seal();
                    self.io_run(|g, io| g.packet(io, p));
                }
                Action::Timer { after, token } => {
                    self.now = self.now.saturating_add(after.as_ps()).saturating_add(1);
                    self.io_run(|g, io| g.timer(io, token));
                }
                Action::Interrupt { .. } => {}
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn random_input_never_panics(ops in proptest::collection::vec(op(), 1..250)) {
        let mem = HostMemory::new(1 << 20).unwrap();
        let mut rig = Rig {
            g: Gemini::new(GeminiConfig::new(0)).unwrap(),
            dma: DmaPort::passthrough(mem),
            rng: SimRng::new(1),
            now: 0,
            queue: VecDeque::new(),
        };
        for op in ops {
            match op {
                Op::Write { region, off, width, value } => {
                    let (base, span) = REGIONS[region];
                    let w = u64::from(width);
                    let at = base + (off % span) / w * w;
                    let bytes = value.to_le_bytes();
                    rig.io_run(|g, io| {
                        let _ = g.mmio_write(io, 0, at, &bytes[..width as usize]);
                    });
                }
                Op::Read { region, off, width } => {
                    let (base, span) = REGIONS[region];
                    let w = u64::from(width);
                    let at = base + (off % span) / w * w;
                    let mut b = [0u8; 8];
                    rig.io_run(|g, io| {
                        let _ = g.mmio_read(io, 0, at, &mut b[..width as usize]);
                    });
                }
                Op::Frame { kind, flags, status, ptag, tag, seq, mdh, cmd, len, offset, op1, payload } => {
                    let mut h = Header::new(frame_kind(kind));
                    h.flags = flags;
                    h.status = status;
                    h.ptag = ptag;
                    h.tag = tag;
                    h.seq = seq;
                    h.mdh = mdh;
                    h.cmd = cmd;
                    h.len = len;
                    h.offset = offset;
                    h.op1 = op1;
                    let p = Packet::new(PortId(1), PortId(0), TrafficClass(0), h.encode(&vec![0xA5; payload]));
                    rig.io_run(|g, io| g.packet(io, p));
                }
                Op::Garbage(data) => {
                    let p = Packet::new(PortId(1), PortId(0), TrafficClass(0), data);
                    rig.io_run(|g, io| g.packet(io, p));
                }
            }
            rig.drain();
        }
        // Still a working device.
        let mut b = [0u8; 8];
        rig.io_run(|g, io| {
            g.mmio_read(io, 0, map::NODE_ID_OFFSET, &mut b).unwrap();
        });
        prop_assert_eq!(u64::from_le_bytes(b), 0);
        prop_assert_eq!(rig.g.config_read(0), 0x0201_17DB);
    }
}
