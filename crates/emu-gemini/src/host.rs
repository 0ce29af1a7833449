//! A register-level client of one emulated NIC, for tests, the demo and benchmarks.
//!
//! It does exactly what docs/gemini-programming.md tells a driver (privileged part: NTT,
//! MDD, CQ descriptors, FMA allocation, BTE channels) and a user library (FMA windows and
//! doorbells, CQ polling) to do, through the NIC's BAR 0 [`Mmio`] handle and the node's host
//! memory. It is not the project's driver: it has no resource allocators, no ownership and no
//! uAPI; callers choose MDD, CQ, FMA and channel numbers themselves.

use crate::regs;
use emu_core::engine::{DeviceId, Engine, EngineKind, Progress};
use emu_core::memory::{AllocError, GuestAddress, HostMemory, MemoryError};
use emu_core::mmio::{Mmio, MmioError};
use firmware_spec::gemini::amo::AmoCmd;
use firmware_spec::gemini::bte::{
    CpuRxDescriptor, RXD_FLAG_BTE_COMPLETE, RxChannel, RxDescriptor, TxChannel, TxDescriptor,
    TxdMode1, TxdMode4, rxvc_flag, txvc_flag,
};
use firmware_spec::gemini::cq::CqDescriptor;
use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::fma::{
    self, ALLOC_SEQID_DOORBELL, FmaDescriptor, FmaMode2, FmaMode3, GetControlWord, PrivMask,
    SyncType, WindowKind, reg,
};
use firmware_spec::gemini::layout::FormatError;
use firmware_spec::gemini::mdd::{MddDescriptor, MddModes};
use firmware_spec::gemini::ntt::{NttEntry, slot_of};
use firmware_spec::gemini::{bte, map};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a host-side operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    /// An MMIO access failed.
    #[error(transparent)]
    Mmio(#[from] MmioError),
    /// Host memory could not be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// A host memory access failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A format could not be encoded.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// An argument the hardware cannot express.
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// Nothing happened within the wait timeout.
    #[error("timed out waiting for the NIC")]
    Timeout,
    /// The deterministic engine ran out of events before the condition held.
    #[error("the engine has no more events and the condition does not hold")]
    Stalled,
}

/// A registered memory region (one MDD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Memory domain handle (MDD index).
    pub mdh: u16,
    /// First byte of the region (DMA address).
    pub addr: u64,
    /// Bytes registered.
    pub len: u64,
}

impl Region {
    /// The domain offset of byte `byte` of the region (the MDD starts at the page of `addr`).
    pub const fn off(&self, byte: u64) -> u64 {
        (self.addr & 0xFFF) + byte
    }
}

/// The remote side of an FMA request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    /// Physical PE (or logical PE with an NTT-enabled descriptor).
    pub pe: u32,
    /// Remote memory domain handle.
    pub mdh: u16,
    /// Offset in the remote domain.
    pub offset: u64,
}

/// The local side of an FMA request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Local {
    /// Local memory domain handle.
    pub mdh: u16,
    /// Offset in the local domain.
    pub offset: u64,
}

/// Completion options of an FMA post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostOpts {
    /// Events of the sequence (`SYNC_COMPLETE` type).
    pub sync: SyncType,
    /// 56-bit event data.
    pub data: u64,
    /// Ask for in-order delivery (no adaptive routing).
    pub in_order: bool,
    /// Use the uncached PUT window (one request per store).
    pub uncached: bool,
    /// Mark the PUT as an SMSG message (PUT_MSG).
    pub msg: bool,
    /// With `WITH_FLAG`: (value, remote offset) of the sync flag.
    pub flag: Option<(u64, u64)>,
}

impl Default for PostOpts {
    fn default() -> Self {
        PostOpts {
            sync: SyncType::LOCAL_EVENT,
            data: 0,
            in_order: false,
            uncached: false,
            msg: false,
            flag: None,
        }
    }
}

