//! Counting events (CTs) and triggered operations: the CT unit of Cassini's TOU (trigger
//! operation unit), as a pure state machine of the whole block.
//!
//! # Model
//!
//! [`CtBlock`] holds the 2048 CTs (`C_NUM_CTS`; index 0 is `C_CT_NONE` and never usable), each
//! with a 48-bit success count and a 7-bit failure count (`C_CT_SUCCESS_BITS`,
//! `C_CT_FAILURE_BITS`, both wrapping at that width), an enable bit (`c_cq_cfg_ct_enable`),
//! a write-back address (`c_cq_cfg_ct_wb_mem_addr`, given by the caller's CSR layer) and a
//! pending-write-back indicator; the 2048 triggered-list entries (TLEs, `C_NUM_TLES`) with
//! their four pools (see [`tle`]); and one ack counter per CQ (`c_cq_txq_ack_ctr` /
//! `c_cq_tgq_ack_ctr.mem_q_ack_ctr`: triggered operations appended from that CQ and still
//! pending). It never touches memory and never posts events: every entry point returns
//! [`Effects`], the ordered [`CtAction`]s for the caller (write-backs to DMA, embedded DMA
//! commands to launch, TRIGGERED_OP events to post), or a [`CtError`].
//!
//! Inputs (cassini.md §5; `cxi_prov_hw.h`; `cass_ct.c` of the cxi driver):
//! * **Doorbells** ([`CtBlock::doorbell`]): 64-bit stores to the CT's TOU page: +0 adds the
//!   value (48 bits) to success, +64 adds it (7 bits) to failure, +128 resets success, +192
//!   resets failure.
//! * **CT commands** from a trigger CQ ([`CtBlock::command`]): CT_NOOP; CT_SET (success and/or
//!   failure per `set_ct_success` / `set_ct_failure`); CT_GET (write back now); CT_INC (adds
//!   `ct_success` and `ct_failure`); CT_CANCEL (drops every pending triggered operation waiting
//!   on `ct`); CT_TRIG_DMA, CT_TRIG_SET, CT_TRIG_INC, CT_TRIG_EVENT (wait on `trig_ct` until
//!   `threshold`).
//! * **Counting events** from the event engine ([`CtBlock::event_increment`]): +1 success or
//!   failure per event, or +bytes with `event_ct_bytes`.
//! * **Driver operations**: [`CtBlock::init`] / [`CtBlock::cancel`] (`C_CQ_CFG_INIT_CT_HW_STATE`
//!   `init` / `cancel`), [`CtBlock::enable`] / [`CtBlock::disable`] (`c_cq_cfg_ct_enable`),
//!   [`CtBlock::set_writeback`] (`c_cq_cfg_ct_wb_mem_addr`, `cxil_ct_wb_update`), the TLE pool
//!   CSRs ([`CtBlock::set_tle_pool`], [`CtBlock::set_tle_shared`]) and their status.
//!
//! Triggered operations on firing: CT_TRIG_DMA yields [`FiredDma`] with the embedded command's
//! raw bytes (the caller launches it as a command of the trigger CQ; it carries its own
//! completion `ct`); CT_TRIG_SET / CT_TRIG_INC set / add `ct_success` and `ct_failure` on CT
//! `ct` exactly as CT_SET / CT_INC; CT_TRIG_EVENT writes back `trig_ct` and, when `eq` is not
//! 0, yields [`FiredEvent`] (`C_EVENT_TRIGGERED_OP` with threshold and `ct_handle`);
//! libfabric's `fi_cntr_wait` uses it with `eq = C_EQ_NONE` just to get the write-back.
//!
//! # Readings where the sources are silent or disagree
//!
//! * **What is compared with the threshold.** Cassini implements Portals 4 counting events in
//!   hardware, and the Portals 4 specification and reference implementation fire when
//!   `success + failure >= threshold` (anchors.md §1.4, `ptl_ct.c`): the default is
//!   [`ThresholdMode::SuccessPlusFailure`]. Our notes also record a reading of libfabric that
//!   would compare the success count alone (cassini.md §5: `fi_cntr_wait` spins on
//!   `success >= threshold` with a separate early exit when the failure count moves, which
//!   holds under either rule); [`ThresholdMode::Success`] gives that rule. Both compare the
//!   counts as they are (after 48/7-bit wrap) with the 48-bit threshold.
//! * **Order of firing.** When a CT's count changes, its pending operations fire in threshold
//!   order, equal thresholds in arrival order (the hardware keeps per-CT lists,
//!   `c_cq_dbg_trig_ops_queue_st` / `c_cq_dbg_trig_ops_list_ptrs`, and one threshold per CT in
//!   `c_cq_dbg_ct_fields`: we read that as a list sorted by threshold whose head is compared).
//!   After each firing the head is compared again with the *current* count, so a CT_TRIG_SET
//!   that lowers its own CT stops the rest.
//! * **Cascades.** A firing CT_TRIG_SET / CT_TRIG_INC changes another CT, which may fire in
//!   turn, with no outside action in between. The block runs this as a loop over a FIFO of
//!   changed CTs (breadth first, no recursion): the CT being processed finishes its ready
//!   operations before the CTs it changed are examined. Every firing consumes one pending
//!   operation (or the one being appended), so the loop is bounded by the number pending + 1.
//! * **Already reached at append.** An operation whose threshold is reached when it is appended
//!   fires at once (`post_ct` in `ptl_ct.c` re-checks after inserting) and never occupies a
//!   TLE or the ack counter, so it is accepted even when its pool is full.
//! * **TLE exhaustion.** libfabric calls it "indeterminate behavior" and offers
//!   `FI_CXI_ENABLE_TRIG_OP_LIMIT` because without it `fi_control(FI_QUEUE_WORK)` can
//!   *deadlock* ("applications must prevent deadlock by ensuring triggered op limit is not
//!   exceeded", its parameter text): we read that the trigger CQ stalls until an entry is
//!   freed, which is what the device does (`tou`). The block returns
//!   [`CtError::TleExhausted`] without changing any state ([`CtError::is_stall`]); the CQ engine
//!   leaves the command at the head of the queue and retries after an entry is freed (a firing
//!   or a cancel). It also sets a sticky [`CtBlock::tle_oversubscribed`] indicator, our reading
//!   of `c_cq_err_flg.tle_oversubscribed`. A CQ engine that prefers failing the command can use
//!   [`CtError::return_code`] (`C_RC_NO_SPACE`).
//! * **Write-backs.** Every change of a CT's counts (doorbell, CT_SET, CT_INC, counting event,
//!   firing CT_TRIG_SET / CT_TRIG_INC) and every CT_GET and firing CT_TRIG_EVENT writes back
//!   `c_ct_writeback {success, failure, ct_writeback = 1}`, in order with the other actions
//!   (libcxi `tests/ct.c` waits for write-backs after doorbell increments alone; libfabric relies
//!   on SET and reset doorbells writing back). CT_CANCEL and driver operations do not. A CT
//!   with no write-back address (context 0 in the CSR: write-back disabled) keeps its
//!   `writeback_pending` indicator set until a write-back can be made; the indicator is
//!   otherwise clear after every operation.
//! * **Disabled CTs.** Counting events and doorbells for a disabled CT (or CT 0) are dropped
//!   (counted in [`CtCounters::dropped_updates`]): there is no one to report them to. A CT
//!   command naming a disabled CT (as `ct`, or `trig_ct` of a triggered command, or the `ct` a
//!   CT_TRIG_SET / CT_TRIG_INC will change) fails with `C_RC_CMD_INVALID_ARG`, like an invalid
//!   embedded command; the TOU reports command errors as COMMAND_FAILURE events
//!   (`c_tou_cntrs.fail_cntr`). Pending operations survive [`CtBlock::disable`] (the driver
//!   disables, then cancels); a CT_TRIG_SET / CT_TRIG_INC that fires onto a CT disabled in
//!   the meantime changes nothing.
//! * **CT_SET without either set flag** changes nothing but still writes back (as CT_GET).

