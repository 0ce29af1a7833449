//! The command ring writer (the inline ring code of `cxi_prov_hw.h`): commands stored into
//! the mapped ring in 32 B half-slots, naturally aligned and padded with NOOPs (CT NOOPs on
//! trigger queues), the write pointer wrapping back to slot 4 with one 64 B slot kept free,
//! and free space cached until it runs low (cassini.md §1.4).

use driver::mem::{MemError, MemWindow, UserMemory};
use firmware_spec::cassini::cmd::{CmdSize, Command, CtCmd};
use firmware_spec::cassini::status::{
    C_CQ_FIRST_WR_PTR_32, CQ_RD_PTR_REFRESH_SLOTS32, CqStatus, pad_slots32,
};

use super::error::{CxiError, Result};

/// Memory a command ring lives in: the mapped ring of a CQ ([`MemWindow`]), or any plain
/// buffer (for tests of the ring rules).
pub trait RingMemory {
    /// Store `data` at byte `offset`.
    fn store(&self, offset: u64, data: &[u8]) -> std::result::Result<(), MemError>;
    /// Load the 8 bytes at `offset` (8-aligned) with acquire ordering.
    fn load_u64(&self, offset: u64) -> std::result::Result<u64, MemError>;
}

impl RingMemory for MemWindow {
    fn store(&self, offset: u64, data: &[u8]) -> std::result::Result<(), MemError> {
        self.write(offset, data)
    }
    fn load_u64(&self, offset: u64) -> std::result::Result<u64, MemError> {
        self.load_u64_acquire(offset)
    }
}

impl RingMemory for UserMemory {
    fn store(&self, offset: u64, data: &[u8]) -> std::result::Result<(), MemError> {
        self.write(offset, data)
    }
    fn load_u64(&self, offset: u64) -> std::result::Result<u64, MemError> {
        self.load_u64_acquire(offset)
    }
}

/// Zeros: 32 B NOOPs of any count (a 32 B IDC NOOP is a zero first byte).
const ZEROS: [u8; 256] = [0u8; 256];

/// Bytes of the commands written since the last doorbell, kept for low-latency launch.
const PENDING_MAX: usize = 128;

/// The ring writer: write pointer, cached free space and read pointer, padding and wrap
/// rules, over any [`RingMemory`]. [`CmdQueue`](super::CmdQueue) adds the doorbell and the emitters.
#[derive(Debug)]
pub struct RingWriter<M> {
    mem: M,
    /// Ring size in half-slots.
    size32: u64,
    /// Software write pointer (half-slots).
    wp32: u64,
    /// Write pointer given to the device by the last doorbell.
    hw_wp32: u64,
    /// Cached hardware read pointer (half-slots).
    rp32: u64,
    /// Cached free half-slots.
    free32: u64,
    /// Trigger queue: only 64/128 B commands, padding with 64 B CT NOOPs.
    trig: bool,
    ct_noop: [u8; 64],
    pending: [u8; PENDING_MAX],
    pending_len: usize,
    pending_overflow: bool,
}

impl<M: RingMemory> RingWriter<M> {
    /// A writer over a ring of `count` 64 B slots in `mem` (a multiple of 4, at least 8),
    /// whose device pointers are both at slot 4 (a freshly enabled queue).
    pub fn new(mem: M, count: u32, trig: bool) -> Result<Self> {
        if count < 8 || !count.is_multiple_of(4) {
            return Err(CxiError::Invalid(
                "ring needs a multiple of 4 slots, at least 8",
            ));
        }
        let size32 = 2 * u64::from(count);
        let mut ct_noop = [0u8; 64];
        Command::Ct(CtCmd::noop()).encode_into(&mut ct_noop)?;
        let mut w = RingWriter {
            mem,
            size32,
            wp32: C_CQ_FIRST_WR_PTR_32,
            hw_wp32: C_CQ_FIRST_WR_PTR_32,
            rp32: C_CQ_FIRST_WR_PTR_32,
            free32: 0,
            trig,
            ct_noop,
            pending: [0u8; PENDING_MAX],
            pending_len: 0,
            pending_overflow: false,
        };
        w.free32 = w.compute_free();
        Ok(w)
    }