/// An AMO command with its operands (`first_operand`, `second_operand`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amo {
    /// The command.
    pub cmd: AmoCmd,
    /// Operand 1 (CSWAP: compare value).
    pub op1: u64,
    /// Operand 2 (CSWAP: swap value; AX/FAX: XOR value).
    pub op2: u64,
}

impl Amo {
    /// `cmd` with operands.
    pub const fn new(cmd: AmoCmd, op1: u64, op2: u64) -> Amo {
        Amo { cmd, op1, op2 }
    }
}

/// An allocated FMA descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fma {
    /// Descriptor id (0..68).
    pub id: u8,
}

/// A completion queue and the consumer's read index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cq {
    /// CQ number (1..1024).
    pub index: u16,
    /// DMA address of the ring.
    pub ring: u64,
    /// Entries in the ring (`max_index + 1`).
    pub entries: u64,
    rd: u64,
}

/// A BTE TX channel and the producer's write index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BteChan {
    /// Channel (0..4).
    pub ch: u8,
    /// First TXD slot.
    pub base: u64,
    /// Ring positions.
    pub count: u64,
    write: u64,
}

/// A BTE RX channel and the driver's buffer-posting index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxChan {
    /// Channel (0..4).
    pub ch: u8,
    /// First RX descriptor.
    pub base: u64,
    /// Ring positions.
    pub count: u64,
    /// DMA address of the `CpuRxDescriptor` ring (32 bytes per position).
    pub ring: u64,
    write: u64,
    rd: u64,
}

/// One NIC as seen from its node: BAR 0, host memory and the engine for waiting.
#[derive(Clone)]
pub struct Nic {
    /// The device in the engine.
    pub dev: DeviceId,
    /// Physical PE (= fabric port).
    pub pe: u32,
    /// BAR 0.
    pub bar0: Arc<dyn Mmio>,
    /// The node's RAM (the NIC's DMA space; IOVA = host address).
    pub mem: HostMemory,
    progress: Arc<dyn Progress>,
    kind: EngineKind,
    /// Longest real time a wait may take.
    pub timeout: Duration,
}

impl std::fmt::Debug for Nic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nic")
            .field("dev", &self.dev)
            .field("pe", &self.pe)
            .finish_non_exhaustive()
    }
}

fn qwords<const N: usize>(b: &[u8; N]) -> impl Iterator<Item = (u64, u64)> + '_ {
    b.chunks_exact(8).enumerate().map(|(i, c)| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        (i as u64 * 8, u64::from_le_bytes(w))
    })
}

fn fma_user(id: u8, r: u64) -> u64 {
    map::FMA_DESC_USER_BASE + map::DESC_PAGE_SIZE * u64::from(id) + r
}

fn fma_priv(id: u8, r: u64) -> u64 {
    map::FMA_DESC_BASE + map::DESC_PAGE_SIZE * u64::from(id) + r
}

impl Nic {
    /// A client for device `dev` with BAR 0 `bar0`.
    pub fn new(
        engine: &Arc<dyn Engine>,
        dev: DeviceId,
        pe: u32,
        mem: HostMemory,
    ) -> Result<Self, HostError> {
        let bar0 = engine.mmio(dev, 0).map_err(MmioError::from)?;
        Ok(Nic {
            dev,
            pe,
            bar0,
            mem,
            progress: engine.progress_handle(),
            kind: engine.kind(),
            timeout: Duration::from_secs(30),
        })
    }