mod command;
mod effects;
mod tle;

pub use command::{CmdSource, CtCommand};
pub use effects::{CtAction, EMBEDDED_LEN, Effects, FiredDma, FiredEvent, WbAddr, Writeback};
pub use tle::{DEFAULT_NUM_SHARED, NUM_TLE_POOLS, TlePoolConfig, TlePoolStatus};

use emu_core::sparse::SparseTable;
use std::collections::{BTreeMap, VecDeque};

use firmware_spec::cassini::cmd::{CtCmd, CtOp};
use firmware_spec::cassini::ct::EmbeddedDma;
use firmware_spec::cassini::layout::FormatError;
use firmware_spec::cassini::limits::{
    C_CT_NONE, C_NUM_CTS, C_NUM_TARGET_CQS, C_NUM_TLES, C_NUM_TRANSMIT_CQS,
};
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::status::{
    C_TOU_LAUNCH_PAGE_SIZE, CT_FAILURE_MASK, CT_INC_FAILURE_OFFSET, CT_INC_SUCCESS_OFFSET,
    CT_RESET_FAILURE_OFFSET, CT_RESET_SUCCESS_OFFSET, CT_SUCCESS_MASK, CtWriteback,
};

use tle::TlePools;

/// Number of CQ ack counters: transmit CQs then target CQs.
pub const NUM_ACK_COUNTERS: usize = C_NUM_TRANSMIT_CQS + C_NUM_TARGET_CQS;