    /// The memory the ring lives in.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Software write pointer in half-slots.
    pub fn wp32(&self) -> u64 {
        self.wp32
    }

    /// Write pointer of the last doorbell, in half-slots.
    pub fn hw_wp32(&self) -> u64 {
        self.hw_wp32
    }

    /// Cached read pointer in half-slots.
    pub fn rp32(&self) -> u64 {
        self.rp32
    }

    /// Cached free space in half-slots.
    pub fn free32(&self) -> u64 {
        self.free32
    }

    /// Ring size in half-slots.
    pub fn size32(&self) -> u64 {
        self.size32
    }

    fn len32(&self) -> u64 {
        self.size32 - C_CQ_FIRST_WR_PTR_32
    }

    fn compute_free(&self) -> u64 {
        let len = self.len32();
        let used = (self.wp32 + len - self.rp32) % len;
        // One 64 B slot stays free: `wr_ptr == rd_ptr` means empty.
        len.saturating_sub(2).saturating_sub(used)
    }

    /// Re-read the read pointer the device wrote back (`c_cq_status.rd_ptr`).
    pub fn refresh(&mut self) -> Result<()> {
        let st = self.mem.load_u64(0)?;
        let rp32 = (st & 0xFFFF) * 2;
        if (C_CQ_FIRST_WR_PTR_32..self.size32).contains(&rp32) {
            self.rp32 = rp32;
        }
        self.free32 = self.compute_free();
        Ok(())
    }

    /// The status block the device writes back at the head of the ring.
    pub fn status(&self) -> Result<CqStatus> {
        let st = self.mem.load_u64(0)?;
        Ok(CqStatus::decode(&st.to_le_bytes())?)
    }

    fn advance(&mut self, n32: u64) {
        self.wp32 += n32;
        if self.wp32 >= self.size32 {
            self.wp32 = C_CQ_FIRST_WR_PTR_32;
        }
        self.free32 -= n32;
    }

    fn note_pending(&mut self, bytes: &[u8]) {
        let end = self.pending_len + bytes.len();
        match self.pending.get_mut(self.pending_len..end) {
            Some(dst) if !self.pending_overflow => {
                dst.copy_from_slice(bytes);
                self.pending_len = end;
            }
            _ => self.pending_overflow = true,
        }
    }

    /// Write `bytes` (exactly 32, 64, 128 or 256 of them: one command, its first byte the
    /// `c_cmd` header) at the next naturally aligned position, padding before it.
    /// `Err(Again)` if the ring has no room even after re-reading the read pointer.
    pub fn emit_raw(&mut self, bytes: &[u8]) -> Result<()> {
        let size = match bytes.len() {
            32 => CmdSize::B32,
            64 => CmdSize::B64,
            128 => CmdSize::B128,
            256 => CmdSize::B256,
            _ => return Err(CxiError::Invalid("a command is 32, 64, 128 or 256 bytes")),
        };
        if self.trig && size == CmdSize::B32 {
            return Err(CxiError::Invalid(
                "trigger queues take only 64 and 128 B commands",
            ));
        }
        let n32 = size.slots32() as u64;
        let pad32 = pad_slots32(self.wp32, size);
        let need = pad32 + n32;
        if self.free32 < need.max(CQ_RD_PTR_REFRESH_SLOTS32) {
            self.refresh()?;
            if self.free32 < need {
                return Err(CxiError::Again);
            }
        }
        if pad32 > 0 {
            self.pad(pad32)?;
        }
        self.mem.store(self.wp32 * 32, bytes)?;
        self.note_pending(bytes);
        self.advance(n32);
        Ok(())
    }