    /// Poll `f` until it yields a value, making progress on the engine between polls.
    pub fn wait<T>(
        &self,
        mut f: impl FnMut() -> Result<Option<T>, HostError>,
    ) -> Result<T, HostError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(v) = f()? {
                return Ok(v);
            }
            let did = self.progress.progress();
            if !did && self.kind == EngineKind::Deterministic {
                return Err(HostError::Stalled);
            }
            if Instant::now() > deadline {
                return Err(HostError::Timeout);
            }
        }
    }

    /// `NODE_ID`.
    pub fn node_id(&self) -> Result<u32, HostError> {
        Ok(self.bar0.read_u64(map::NODE_ID_OFFSET)? as u32)
    }

    /// Read model counter `c` (`regs::counter`).
    pub fn counter(&self, c: u32) -> Result<u64, HostError> {
        Ok(self.bar0.read_u64(regs::COUNTERS_BASE + 8 * u64::from(c))?)
    }

    /// Allocate `len` bytes of zeroed host memory; returns its DMA address.
    pub fn alloc(&self, len: u64) -> Result<u64, HostError> {
        let r = self.mem.alloc(len, 4096)?;
        self.mem.fill(r.start, r.len, 0)?;
        Ok(r.start.0)
    }

    /// Write bytes into host memory.
    pub fn write_mem(&self, addr: u64, data: &[u8]) -> Result<(), HostError> {
        Ok(self.mem.write(GuestAddress(addr), data)?)
    }

    /// Read bytes from host memory.
    pub fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<(), HostError> {
        Ok(self.mem.read(GuestAddress(addr), buf)?)
    }

    /// Read one byte of host memory (0 if out of range).
    pub fn read_mem_u8(&self, addr: u64) -> u8 {
        let mut b = [0u8; 1];
        self.mem
            .read(GuestAddress(addr), &mut b)
            .map_or(0, |_| b[0])
    }

    /// Read a u64 from host memory (atomic acquire load when 8-aligned).
    pub fn read_u64(&self, addr: u64) -> Result<u64, HostError> {
        if addr.is_multiple_of(8) {
            Ok(self.mem.load_u64_acquire(GuestAddress(addr))?)
        } else {
            Ok(self.mem.read_u64(GuestAddress(addr))?)
        }
    }

    // ---- privileged (driver) ----

    /// Map logical PE `logical` to physical PE `phys` in NTT bank 0.
    pub fn ntt_set(&self, logical: u64, phys: u32) -> Result<(), HostError> {
        let (index, odd) = slot_of(logical).ok_or(HostError::Invalid("logical PE"))?;
        let at = map::NTT_BASE + map::NTT_PITCH * index;
        let mut e = NttEntry::decode(&self.bar0.read_u64(at)?.to_le_bytes())?;
        if odd {
            e.nic_pe1 = u64::from(phys);
        } else {
            e.nic_pe0 = u64::from(phys);
        }
        self.bar0.write_u64(at, u64::from_le_bytes(e.encode()?))?;
        Ok(())
    }

    /// Program MDD `mdh` for `[addr, addr + len)` (qword 0, then qword 1 with VALID).
    pub fn register(
        &self,
        mdh: u16,
        ptag: u8,
        addr: u64,
        len: u64,
        writable: bool,
        cq: Option<u16>,
    ) -> Result<Region, HostError> {
        if len == 0 {
            return Err(HostError::Invalid("zero-length registration"));
        }
        let mut modes = MddModes::VALID;
        if writable {
            modes |= MddModes::WRITABLE;
        }
        let d = MddDescriptor {
            ptag: u64::from(ptag),
            mem_base: addr >> 12,
            mrt_enable: 0,
            modes: u64::from(modes.bits()),
            max_base: (addr + len - 1) >> 12,
            cqh: u64::from(cq.unwrap_or(0)),
        };
        let b = d.encode()?;
        let at = map::MDD_BASE + map::MDD_PITCH * u64::from(mdh);
        let mut it = qwords(&b);
        if let (Some((_, q0)), Some((_, q1))) = (it.next(), it.next()) {
            self.bar0.write_u64(at, q0)?;
            self.bar0.write_u64(at + 8, q1)?;
        }
        Ok(Region { mdh, addr, len })
    }

    /// Invalidate MDD `mdh`.
    pub fn deregister(&self, mdh: u16) -> Result<(), HostError> {
        let at = map::MDD_BASE + map::MDD_PITCH * u64::from(mdh) + 8;
        self.bar0.write_u64(at, 0)?;
        Ok(())
    }

    /// Create CQ `index` with a ring of `entries` (it holds `entries - 1` events).
    pub fn cq_create(&self, index: u16, entries: u64) -> Result<Cq, HostError> {
        if !(2..=firmware_spec::gemini::cq::MAX_ENTRIES).contains(&entries) {
            return Err(HostError::Invalid("CQ size"));
        }
        let ring = self.alloc(entries * 8)?;
        let d = CqDescriptor {
            max_index: entries - 1,
            enable: 1,
            base_addr: ring,
            ..Default::default()
        };
        let b = d.encode()?;
        let at = map::CQ_BASE + map::CQ_PITCH * u64::from(index);
        let q: Vec<(u64, u64)> = qwords(&b).collect();
        if let [(_, q0), (_, q1), (_, q2)] = q[..] {
            self.bar0.write_u64(at + 16, q2)?;
            self.bar0.write_u64(at, q0)?;
            self.bar0.write_u64(at + 8, q1)?;
        }
        Ok(Cq {
            index,
            ring,
            entries,
            rd: 0,
        })
    }

    /// Take the next event of `cq`, if any (zeroes the slot and stores the read index).
    pub fn cq_poll(&self, cq: &mut Cq) -> Result<Option<Cqe>, HostError> {
        let slot = cq.ring + 8 * cq.rd;
        let w = self.mem.load_u64_acquire(GuestAddress(slot))?;
        let e = Cqe::from_u64(w);
        if !e.is_ready() {
            return Ok(None);
        }
        self.mem.write_u64(GuestAddress(slot), 0)?;
        cq.rd = (cq.rd + 1) % cq.entries;
        let at = map::CQ_DESC_USER_BASE + map::DESC_PAGE_SIZE * u64::from(cq.index);
        self.bar0.write_u64(at + regs::CQ_USER_RD_INDEX, cq.rd)?;
        Ok(Some(e))
    }

    /// Wait for the next event of `cq`.
    pub fn cq_wait(&self, cq: &mut Cq) -> Result<Cqe, HostError> {
        self.wait(|| self.cq_poll(cq))
    }

    /// `(overrun flag, lost events)` of `cq` from its `STATUS` register.
    pub fn cq_status(&self, cq: &Cq) -> Result<(bool, u64), HostError> {
        let at = map::CQ_DESC_USER_BASE + map::DESC_PAGE_SIZE * u64::from(cq.index);
        let s = self.bar0.read_u64(at + regs::CQ_USER_STATUS)?;
        Ok((s & regs::CQ_STATUS_OVERRUN != 0, s >> 32))
    }

    /// Clear the overrun flag of `cq` (after recovery).
    pub fn cq_clear_overrun(&self, cq: &Cq) -> Result<(), HostError> {
        let at = map::CQ_DESC_USER_BASE + map::DESC_PAGE_SIZE * u64::from(cq.index);
        self.bar0
            .write_u64(at + regs::CQ_USER_STATUS, regs::CQ_STATUS_OVERRUN)?;
        Ok(())
    }

    /// Allocate FMA descriptor `id` to a job: ptag, local CQ, optional NTT group
    /// (`pe_base`, `num_pes`), FMA enable, default privilege mask.
    pub fn fma_alloc(
        &self,
        id: u8,
        ptag: u8,
        cq: u16,
        ntt: Option<(u64, u64)>,
    ) -> Result<Fma, HostError> {
        let mut d = FmaDescriptor {
            cq_hndl: u64::from(cq),
            src_ptag: u64::from(ptag),
            dest_ptag: u64::from(ptag),
            mode2: u64::from(FmaMode2::FMA_ENABLE.bits()),
            ..Default::default()
        };
        if let Some((base, n)) = ntt {
            d.pe_base = base;
            d.num_pes = n;
            d.mode3 = u64::from(FmaMode3::NTT_ENABLE.bits());
        }
        let b = d.encode()?;
        let q: Vec<(u64, u64)> = qwords(&b).collect();
        self.bar0.write_u64(fma_priv(id, reg::QW3), q[2].1)?;
        self.bar0.write_u64(fma_priv(id, reg::QW2), q[1].1)?;
        self.bar0.write_u64(
            fma_priv(id, reg::PRVMASK),
            u64::from(PrivMask::DEFAULT.bits()),
        )?;
        self.bar0.write_u64(fma_priv(id, reg::STATUS), 0)?;
        Ok(Fma { id })
    }

    // ---- user (FMA) ----

    /// Point the descriptor at `to` (user alias: QW2 then BASE_OFFSET).
    fn fma_target(
        &self,
        f: Fma,
        command: u64,
        to: Remote,
        src_mdh: u16,
        in_order: bool,
    ) -> Result<(), HostError> {
        let mut mode2 = FmaMode2::empty();
        if !in_order {
            mode2 |= FmaMode2::ADP_ENABLE | FmaMode2::RADP_ENABLE;
        }
        let d = FmaDescriptor {
            command,
            rem_mem_dh: u64::from(to.mdh),
            src_mem_dh: u64::from(src_mdh),
            pe_mask_mode: 0,
            mode2: u64::from(mode2.bits()),
            ..Default::default()
        };
        let b = d.encode()?;
        let q: Vec<(u64, u64)> = qwords(&b).collect();
        self.bar0.write_u64(fma_user(f.id, reg::QW2), q[1].1)?;
        let base = fma::compose_base_offset(0, u64::from(to.pe), to.offset);
        self.bar0
            .write_u64(fma_user(f.id, reg::BASE_OFFSET), base)?;
        Ok(())
    }

    fn fma_sync(&self, f: Fma, opts: &PostOpts) -> Result<(), HostError> {
        let mut sync = opts.sync;
        if let Some((value, offset)) = opts.flag {
            self.bar0.write_u64(fma_user(f.id, reg::SCRATCH0), value)?;
            self.bar0.write_u64(fma_user(f.id, reg::SCRATCH1), offset)?;
            sync |= SyncType::WITH_FLAG;
        }
        let v = fma::sync_complete_word(sync, opts.data);
        self.bar0.write_u64(fma_user(f.id, reg::SYNC_COMPLETE), v)?;
        Ok(())
    }

    /// FMA PUT of `data` to `to`, then `SYNC_COMPLETE`.
    pub fn fma_put(
        &self,
        f: Fma,
        to: Remote,
        data: &[u8],
        opts: PostOpts,
    ) -> Result<(), HostError> {
        let command = if opts.msg {
            crate::smsg::PUT_MSG_COMMAND
        } else {
            0
        };
        self.fma_target(f, command, to, 0, opts.in_order)?;
        self.bar0
            .write_u64(fma_user(f.id, reg::ALLOC_SYNCID), ALLOC_SEQID_DOORBELL)?;
        let kind = if opts.uncached {
            WindowKind::PutUc
        } else {
            WindowKind::PutWc
        };
        let win = fma::window_addr(kind, u64::from(f.id), 0).ok_or(HostError::Invalid("FMA id"))?;
        let mut off = 0usize;
        while off < data.len() {
            let rest = data.len() - off;
            let w = [8usize, 4, 2, 1]
                .into_iter()
                .find(|&w| w <= rest && off.is_multiple_of(w))
                .unwrap_or(1);
            self.bar0.write(win + off as u64, &data[off..off + w])?;
            off += w;
        }
        self.fma_sync(f, &opts)
    }

    /// FMA GET of `len` bytes from `from` into `into` (GCWs of up to 64 bytes).
    pub fn fma_get(
        &self,
        f: Fma,
        from: Remote,
        into: Local,
        len: u64,
        opts: PostOpts,
    ) -> Result<(), HostError> {
        self.fma_target(f, 0, from, into.mdh, opts.in_order)?;
        self.bar0
            .write_u64(fma_user(f.id, reg::ALLOC_SYNCID), ALLOC_SEQID_DOORBELL)?;
        let win = fma::window_addr(WindowKind::Get, u64::from(f.id), 0)
            .ok_or(HostError::Invalid("FMA id"))?;
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(fma::GCW_MAX_BYTES);
            // A GCW moves a multiple of 4 bytes; alignment of the offsets is the NIC's check.
            let count = GetControlWord::count_for(n).ok_or(HostError::Invalid(
                "GET length must be a multiple of 4 on Gemini",
            ))?;
            let gcw = GetControlWord {
                local_offset: into.offset + done,
                count,
                gb: 0,
                cmd: 0,
            };
            self.bar0.write_u64(win + done, gcw.to_u64()?)?;
            done += n;
        }
        self.fma_sync(f, &opts)
    }

    /// FMA AMO on the word at `at`; fetching commands land the old value at `result`.
    pub fn fma_amo(
        &self,
        f: Fma,
        at: Remote,
        amo: Amo,
        result: Option<Local>,
        opts: PostOpts,
    ) -> Result<(), HostError> {
        let Amo { cmd, op1, op2 } = amo;
        if cmd.is_fetching() {
            let into = result.ok_or(HostError::Invalid("fetching AMO needs a result buffer"))?;
            self.fma_target(f, 0, at, into.mdh, opts.in_order)?;
            self.bar0.write_u64(fma_user(f.id, reg::SCRATCH0), op1)?;
            self.bar0.write_u64(fma_user(f.id, reg::SCRATCH1), op2)?;
            let gcw = GetControlWord {
                local_offset: into.offset,
                count: 1,
                gb: 0,
                cmd: cmd.fma_command(),
            };
            let win = fma::window_addr(WindowKind::Get, u64::from(f.id), 0)
                .ok_or(HostError::Invalid("FMA id"))?;
            self.bar0.write_u64(win, gcw.to_u64()?)?;
        } else {
            self.fma_target(f, cmd.fma_command(), at, 0, opts.in_order)?;
            self.bar0.write_u64(fma_user(f.id, reg::SCRATCH0), op1)?;
            self.bar0.write_u64(fma_user(f.id, reg::SCRATCH1), op2)?;
            let win = fma::window_addr(WindowKind::PutUc, u64::from(f.id), 0)
                .ok_or(HostError::Invalid("FMA id"))?;
            // The store triggers the AMO; its value is not an operand.
            self.bar0.write_u64(win, 0)?;
        }
        self.fma_sync(f, &opts)
    }

    /// CQ write of `value` (low 48 bits delivered) into the CQ of the domain `to` names.
    pub fn fma_cq_write(
        &self,
        f: Fma,
        to: Remote,
        value: u64,
        opts: PostOpts,
    ) -> Result<(), HostError> {
        self.fma_target(f, 0, to, 0, opts.in_order)?;
        self.bar0.write_u64(fma_user(f.id, reg::CQ_WRITE), value)?;
        self.fma_sync(f, &opts)
    }

    /// The `gni_return_t` of the last locally rejected request (`ERR_RC`).
    pub fn fma_err_rc(&self, f: Fma) -> Result<u32, HostError> {
        Ok(self.bar0.read_u64(fma_user(f.id, regs::FMA_ERR_RC))? as u32)
    }

    /// The descriptor's status word (`wc | rc << 16 | ssid << 32 | flags << 48`).
    pub fn fma_status(&self, f: Fma) -> Result<u64, HostError> {
        Ok(self.bar0.read_u64(fma_user(f.id, reg::STATUS))?)
    }

    /// Clear the descriptor's error flags and `ERR_RC`.
    pub fn fma_clear_status(&self, f: Fma) -> Result<(), HostError> {
        self.bar0.write_u64(fma_user(f.id, reg::STATUS), 0)?;
        Ok(())
    }

    // ---- BTE (privileged: OS-mediated posting) ----

    /// Give channel `ch` the TXD slots `base .. base + count` and enable it.
    pub fn bte_enable(
        &self,
        ch: u8,
        base: u16,
        count: u16,
        cpu_ring: u64,
        irq: bool,
    ) -> Result<BteChan, HostError> {
        if count < 2
            || u64::from(base) + u64::from(count) > firmware_spec::gemini::limits::BTE_TX_SLOTS
        {
            return Err(HostError::Invalid("BTE ring"));
        }
        let lane = 16 * u64::from(ch);
        let b = self.bar0.read_u64(bte::TCHNL_BASE_OFFSET)?;
        let c = self.bar0.read_u64(bte::TCHNL_COUNT_OFFSET)?;
        self.bar0.write_u64(
            bte::TCHNL_BASE_OFFSET,
            (b & !(0xFFFF << lane)) | (u64::from(base) << lane),
        )?;
        self.bar0.write_u64(
            bte::TCHNL_COUNT_OFFSET,
            (c & !(0xFFFF << lane)) | (u64::from(count) << lane),
        )?;
        let mut flags = txvc_flag::ENABLE;
        if irq {
            flags |= txvc_flag::IRQ_ENABLE;
        }
        let chan = TxChannel {
            flags: txvc_flag::RESET,
            cpu_ring_addr: cpu_ring,
            ..Default::default()
        };
        let img = chan.encode()?;
        let at = map::BTE_TX_CHANNEL_BASE + 64 * u64::from(ch);
        let q: Vec<(u64, u64)> = qwords(&img).collect();
        self.bar0.write_u64(at + 8, q[1].1)?;
        self.bar0.write_u64(at, q[0].1)?;
        let chan = TxChannel { flags, ..chan };
        let q0 = qwords(&chan.encode()?).next().map_or(0, |(_, v)| v);
        self.bar0.write_u64(at, q0)?;
        Ok(BteChan {
            ch,
            base: u64::from(base),
            count: u64::from(count),
            write: 0,
        })
    }

    /// Write `txd` into the next slot of `chan` and ring the doorbell.
    pub fn bte_post(&self, chan: &mut BteChan, txd: &TxDescriptor) -> Result<(), HostError> {
        let slot = chan.base + chan.write;
        let at = map::BTE_TX_BASE + map::BTE_TX_PITCH * slot;
        for (o, v) in qwords(&txd.encode()?) {
            self.bar0.write_u64(at + o, v)?;
        }
        chan.write = (chan.write + 1) % chan.count;
        let ch_at = map::BTE_TX_CHANNEL_BASE + 64 * u64::from(chan.ch);
        self.bar0.write_u64(ch_at + 0x18, chan.write)?;
        Ok(())
    }

    /// TXDs completed on channel `ch`.
    pub fn bte_completed(&self, ch: u8) -> Result<u64, HostError> {
        let at = map::BTE_TX_CHANNEL_BASE + 64 * u64::from(ch) + regs::BTE_CHANNEL_COMPLETED;
        Ok(self.bar0.read_u64(at)?)
    }

    /// The `gni_return_t` of the last TXD channel `ch` rejected.
    pub fn bte_err_rc(&self, ch: u8) -> Result<u32, HostError> {
        let at = map::BTE_TX_CHANNEL_BASE + 64 * u64::from(ch) + regs::BTE_CHANNEL_ERR_RC;
        Ok(self.bar0.read_u64(at)? as u32)
    }
}