/// Which counts a triggered operation's threshold is compared with (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThresholdMode {
    /// `success >= threshold`.
    Success,
    /// `success + failure >= threshold` (Portals 4; the default).
    #[default]
    SuccessPlusFailure,
}

/// Configuration of the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtConfig {
    /// Threshold comparison.
    pub threshold_mode: ThresholdMode,
}

/// A doorbell store (`cxi_ct_inc_success` etc.; offsets in the TOU page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoorbellOp {
    /// +0: add the value (48 bits) to success.
    IncSuccess,
    /// +64: add the value (7 bits) to failure.
    IncFailure,
    /// +128: success = 0.
    ResetSuccess,
    /// +192: failure = 0.
    ResetFailure,
}

impl DoorbellOp {
    /// The operation at `offset` within a CT's TOU page.
    pub fn from_offset(offset: usize) -> Option<Self> {
        match offset {
            CT_INC_SUCCESS_OFFSET => Some(DoorbellOp::IncSuccess),
            CT_INC_FAILURE_OFFSET => Some(DoorbellOp::IncFailure),
            CT_RESET_SUCCESS_OFFSET => Some(DoorbellOp::ResetSuccess),
            CT_RESET_FAILURE_OFFSET => Some(DoorbellOp::ResetFailure),
            _ => None,
        }
    }

    /// The CT and offset in its page of a store at `region_offset` from the start of the TOU
    /// region (`C_MEMORG_CQ_TOU`; 64 KiB per CT).
    pub fn split_region_offset(region_offset: u64) -> (u64, usize) {
        let page = C_TOU_LAUNCH_PAGE_SIZE as u64;
        (region_offset / page, (region_offset % page) as usize)
    }
}

/// Why the block refused an input. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CtError {
    /// CT index 0 (`C_CT_NONE`) or outside 1..2047 where a CT is required.
    #[error("CT {0} does not exist")]
    InvalidCt(u16),
    /// The CT is not enabled.
    #[error("CT {0} is not enabled")]
    CtDisabled(u16),
    /// CQ index outside the ack counters.
    #[error("CQ {0} does not exist")]
    InvalidCq(u16),
    /// TLE pool index outside 0..3.
    #[error("TLE pool {0} does not exist")]
    InvalidPool(u8),
    /// A doorbell store at an offset that names no operation.
    #[error("no CT doorbell at page offset {0:#x}")]
    BadDoorbellOffset(usize),
    /// CT_TRIG_DMA given without its embedded command.
    #[error("CT_TRIG_DMA without an embedded command")]
    MissingEmbedded,
    /// The embedded command of a CT_TRIG_DMA is not a valid DMA command.
    #[error("bad embedded command: {0}")]
    BadEmbedded(FormatError),
    /// No TLE is free for the CQ's pool: the trigger CQ stalls (module docs).
    #[error("no triggered-list entry free in pool {pool}")]
    TleExhausted {
        /// The pool.
        pool: u8,
    },
}

impl CtError {
    /// Whether the command must wait (stall the CQ) rather than fail.
    pub fn is_stall(&self) -> bool {
        matches!(self, CtError::TleExhausted { .. })
    }

    /// Return code of the COMMAND_FAILURE event: `C_RC_CMD_INVALID_ARG`, or `C_RC_NO_SPACE`
    /// for TLE exhaustion (if the CQ engine fails the command instead of stalling).
    pub fn return_code(&self) -> ReturnCode {
        match self {
            CtError::TleExhausted { .. } => ReturnCode::NoSpace,
            _ => ReturnCode::CmdInvalidArg,
        }
    }
}

/// A CT as software may observe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtState {
    /// Success count (48 bits).
    pub success: u64,
    /// Failure count (7 bits).
    pub failure: u8,
    /// `c_cq_cfg_ct_enable.ct_enable`.
    pub enabled: bool,
    /// Write-back address, `None` when write-back is disabled.
    pub writeback: Option<WbAddr>,
    /// The counts changed (or a write-back was asked for) and were not written back.
    pub writeback_pending: bool,
}

impl CtState {
    /// The write-back image of the current counts.
    pub fn image(&self) -> CtWriteback {
        CtWriteback {
            ct_success: self.success,
            ct_failure: self.failure,
            ct_writeback: true,
        }
    }
}

