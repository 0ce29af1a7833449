//! The TX side of the BTE: the TX channels and their TXD ring, read and written through the
//! channel registers; a doorbell kicks the paced step (`xfer`).

use crate::config::GeminiConfig;
use crate::fault::Fault;
use crate::mdd::Access;
use crate::regs::{self, Target, patch, qword_of, u16_lane};
use crate::request::Dest;
use emu_core::hash::IntMap;
use emu_core::sparse::SparseTable;
use emu_core::time::{SimDuration, SimTime};
use firmware_spec::gemini::bte::{BteOp, TxChannel, TxDescriptor, TxdMode1, txvc_flag};
use firmware_spec::gemini::limits::{BTE_CHANNELS, BTE_TX_SLOTS};

use super::port::BtePort;

/// Largest BTE SEND (one RX buffer, one frame). Our choice.
pub const SEND_MAX_BYTES: u64 = 64 * 1024;
pub(super) const CHANNELS: usize = BTE_CHANNELS as usize;

/// Where the local side of a transfer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Local {
    Mdd(Access, u64),
    Phys(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum XPhase {
    Data,
    Remote,
}

/// One TXD being executed.
#[derive(Clone, Debug)]
pub(super) struct Xfer {
    pub(super) ch: usize,
    pub(super) pos: u64,
    pub(super) txd: TxDescriptor,
    pub(super) op: BteOp,
    pub(super) local: Local,
    pub(super) dest: Dest,
    pub(super) issued: u64,
    pub(super) total: u64,
    pub(super) processed: bool,
    pub(super) outstanding: u32,
    pub(super) error: Option<Fault>,
    pub(super) phase: XPhase,
    pub(super) last_progress: SimTime,
    /// Some of its frames went as a train: their payload is read from the source when the
    /// train lands, so the local event waits for their answers.
    pub(super) trained: bool,
    /// The local event is owed until every request is answered (`trained`).
    pub(super) local_owed: bool,
}

#[derive(Clone, Debug, Default)]
pub(super) struct TxChan {
    pub(super) regs: TxChannel,
    pub(super) err_rc: u32,
    pub(super) completed: u64,
    pub(super) active: Option<u32>,
    pub(super) inflight: u32,
}

/// The TX side of the BTE of one NIC: TX channels and their TXD ring, the transfers being
/// executed, and the pacing state.
#[derive(Clone, Debug)]
pub(crate) struct Bte {
    pub(super) tx: [TxChan; CHANNELS],
    /// TX descriptor slots, stored sparsely.
    pub(super) txd: SparseTable<[u64; 8]>,
    pub(super) tx_base: u64,
    pub(super) tx_count: u64,
    pub(super) xfers: IntMap<u32, Xfer>,
    pub(super) next_xfer: u32,
    pub(super) step_armed: bool,
    pub(super) rr: usize,
    pub(super) credit: u64,
    pub(super) refill: SimTime,
    /// Most requests of one transfer in flight.
    pub(super) max_outstanding: u32,
    /// Largest data packet (`GeminiConfig::bte_packet_bytes`).
    pub(super) packet_bytes: u32,
    /// Bytes per step unpaced, pacing quantum otherwise (`bte_step_bytes`).
    pub(super) step_bytes: u64,
    /// Pacing bandwidth in bytes/s, 0 = unpaced (`bte_bandwidth`).
    pub(super) bandwidth: u64,
    /// Most bytes one step may issue (`bte_max_burst`).
    pub(super) max_burst: u64,
}

impl Bte {
    /// TX descriptor slots backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.txd.allocated_entries()
    }

    /// A BTE in its reset state, paced and flow-controlled as `cfg` says.
    pub(crate) fn new(cfg: &GeminiConfig) -> Self {
        Bte {
            tx: Default::default(),
            txd: SparseTable::new(BTE_TX_SLOTS as usize, [0; 8]),
            tx_base: 0,
            tx_count: 0,
            xfers: IntMap::default(),
            next_xfer: 0,
            step_armed: false,
            rr: 0,
            credit: 0,
            refill: SimTime::ZERO,
            max_outstanding: u32::try_from(
                cfg.bte_max_inflight / u64::from(cfg.bte_packet_bytes.max(1)),
            )
            .unwrap_or(u32::MAX)
            .max(1),
            packet_bytes: cfg.bte_packet_bytes,
            step_bytes: cfg.bte_step_bytes,
            bandwidth: cfg.bte_bandwidth,
            max_burst: cfg.bte_max_burst,
        }
    }

    pub(super) fn ring(&self, ch: usize) -> (u64, u64) {
        (u16_lane(self.tx_base, ch), u16_lane(self.tx_count, ch))
    }

    pub(super) fn txd_at(&self, slot: u64) -> Option<TxDescriptor> {
        let raw = self.txd.get(slot as usize).ok()?;
        let mut b = [0u8; 48];
        for (q, w) in raw.iter().take(6).enumerate() {
            b[q * 8..q * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        TxDescriptor::decode(&b).ok()
    }

    pub(super) fn enabled(&self, ch: usize) -> bool {
        self.tx[ch].regs.flags & txvc_flag::ENABLE != 0
    }

    /// Whether channel `ch` has a TXD it can start or issue now.
    pub(super) fn has_work(&self, ch: usize) -> bool {
        if !self.enabled(ch) {
            return false;
        }
        let c = &self.tx[ch];
        if let Some(a) = c.active {
            return self
                .xfers
                .get(&a)
                .is_none_or(|x| x.outstanding < self.max_outstanding);
        }
        let (base, count) = self.ring(ch);
        if count == 0 || c.regs.read_index == c.regs.write_index % count {
            return false;
        }
        let fence = self
            .txd_at(base + c.regs.read_index)
            .is_some_and(|t| t.mode1 & u64::from(TxdMode1::FENCE.bits()) != 0);
        !(fence && c.inflight > 0)
    }

    /// Load from a BTE TX register.
    pub(crate) fn reg_read(&self, t: Target) -> u64 {
        match t {
            Target::BteTx { slot, off } => self
                .txd
                .get(slot as usize)
                .ok()
                .and_then(|r| r.get((off / 8) as usize))
                .copied()
                .unwrap_or(0),
            Target::BteTxChannel { ch, off } => {
                let Some(c) = self.tx.get(usize::from(ch)) else {
                    return 0;
                };
                match off & !7 {
                    regs::BTE_CHANNEL_ERR_RC => u64::from(c.err_rc),
                    regs::BTE_CHANNEL_COMPLETED => c.completed,
                    o if o < 32 => c
                        .regs
                        .encode()
                        .map_or(0, |img| qword_of(&img, (o / 8) as usize)),
                    _ => 0,
                }
            }
            Target::TxRingBase => self.tx_base,
            Target::TxRingCount => self.tx_count,
            _ => 0,
        }
    }

    /// Store to a BTE TX register.
    pub(crate) fn reg_write(&mut self, p: &mut impl BtePort, t: Target, sub: u64, data: &[u8]) {
        let merged = |old: u64| regs::merge(old, sub, data);
        match t {
            Target::BteTx { slot, off } => {
                if let Some(w) = self
                    .txd
                    .get_mut(slot as usize)
                    .ok()
                    .and_then(|r| r.get_mut((off / 8) as usize))
                {
                    *w = merged(*w);
                }
            }
            Target::BteTxChannel { ch, off } => {
                self.tx_channel_write(p, usize::from(ch), off, sub, data)
            }
            Target::TxRingBase => self.tx_base = merged(self.tx_base),
            Target::TxRingCount => self.tx_count = merged(self.tx_count),
            _ => {}
        }
    }

    pub(super) fn tx_channel_write(
        &mut self,
        p: &mut impl BtePort,
        ch: usize,
        off: u64,
        sub: u64,
        data: &[u8],
    ) {
        let Some(c) = self.tx.get_mut(ch) else {
            return;
        };
        match off & !7 {
            regs::BTE_CHANNEL_ERR_RC => c.err_rc = 0,
            o if o < 32 => {
                let Ok(mut img) = c.regs.encode() else {
                    return;
                };
                let q = (o / 8) as usize;
                let v = regs::merge(qword_of(&img, q), sub, data);
                patch(&mut img, q, v);
                let Ok(mut n) = TxChannel::decode(&img) else {
                    return;
                };
                n.read_index = c.regs.read_index;
                if n.flags & txvc_flag::RESET != 0 {
                    // Forget queued TXDs; transfers already started run to completion.
                    n.read_index = 0;
                    n.write_index = 0;
                    n.flags &= !txvc_flag::RESET;
                    c.active = None;
                }
                c.regs = n;
                if q == 3 {
                    self.kick(p);
                }
            }
            _ => {}
        }
    }

    /// Make sure a BTE step is scheduled.
    pub(super) fn kick(&mut self, p: &mut impl BtePort) {
        if !self.step_armed && (0..CHANNELS).any(|c| self.has_work(c)) {
            self.step_armed = true;
            p.step_after(SimDuration::ZERO);
        }
    }

    /// Transfers with requests outstanding and no progress for `timeout`.
    pub(crate) fn expired(&self, now: SimTime, timeout: SimDuration) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .xfers
            .iter()
            .filter(|(_, x)| x.outstanding > 0 && now.since(x.last_progress) >= timeout)
            .map(|(&id, _)| id)
            .collect();
        v.sort_unstable();
        v
    }

    /// Whether any transfer is still running.
    pub(crate) fn busy(&self) -> bool {
        !self.xfers.is_empty()
    }
}