impl Nic {
    /// Enable RX channel `ch` on descriptors `base .. base + count`, buffers of `buf_size`.
    pub fn rx_enable(
        &self,
        ch: u8,
        base: u16,
        count: u16,
        buf_size: u32,
    ) -> Result<RxChan, HostError> {
        if count < 2
            || u64::from(base) + u64::from(count)
                > firmware_spec::gemini::limits::BTE_RX_DESCRIPTORS
        {
            return Err(HostError::Invalid("RX ring"));
        }
        let ring = self.alloc(32 * u64::from(count))?;
        let lane = 16 * u64::from(ch);
        let b = self.bar0.read_u64(bte::RCHNL_BASE_OFFSET)?;
        let c = self.bar0.read_u64(bte::RCHNL_COUNT_OFFSET)?;
        self.bar0.write_u64(
            bte::RCHNL_BASE_OFFSET,
            (b & !(0xFFFF << lane)) | (u64::from(base) << lane),
        )?;
        self.bar0.write_u64(
            bte::RCHNL_COUNT_OFFSET,
            (c & !(0xFFFF << lane)) | (u64::from(count) << lane),
        )?;
        let chan = RxChannel {
            buf_size: u64::from(buf_size),
            flags: rxvc_flag::ENABLE | rxvc_flag::RESET,
            cpu_ring_addr: ring,
            ..Default::default()
        };
        let at = map::BTE_RX_CHANNEL_BASE + 64 * u64::from(ch);
        let q: Vec<(u64, u64)> = qwords(&chan.encode()?).collect();
        self.bar0.write_u64(at + 8, q[1].1)?;
        self.bar0.write_u64(at, q[0].1)?;
        Ok(RxChan {
            ch,
            base: u64::from(base),
            count: u64::from(count),
            ring,
            write: 0,
            rd: 0,
        })
    }