/// Activity counters (after `c_tou_cntrs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtCounters {
    /// Counting-event updates received (`num_ct_updates`).
    pub ct_updates: u64,
    /// Doorbell stores accepted.
    pub doorbells: u64,
    /// Successfully executed commands per `c_ct_op` (`ct_cmd_counts`).
    pub cmd_counts: [u64; 9],
    /// Refused commands (`fail_cntr`; stalls not included).
    pub cmd_failures: u64,
    /// Triggered operations fired (`num_trig_cmds`, all pools).
    pub fired: u64,
    /// Triggered operations cancelled.
    pub cancelled: u64,
    /// Updates and doorbells dropped for a disabled CT or CT 0.
    pub dropped_updates: u64,
    /// Write-backs produced.
    pub writebacks: u64,
}

/// What a pending triggered operation does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrigKind {
    Dma([u8; EMBEDDED_LEN]),
    Set {
        ct: u16,
        success: Option<u64>,
        failure: Option<u8>,
    },
    Inc {
        ct: u16,
        success: u64,
        failure: u8,
    },
    Event {
        eq: u16,
    },
}

/// A triggered operation (pending in a TLE, or being fired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TrigOp {
    trig_ct: u16,
    threshold: u64,
    from_cq: u16,
    pool: u8,
    kind: TrigKind,
}

/// The whole CT block (module docs).
#[derive(Debug, Clone)]
pub struct CtBlock {
    config: CtConfig,
    cts: SparseTable<CtState>,
    /// Per trigger CT: (threshold, arrival) -> TLE index.
    lists: SparseTable<BTreeMap<(u64, u64), u16>>,
    tles: SparseTable<Option<TrigOp>>,
    /// Released TLEs, the most recently released on top; taken before any never-used one.
    free_tles: Vec<u16>,
    /// TLEs `fresh_tles..C_NUM_TLES` have never been used (taken in increasing order).
    fresh_tles: u16,
    pools: TlePools,
    ack: SparseTable<u32>,
    arrival: u64,
    oversubscribed: bool,
    counters: CtCounters,
}

impl Default for CtBlock {
    fn default() -> Self {
        Self::new()
    }
}

impl CtBlock {
    /// A block at reset: every CT disabled at 0, no pending operation, TLE pools at their CSR
    /// reset values, the default [`CtConfig`].
    pub fn new() -> Self {
        Self::with_config(CtConfig::default())
    }

    /// A block at reset with `config`.
    pub fn with_config(config: CtConfig) -> Self {
        CtBlock {
            config,
            cts: SparseTable::new(C_NUM_CTS, CtState::default()),
            lists: SparseTable::new(C_NUM_CTS, BTreeMap::new()),
            tles: SparseTable::new(C_NUM_TLES, None),
            free_tles: Vec::new(),
            fresh_tles: 0,
            pools: TlePools::new(),
            ack: SparseTable::new(NUM_ACK_COUNTERS, 0),
            arrival: 0,
            oversubscribed: false,
            counters: CtCounters::default(),
        }
    }

    /// Table entries backed by storage (CTs, their trigger lists, TLEs, ack counters): 0 at
    /// reset, growing with the CTs and TLEs used.
    pub fn allocated_entries(&self) -> usize {
        self.cts.allocated_entries()
            + self.lists.allocated_entries()
            + self.tles.allocated_entries()
            + self.ack.allocated_entries()
    }

    /// The configuration.
    pub fn config(&self) -> CtConfig {
        self.config
    }

    // -----------------------------------------------------------------------------------
    // Driver operations
    // -----------------------------------------------------------------------------------

    fn index(ct: u16) -> Result<usize, CtError> {
        if ct == C_CT_NONE || ct as usize >= C_NUM_CTS {
            Err(CtError::InvalidCt(ct))
        } else {
            Ok(ct as usize)
        }
    }

    /// `C_CQ_CFG_INIT_CT_HW_STATE.init`: cancel the CT's pending operations and zero its
    /// counts (the driver does this before enabling a newly allocated CT). No write-back.
    pub fn init(&mut self, ct: u16) -> Result<(), CtError> {
        let i = Self::index(ct)?;
        self.cancel_pending(ct);
        let Ok(c) = self.cts.get_mut(i) else {
            return Err(CtError::InvalidCt(ct));
        };
        c.success = 0;
        c.failure = 0;
        c.writeback_pending = false;
        Ok(())
    }

    /// `C_CQ_CFG_INIT_CT_HW_STATE.cancel`: drop the CT's pending triggered operations without
    /// firing them. Returns how many.
    pub fn cancel(&mut self, ct: u16) -> Result<usize, CtError> {
        Self::index(ct)?;
        Ok(self.cancel_pending(ct))
    }

    /// Enable a CT (`c_cq_cfg_ct_enable`) with its write-back address.
    pub fn enable(&mut self, ct: u16, writeback: Option<WbAddr>) -> Result<(), CtError> {
        let i = Self::index(ct)?;
        let Ok(c) = self.cts.get_mut(i) else {
            return Err(CtError::InvalidCt(ct));
        };
        c.enabled = true;
        c.writeback = writeback;
        Ok(())
    }