    /// Fill `pad32` half-slots from the write pointer with NOOPs (the caller checked the
    /// space; padding never crosses the end of the ring, since the ring size is a multiple
    /// of every command size).
    fn pad(&mut self, pad32: u64) -> Result<()> {
        let off = self.wp32 * 32;
        if self.trig {
            // Trigger queues hold only 64/128 B commands: the pointer is slot aligned and a
            // 128 B command needs at most one 64 B CT NOOP before it.
            for i in 0..pad32 / 2 {
                self.mem.store(off + i * 64, &self.ct_noop)?;
                let noop = self.ct_noop;
                self.note_pending(&noop);
            }
        } else {
            let bytes = ZEROS
                .get(..(pad32 * 32) as usize)
                .ok_or(CxiError::Invalid("padding longer than a command"))?;
            self.mem.store(off, bytes)?;
            self.note_pending(bytes);
        }
        self.advance(pad32);
        Ok(())
    }

    /// Pad a half-used 64 B slot with a 32 B NOOP, as a doorbell needs (the device reads
    /// whole slots).
    pub fn align_for_doorbell(&mut self) -> Result<()> {
        if self.wp32 % 2 == 1 {
            self.emit_raw(&ZEROS[..32])?;
        }
        Ok(())
    }

    /// The write pointer to store in the doorbell (64 B slots); call after
    /// [`RingWriter::align_for_doorbell`].
    pub fn doorbell_value(&self) -> u64 {
        self.wp32 / 2
    }

    /// Record that the device was given the current write pointer.
    pub fn rung(&mut self) {
        self.hw_wp32 = self.wp32;
        self.pending_len = 0;
        self.pending_overflow = false;
    }

    /// 64 B slots written since the last doorbell.
    pub fn pending_slots(&self) -> u64 {
        let len = self.len32();
        ((self.wp32 + len - self.hw_wp32) % len).div_ceil(2)
    }

    /// The commands written since the last doorbell if they are contiguous in the ring and
    /// at most 128 bytes (what a low-latency launch copies), else `None`.
    pub fn pending_bytes(&self) -> Option<&[u8]> {
        if self.pending_overflow || self.wp32 < self.hw_wp32 {
            return None;
        }
        self.pending.get(..self.pending_len)
    }