    /// Post the receive buffer at DMA address `buf`.
    pub fn rx_post(&self, rx: &mut RxChan, buf: u64) -> Result<(), HostError> {
        let d = RxDescriptor {
            base_addr: buf,
            mode1: 0,
        };
        let at = map::BTE_RX_BASE + map::BTE_RX_PITCH * (rx.base + rx.write);
        self.bar0.write_u64(at, u64::from_le_bytes(d.encode()?))?;
        rx.write = (rx.write + 1) % rx.count;
        let ch_at = map::BTE_RX_CHANNEL_BASE + 64 * u64::from(rx.ch);
        self.bar0.write_u64(ch_at + 0x18, rx.write)?;
        Ok(())
    }

    /// The next completed receive, if any (clears its `CpuRxDescriptor`).
    pub fn rx_poll(&self, rx: &mut RxChan) -> Result<Option<CpuRxDescriptor>, HostError> {
        let at = rx.ring + 32 * rx.rd;
        let mut b = [0u8; 32];
        self.read_mem(at, &mut b)?;
        let d = CpuRxDescriptor::decode(&b)?;
        if d.flags & RXD_FLAG_BTE_COMPLETE == 0 {
            return Ok(None);
        }
        self.write_mem(at, &[0u8; 32])?;
        rx.rd = (rx.rd + 1) % rx.count;
        Ok(Some(d))
    }
}

/// A user RDMA TXD (NAT on): `op` = PUT (local → remote) or GET (remote → local), `len`
/// bytes, events to `cq` per `events` (`CQ_LOCAL` / `CQ_GLOBAL`), with `data` as the local
/// event data and `user_data` as the global/remote event data.
#[allow(clippy::too_many_arguments)]
pub fn rdma_txd(
    op: TxdMode1,
    ptag: u8,
    local: Local,
    remote: Remote,
    len: u64,
    cq: u16,
    events: TxdMode1,
    data: u64,
    user_data: u64,
) -> TxDescriptor {
    TxDescriptor {
        dest_pe: u64::from(remote.pe),
        mode1: u64::from((op | events).bits()),
        dest_mem_off: remote.offset,
        dest_mem_dh: u64::from(remote.mdh),
        src_cq_hndl: u64::from(cq),
        dest_ptag: u64::from(ptag),
        src_ptag: u64::from(ptag),
        data_len: len,
        src_mem_off: local.offset,
        src_mem_dh: u64::from(local.mdh),
        mode4: u64::from(TxdMode4::NAT_ENABLE.bits()),
        src_cq_data: data & firmware_spec::bits::mask(56),
        user_data,
        ..Default::default()
    }
}