    /// Disable a CT. Its counts and pending operations stay.
    pub fn disable(&mut self, ct: u16) -> Result<(), CtError> {
        let i = Self::index(ct)?;
        if let Ok(c) = self.cts.get_mut(i) {
            c.enabled = false;
        }
        Ok(())
    }

    /// Change the write-back address (`c_cq_cfg_ct_wb_mem_addr`); `None` disables
    /// write-back.
    pub fn set_writeback(&mut self, ct: u16, writeback: Option<WbAddr>) -> Result<(), CtError> {
        let i = Self::index(ct)?;
        if let Ok(c) = self.cts.get_mut(i) {
            c.writeback = writeback;
        }
        Ok(())
    }

    /// A CT's state, `None` for an index outside 1..2047.
    pub fn state(&self, ct: u16) -> Option<CtState> {
        Self::index(ct)
            .ok()
            .and_then(|i| self.cts.get(i).ok().copied())
    }

    /// Configure TLE pool `pool` (`c_cq_cfg_tle_pool`).
    pub fn set_tle_pool(&mut self, pool: u8, cfg: TlePoolConfig) -> Result<(), CtError> {
        if pool as usize >= NUM_TLE_POOLS {
            return Err(CtError::InvalidPool(pool));
        }
        self.pools.configure(pool as usize, cfg);
        Ok(())
    }

    /// A pool's configuration.
    pub fn tle_pool(&self, pool: u8) -> Option<TlePoolConfig> {
        self.pools.config(pool as usize)
    }

    /// Set the shared reserve (`c_cq_cfg_sts_tle_shared.num_shared`).
    pub fn set_tle_shared(&mut self, num_shared: u16) {
        self.pools.set_num_shared(num_shared);
    }

    /// `num_shared`.
    pub fn tle_shared(&self) -> u16 {
        self.pools.num_shared()
    }

    /// Shared entries in use (`num_shared_allocated`).
    pub fn tle_shared_allocated(&self) -> u16 {
        self.pools.shared_allocated()
    }

    /// TLEs in use on the device (`num_total_allocated`).
    pub fn tles_in_use(&self) -> usize {
        self.pools.total() as usize
    }

    /// A pool's status.
    pub fn tle_pool_status(&self, pool: u8) -> Option<TlePoolStatus> {
        self.pools.status(pool as usize)
    }

    /// Reset a pool's high-water mark to its current use (`c_cq_sts_max_tle_in_use` write).
    pub fn clear_tle_max(&mut self, pool: u8) {
        self.pools.clear_max(pool as usize);
    }

    /// Whether an append was refused for lack of a TLE since the last clear.
    pub fn tle_oversubscribed(&self) -> bool {
        self.oversubscribed
    }

    /// Clear [`CtBlock::tle_oversubscribed`] (write-1-to-clear of the error flag).
    pub fn clear_tle_oversubscribed(&mut self) {
        self.oversubscribed = false;
    }

    /// The ack counter of CQ `cq`: its triggered operations still pending (0 for an index
    /// outside the counters).
    pub fn pending(&self, cq: u16) -> u32 {
        self.ack.get(cq as usize).copied().unwrap_or(0)
    }

    /// Triggered operations pending on `trig_ct`.
    pub fn pending_on(&self, trig_ct: u16) -> usize {
        self.lists.get(trig_ct as usize).map_or(0, |l| l.len())
    }

    /// The thresholds pending on `trig_ct`, in firing order.
    pub fn pending_thresholds(&self, trig_ct: u16) -> Vec<u64> {
        self.lists
            .get(trig_ct as usize)
            .map_or_else(|_| Vec::new(), |l| l.keys().map(|k| k.0).collect())
    }

    /// Activity counters.
    pub fn counters(&self) -> CtCounters {
        self.counters
    }

    // -----------------------------------------------------------------------------------
    // Inputs
    // -----------------------------------------------------------------------------------

    /// A 64-bit doorbell store at `offset` in CT `ct`'s TOU page.
    pub fn doorbell(&mut self, ct: u16, offset: usize, value: u64) -> Result<Effects, CtError> {
        let op = DoorbellOp::from_offset(offset).ok_or(CtError::BadDoorbellOffset(offset))?;
        self.doorbell_op(ct, op, value)
    }