    /// Whether the device has read every command given to it (read pointer re-read).
    pub fn is_empty(&mut self) -> Result<bool> {
        self.refresh()?;
        Ok(self.rp32 == self.hw_wp32)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use firmware_spec::cassini::cmd::{CmdHeader, CmdType, CtOp, DmaOp};
    use proptest::prelude::*;

    use super::*;

    /// A plain memory window: a byte vector.
    struct Plain(RefCell<Vec<u8>>);

    impl Plain {
        fn new(count: u32) -> Self {
            Plain(RefCell::new(vec![0u8; count as usize * 64]))
        }
        fn byte(&self, at: u64) -> u8 {
            self.0.borrow()[at as usize]
        }
        fn bytes(&self, at: u64, n: usize) -> Vec<u8> {
            self.0.borrow()[at as usize..at as usize + n].to_vec()
        }
        /// The device writes back `rd_ptr` (64 B slots).
        fn set_rd_ptr(&self, slot: u64) {
            self.0.borrow_mut()[..8].copy_from_slice(&slot.to_le_bytes());
        }
    }

    impl RingMemory for Plain {
        fn store(&self, offset: u64, data: &[u8]) -> std::result::Result<(), MemError> {
            let mut v = self.0.borrow_mut();
            let end = offset as usize + data.len();
            match v.get_mut(offset as usize..end) {
                Some(d) => {
                    d.copy_from_slice(data);
                    Ok(())
                }
                None => Err(MemError::OutOfRange {
                    addr: offset,
                    len: data.len() as u64,
                }),
            }
        }
        fn load_u64(&self, offset: u64) -> std::result::Result<u64, MemError> {
            let b = self.bytes(offset, 8);
            Ok(u64::from_le_bytes(b.try_into().unwrap_or([0u8; 8])))
        }
    }

    /// A recognisable command of `size`: a DMA PUT header and `tag` at byte 8.
    fn cmd(size: CmdSize, tag: u64) -> Vec<u8> {
        let mut v = vec![0u8; size.bytes()];
        v[0] = CmdHeader::new(CmdType::Dma, size, DmaOp::Put as u8).to_byte();
        v[8..16].copy_from_slice(&tag.to_le_bytes());
        v
    }

    const SIZES: [CmdSize; 4] = [CmdSize::B32, CmdSize::B64, CmdSize::B128, CmdSize::B256];

    #[test]
    fn fresh_ring_starts_at_slot_4_with_one_slot_kept_free() {
        let w = RingWriter::new(Plain::new(64), 64, false).unwrap();
        assert_eq!(w.wp32(), 8);
        assert_eq!(w.rp32(), 8);
        // 60 usable slots, one kept free: 59 slots = 118 half-slots.
        assert_eq!(w.free32(), 118);
        assert!(RingWriter::new(Plain::new(6), 6, false).is_err());
    }

    #[test]
    fn commands_are_naturally_aligned_with_32b_noop_padding() {
        let mut w = RingWriter::new(Plain::new(64), 64, false).unwrap();
        w.emit_raw(&cmd(CmdSize::B32, 1)).unwrap(); // half-slot 8
        w.emit_raw(&cmd(CmdSize::B64, 2)).unwrap(); // pad 9, at 10
        assert_eq!(w.wp32(), 12);
        w.emit_raw(&cmd(CmdSize::B32, 3)).unwrap(); // at 12
        w.emit_raw(&cmd(CmdSize::B128, 4)).unwrap(); // pad 13..15, at 16
        assert_eq!(w.wp32(), 20);
        w.emit_raw(&cmd(CmdSize::B256, 5)).unwrap(); // pad 20..23, at 24
        assert_eq!(w.wp32(), 32);
        let m = w.memory();
        // The padding half-slots hold 32 B NOOPs: first 8 bytes zero.
        for half in [9u64, 13, 14, 15, 20, 21, 22, 23] {
            assert_eq!(m.bytes(half * 32, 8), vec![0u8; 8], "half-slot {half}");
        }
        for (half, tag) in [(8u64, 1u64), (10, 2), (12, 3), (16, 4), (24, 5)] {
            assert_ne!(m.byte(half * 32), 0);
            assert_eq!(m.bytes(half * 32 + 8, 8), tag.to_le_bytes().to_vec());
        }
        // 24 half-slots used in all (8..32), free space went down by as much.
        assert_eq!(w.free32(), 118 - 24);
    }

    #[test]
    fn odd_write_pointer_is_padded_before_the_doorbell() {
        let mut w = RingWriter::new(Plain::new(64), 64, false).unwrap();
        w.emit_raw(&cmd(CmdSize::B32, 7)).unwrap();
        assert_eq!(w.wp32(), 9);
        w.align_for_doorbell().unwrap();
        assert_eq!(w.wp32(), 10);
        assert_eq!(w.doorbell_value(), 5);
        assert_eq!(w.memory().bytes(9 * 32, 8), vec![0u8; 8]);
        assert_eq!(w.pending_slots(), 1);
        assert_eq!(w.pending_bytes().map(<[u8]>::len), Some(64));
        w.rung();
        assert_eq!(w.pending_slots(), 0);
        // Already even: nothing added.
        w.align_for_doorbell().unwrap();
        assert_eq!(w.wp32(), 10);
    }

    #[test]
    fn padding_that_reaches_the_end_wraps_to_slot_4() {
        let count = 64u32;
        let mut w = RingWriter::new(Plain::new(count), count, false).unwrap();
        // Fill slots 4..61 with 64 B commands (58), the device consuming as we go.
        for t in 0..58 {
            w.emit_raw(&cmd(CmdSize::B64, t)).unwrap();
        }
        assert_eq!(w.wp32(), 124);
        w.rung();
        w.memory().set_rd_ptr(62);
        w.refresh().unwrap();
        // A 32 B command at half-slot 124, then a 256 B one: padding 125..127 reaches the
        // end of the ring, the pointer wraps to slot 4 and the command lands there.
        w.emit_raw(&cmd(CmdSize::B32, 100)).unwrap();
        w.emit_raw(&cmd(CmdSize::B256, 101)).unwrap();
        assert_eq!(w.wp32(), 16);
        let m = w.memory();
        for half in 125..128u64 {
            assert_eq!(m.bytes(half * 32, 8), vec![0u8; 8]);
        }
        assert_eq!(m.bytes(256 + 8, 8), 101u64.to_le_bytes().to_vec());
        // The slot before the read pointer stays free: 62 - 4 slots wrapped... used =
        // 124..128 (2 slots) + 8..16 (4 slots).
        assert_eq!(w.free32(), 118 - 12);
    }

    #[test]
    fn a_full_ring_is_eagain_until_the_device_reads() {
        let count = 64u32;
        let mut w = RingWriter::new(Plain::new(count), count, false).unwrap();
        let mut n = 0;
        loop {
            match w.emit_raw(&cmd(CmdSize::B64, n)) {
                Ok(()) => n += 1,
                Err(CxiError::Again) => break,
                Err(e) => panic!("{e}"),
            }
        }
        // 60 usable slots, one kept free.
        assert_eq!(n, 59);
        assert_eq!(w.wp32(), 2 * 63);
        w.rung();
        // The device has read 10 commands: ten slots free again.
        w.memory().set_rd_ptr(14);
        for t in 0..10 {
            w.emit_raw(&cmd(CmdSize::B64, 1000 + t)).unwrap();
        }
        assert!(matches!(
            w.emit_raw(&cmd(CmdSize::B64, 0)),
            Err(CxiError::Again)
        ));
        // The tenth landed just before the read pointer's slot minus one.
        assert_eq!(w.wp32(), 2 * 13);
    }

    #[test]
    fn the_read_pointer_is_reread_only_when_free_space_runs_low() {
        let mut w = RingWriter::new(Plain::new(64), 64, false).unwrap();
        w.emit_raw(&cmd(CmdSize::B64, 1)).unwrap();
        w.rung();
        // The device consumed it, but the writer has plenty of cached space: no re-read.
        w.memory().set_rd_ptr(5);
        w.emit_raw(&cmd(CmdSize::B64, 2)).unwrap();
        assert_eq!(w.rp32(), 8);
        // Use the space up to below 16 half-slots: now it looks.
        for t in 0..50 {
            w.emit_raw(&cmd(CmdSize::B64, 10 + t)).unwrap();
        }
        // 52 slots written; the cache said 16 free before the last one: still not looked.
        assert_eq!(w.free32(), 14);
        assert_eq!(w.rp32(), 8);
        // Below 16: the next command re-reads the read pointer (one slot came back).
        w.emit_raw(&cmd(CmdSize::B64, 99)).unwrap();
        assert_eq!(w.rp32(), 10);
        assert_eq!(w.free32(), 14);
    }

    #[test]
    fn trigger_queues_pad_with_ct_noops_and_refuse_32b_commands() {
        let mut w = RingWriter::new(Plain::new(64), 64, true).unwrap();
        assert!(matches!(
            w.emit_raw(&cmd(CmdSize::B32, 1)),
            Err(CxiError::Invalid(_))
        ));
        w.emit_raw(&cmd(CmdSize::B64, 1)).unwrap(); // slot 4
        w.emit_raw(&cmd(CmdSize::B128, 2)).unwrap(); // CT NOOP in slot 5, at slot 6
        assert_eq!(w.wp32(), 16);
        let noop = w.memory().bytes(5 * 64, 64);
        let h = CmdHeader::from_byte(noop[0]);
        assert_eq!(
            (h.cmd_type, h.cmd_size, h.opcode),
            (CmdType::Ct, CmdSize::B64, CtOp::CtNoop as u8)
        );
        assert_eq!(Command::decode(&noop).unwrap(), Command::Ct(CtCmd::noop()));
        assert_eq!(w.memory().bytes(6 * 64 + 8, 8), 2u64.to_le_bytes().to_vec());
    }

    #[test]
    fn pending_bytes_cover_only_short_contiguous_launches() {
        let mut w = RingWriter::new(Plain::new(64), 64, false).unwrap();
        let c = cmd(CmdSize::B64, 9);
        w.emit_raw(&c).unwrap();
        assert_eq!(w.pending_bytes(), Some(&c[..]));
        w.emit_raw(&cmd(CmdSize::B128, 10)).unwrap();
        // 64 B, a 64 B NOOP, 128 B: too long for a low-latency window.
        assert_eq!(w.pending_slots(), 4);
        assert_eq!(w.pending_bytes(), None);
        w.rung();
        assert_eq!(w.pending_bytes(), Some(&[][..]));
    }

    /// What the device does: walk the ring from its read pointer to the doorbell's write
    /// pointer, skipping 32 B NOOPs, checking natural alignment; the tags seen.
    fn device_walk(m: &Plain, rd32: &mut u64, wr32: u64, size32: u64, out: &mut Vec<u64>) {
        while *rd32 != wr32 {
            let at = *rd32 * 32;
            let h = CmdHeader::from_byte(m.byte(at));
            let n = h.cmd_size.slots32() as u64;
            assert_eq!(*rd32 % n, 0, "misaligned command at half-slot {rd32}");
            if m.byte(at) != 0 {
                let b = m.bytes(at + 8, 8);
                out.push(u64::from_le_bytes(b.try_into().unwrap()));
            }
            *rd32 += n;
            if *rd32 >= size32 {
                *rd32 = C_CQ_FIRST_WR_PTR_32;
            }
        }
        m.set_rd_ptr(*rd32 / 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random command sizes, doorbells and device reads: the device sees exactly the
        /// commands emitted, in order, each naturally aligned, and the writer never
        /// overwrites a command the device has not read (EAGAIN instead).
        #[test]
        fn the_device_sees_every_command_in_order(
            ops in proptest::collection::vec((0usize..4, any::<bool>(), any::<bool>()), 1..400),
            count_log in 3u32..7,
        ) {
            let count = 1u32 << count_log;
            let mut w = RingWriter::new(Plain::new(count), count, false).unwrap();
            let size32 = w.size32();
            let mut rd32 = C_CQ_FIRST_WR_PTR_32;
            let mut sent = Vec::new();
            let mut seen = Vec::new();
            let mut tag = 1u64;
            for (s, doorbell, read) in ops {
                match w.emit_raw(&cmd(SIZES[s], tag)) {
                    Ok(()) => {
                        sent.push(tag);
                        tag += 1;
                    }
                    Err(CxiError::Again) => {}
                    Err(e) => panic!("{e}"),
                }
                if doorbell {
                    w.align_for_doorbell().or_else(|e| match e {
                        CxiError::Again => Ok(()),
                        e => Err(e),
                    }).unwrap();
                    if w.wp32().is_multiple_of(2) {
                        w.rung();
                    }
                }
                if read {
                    device_walk(w.memory(), &mut rd32, w.hw_wp32(), size32, &mut seen);
                }
            }
            // Drain everything.
            loop {
                match w.align_for_doorbell() {
                    Ok(()) => break,
                    Err(CxiError::Again) => {
                        device_walk(w.memory(), &mut rd32, w.hw_wp32(), size32, &mut seen);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            w.rung();
            device_walk(w.memory(), &mut rd32, w.hw_wp32(), size32, &mut seen);
            prop_assert_eq!(seen, sent);
            prop_assert!(w.is_empty().unwrap());
        }
    }
}