    /// A doorbell operation on CT `ct`. Dropped (no effect) when the CT is 0 or disabled.
    pub fn doorbell_op(&mut self, ct: u16, op: DoorbellOp, value: u64) -> Result<Effects, CtError> {
        if ct as usize >= C_NUM_CTS {
            return Err(CtError::InvalidCt(ct));
        }
        if !self.is_enabled(ct) {
            self.counters.dropped_updates += 1;
            return Ok(Effects::default());
        }
        self.counters.doorbells += 1;
        let change = match op {
            DoorbellOp::IncSuccess => Change::Inc {
                success: value,
                failure: 0,
            },
            DoorbellOp::IncFailure => Change::Inc {
                success: 0,
                failure: (value & CT_FAILURE_MASK) as u8,
            },
            DoorbellOp::ResetSuccess => Change::Set {
                success: Some(0),
                failure: None,
            },
            DoorbellOp::ResetFailure => Change::Set {
                success: None,
                failure: Some(0),
            },
        };
        let mut fx = Effects::default();
        let mut queue = VecDeque::new();
        self.change(ct, change, &mut fx, &mut queue);
        self.run(&mut queue, &mut fx);
        Ok(fx)
    }

    /// A counting event from the event engine: add `success_by` (48 bits) and `failure_by`
    /// (7 bits). CT 0 or a disabled CT: dropped.
    pub fn event_increment(
        &mut self,
        ct: u16,
        success_by: u64,
        failure_by: u64,
    ) -> Result<Effects, CtError> {
        if ct as usize >= C_NUM_CTS {
            return Err(CtError::InvalidCt(ct));
        }
        if !self.is_enabled(ct) {
            self.counters.dropped_updates += 1;
            return Ok(Effects::default());
        }
        self.counters.ct_updates += 1;
        let mut fx = Effects::default();
        let mut queue = VecDeque::new();
        let change = Change::Inc {
            success: success_by,
            failure: (failure_by & CT_FAILURE_MASK) as u8,
        };
        self.change(ct, change, &mut fx, &mut queue);
        self.run(&mut queue, &mut fx);
        Ok(fx)
    }

    /// A CT command from trigger CQ `src.cq` (module docs). On error nothing changed; see
    /// [`CtError::is_stall`].
    pub fn command(&mut self, cmd: &CtCommand, src: CmdSource) -> Result<Effects, CtError> {
        let r = self.command_inner(cmd, src);
        match &r {
            Ok(_) => {
                if let Some(n) = self.counters.cmd_counts.get_mut(cmd.opcode() as usize) {
                    *n += 1;
                }
            }
            Err(e) if !e.is_stall() => self.counters.cmd_failures += 1,
            Err(_) => {}
        }
        r
    }

    fn command_inner(&mut self, cmd: &CtCommand, src: CmdSource) -> Result<Effects, CtError> {
        if src.cq as usize >= NUM_ACK_COUNTERS {
            return Err(CtError::InvalidCq(src.cq));
        }
        if src.tle_pool as usize >= NUM_TLE_POOLS {
            return Err(CtError::InvalidPool(src.tle_pool));
        }
        let h: &CtCmd = cmd.header();
        let mut fx = Effects::default();
        let mut queue = VecDeque::new();
        match h.opcode {
            CtOp::CtNoop => {}
            CtOp::CtSet => {
                self.require_enabled(h.ct)?;
                let change = set_change(h);
                self.change(h.ct, change, &mut fx, &mut queue);
            }
            CtOp::CtInc => {
                self.require_enabled(h.ct)?;
                self.change(h.ct, inc_change(h), &mut fx, &mut queue);
            }
            CtOp::CtGet => {
                self.require_enabled(h.ct)?;
                self.writeback(h.ct, &mut fx);
            }
            CtOp::CtCancel => {
                self.require_enabled(h.ct)?;
                self.cancel_pending(h.ct);
            }
            CtOp::CtTrigDma | CtOp::CtTrigSet | CtOp::CtTrigInc | CtOp::CtTrigEvent => {
                let op = self.trig_op(cmd, src)?;
                self.append(op, &mut fx, &mut queue)?;
            }
        }
        self.run(&mut queue, &mut fx);
        Ok(fx)
    }

    // -----------------------------------------------------------------------------------
    // Internals
    // -----------------------------------------------------------------------------------

    fn is_enabled(&self, ct: u16) -> bool {
        ct != C_CT_NONE && self.cts.get(ct as usize).is_ok_and(|c| c.enabled)
    }

    fn require_enabled(&self, ct: u16) -> Result<(), CtError> {
        Self::index(ct)?;
        if self.is_enabled(ct) {
            Ok(())
        } else {
            Err(CtError::CtDisabled(ct))
        }
    }

    /// Validate a triggered command and build its operation.
    fn trig_op(&self, cmd: &CtCommand, src: CmdSource) -> Result<TrigOp, CtError> {
        let h = cmd.header();
        self.require_enabled(h.trig_ct)?;
        let kind = match (h.opcode, cmd) {
            (CtOp::CtTrigDma, CtCommand::TrigDma { embedded, .. }) => {
                let dma = EmbeddedDma::decode(embedded).map_err(CtError::BadEmbedded)?;
                if !dma.is_valid_opcode() {
                    let hd = dma.header();
                    return Err(CtError::BadEmbedded(FormatError::UnsupportedCommand {
                        queue: "embedded",
                        cmd_type: hd.cmd_type as u8,
                        opcode: hd.opcode,
                    }));
                }
                TrigKind::Dma(*embedded)
            }
            (CtOp::CtTrigDma, CtCommand::Ct(_)) => return Err(CtError::MissingEmbedded),
            (CtOp::CtTrigSet, _) => {
                self.require_enabled(h.ct)?;
                let (success, failure) = set_values(h);
                TrigKind::Set {
                    ct: h.ct,
                    success,
                    failure,
                }
            }
            (CtOp::CtTrigInc, _) => {
                self.require_enabled(h.ct)?;
                TrigKind::Inc {
                    ct: h.ct,
                    success: h.ct_success & CT_SUCCESS_MASK,
                    failure: (h.ct_failure as u64 & CT_FAILURE_MASK) as u8,
                }
            }
            _ => TrigKind::Event { eq: h.eq },
        };
        Ok(TrigOp {
            trig_ct: h.trig_ct,
            threshold: h.threshold & CT_SUCCESS_MASK,
            from_cq: src.cq,
            pool: src.tle_pool,
            kind,
        })
    }

    /// Whether `ct`'s count has reached `threshold`.
    fn reached(&self, ct: u16, threshold: u64) -> bool {
        let Ok(c) = self.cts.get(ct as usize) else {
            return false;
        };
        let count = match self.config.threshold_mode {
            ThresholdMode::Success => c.success,
            ThresholdMode::SuccessPlusFailure => c.success + c.failure as u64,
        };
        count >= threshold
    }

    /// Append a triggered operation: fire at once if reached, else take a TLE.
    fn append(
        &mut self,
        op: TrigOp,
        fx: &mut Effects,
        queue: &mut VecDeque<u16>,
    ) -> Result<(), CtError> {
        if self.reached(op.trig_ct, op.threshold) {
            self.fire(op, fx, queue);
            return Ok(());
        }
        let slot = match self.free_tles.last() {
            Some(&s) => s,
            None if usize::from(self.fresh_tles) < C_NUM_TLES => self.fresh_tles,
            None => {
                self.oversubscribed = true;
                return Err(CtError::TleExhausted { pool: op.pool });
            }
        };
        if !self.pools.try_alloc(op.pool as usize) {
            self.oversubscribed = true;
            return Err(CtError::TleExhausted { pool: op.pool });
        }
        if self.free_tles.pop().is_none() {
            self.fresh_tles += 1;
        }
        if let Ok(t) = self.tles.get_mut(slot as usize) {
            *t = Some(op);
        }
        self.arrival += 1;
        if let Ok(l) = self.lists.get_mut(op.trig_ct as usize) {
            l.insert((op.threshold, self.arrival), slot);
        }
        if let Ok(a) = self.ack.get_mut(op.from_cq as usize) {
            *a += 1;
        }
        tracing::trace!(
            target: "cassini::ct",
            trig_ct = op.trig_ct,
            threshold = op.threshold,
            slot,
            "triggered op pending"
        );
        Ok(())
    }

    /// Release a pending operation's TLE and ack count.
    fn release(&mut self, slot: u16) -> Option<TrigOp> {
        let op = self.tles.get_mut_if_touched(slot as usize).ok()??.take()?;
        self.free_tles.push(slot);
        self.pools.free(op.pool as usize);
        if let Ok(a) = self.ack.get_mut(op.from_cq as usize) {
            *a = a.saturating_sub(1);
        }
        Some(op)
    }

    fn cancel_pending(&mut self, ct: u16) -> usize {
        let Ok(Some(list)) = self.lists.get_mut_if_touched(ct as usize) else {
            return 0;
        };
        let slots: Vec<u16> = std::mem::take(list).into_values().collect();
        let n = slots.len();
        for s in slots {
            self.release(s);
        }
        self.counters.cancelled += n as u64;
        n
    }

    /// Apply a change of counts to an enabled CT, write it back and queue it for checking.
    fn change(&mut self, ct: u16, change: Change, fx: &mut Effects, queue: &mut VecDeque<u16>) {
        let Ok(c) = self.cts.get_mut(ct as usize) else {
            return;
        };
        match change {
            Change::Inc { success, failure } => {
                c.success = c.success.wrapping_add(success) & CT_SUCCESS_MASK;
                c.failure = ((c.failure as u64 + failure as u64) & CT_FAILURE_MASK) as u8;
            }
            Change::Set { success, failure } => {
                if let Some(s) = success {
                    c.success = s & CT_SUCCESS_MASK;
                }
                if let Some(f) = failure {
                    c.failure = (f as u64 & CT_FAILURE_MASK) as u8;
                }
            }
        }
        c.writeback_pending = true;
        self.writeback(ct, fx);
        queue.push_back(ct);
    }

    fn writeback(&mut self, ct: u16, fx: &mut Effects) {
        let Ok(c) = self.cts.get_mut(ct as usize) else {
            return;
        };
        match c.writeback {
            Some(target) => {
                c.writeback_pending = false;
                let image = c.image();
                fx.push(CtAction::Writeback(Writeback { ct, target, image }));
                self.counters.writebacks += 1;
            }
            None => c.writeback_pending = true,
        }
    }

    /// Fire the ready operations of every queued CT, including those the firings change.
    fn run(&mut self, queue: &mut VecDeque<u16>, fx: &mut Effects) {
        while let Some(ct) = queue.pop_front() {
            while let Some((&key, &slot)) = self
                .lists
                .get(ct as usize)
                .ok()
                .and_then(|l| l.first_key_value())
            {
                if !self.reached(ct, key.0) {
                    break;
                }
                if let Ok(l) = self.lists.get_mut(ct as usize) {
                    l.remove(&key);
                }
                if let Some(op) = self.release(slot) {
                    self.fire(op, fx, queue);
                }
            }
        }
    }

    /// Carry out a triggered operation whose threshold was reached.
    fn fire(&mut self, op: TrigOp, fx: &mut Effects, queue: &mut VecDeque<u16>) {
        self.counters.fired += 1;
        tracing::trace!(
            target: "cassini::ct",
            trig_ct = op.trig_ct,
            threshold = op.threshold,
            "triggered op fires"
        );
        match op.kind {
            TrigKind::Dma(raw) => fx.push(CtAction::FireDma(FiredDma {
                trig_ct: op.trig_ct,
                threshold: op.threshold,
                from_cq: op.from_cq,
                raw,
            })),
            TrigKind::Set {
                ct,
                success,
                failure,
            } => {
                if self.is_enabled(ct) {
                    self.change(ct, Change::Set { success, failure }, fx, queue);
                }
            }
            TrigKind::Inc {
                ct,
                success,
                failure,
            } => {
                if self.is_enabled(ct) {
                    self.change(ct, Change::Inc { success, failure }, fx, queue);
                }
            }
            TrigKind::Event { eq } => {
                self.writeback(op.trig_ct, fx);
                if eq != 0 {
                    fx.push(CtAction::FireEvent(FiredEvent {
                        eq,
                        ct: op.trig_ct,
                        threshold: op.threshold,
                        from_cq: op.from_cq,
                    }));
                }
            }
        }
    }
}

/// A change of a CT's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Inc {
        success: u64,
        failure: u8,
    },
    Set {
        success: Option<u64>,
        failure: Option<u8>,
    },
}

/// The values a CT_SET / CT_TRIG_SET sets (per `set_ct_success` / `set_ct_failure`).
fn set_values(h: &CtCmd) -> (Option<u64>, Option<u8>) {
    (
        h.set_ct_success.then_some(h.ct_success & CT_SUCCESS_MASK),
        h.set_ct_failure
            .then_some((h.ct_failure as u64 & CT_FAILURE_MASK) as u8),
    )
}

fn set_change(h: &CtCmd) -> Change {
    let (success, failure) = set_values(h);
    Change::Set { success, failure }
}

fn inc_change(h: &CtCmd) -> Change {
    Change::Inc {
        success: h.ct_success & CT_SUCCESS_MASK,
        failure: (h.ct_failure as u64 & CT_FAILURE_MASK) as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wb_addr_csr() {
        let w = WbAddr {
            context: 5,
            addr: 0x1234_5678,
        };
        assert_eq!(WbAddr::from_csr(w.to_csr()), Some(w));
        assert_eq!(WbAddr::from_csr(0x1234 << 10), None);
        assert_eq!(w.to_csr(), 5 | (0x1234_5678 >> 3) << 10);
    }

    #[test]
    fn doorbell_offsets() {
        assert_eq!(DoorbellOp::from_offset(0), Some(DoorbellOp::IncSuccess));
        assert_eq!(DoorbellOp::from_offset(64), Some(DoorbellOp::IncFailure));
        assert_eq!(DoorbellOp::from_offset(128), Some(DoorbellOp::ResetSuccess));
        assert_eq!(DoorbellOp::from_offset(192), Some(DoorbellOp::ResetFailure));
        assert_eq!(DoorbellOp::from_offset(8), None);
        assert_eq!(DoorbellOp::split_region_offset(3 * 0x10000 + 64), (3, 64));
    }
}
