//! What the CT block asks its caller to do: write-backs (8-byte DMA writes of
//! `c_ct_writeback`), triggered DMA commands to launch, TRIGGERED_OP events to post.

use firmware_spec::cassini::ct::EmbeddedDma;
use firmware_spec::cassini::event::TrigOpShort;
use firmware_spec::cassini::layout::FormatError;
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::status::CtWriteback;

/// Bytes of the command embedded in a CT_TRIG_DMA (`c_ct_cmd.embedded_dma`, byte 24 to the
/// end of the 128 B command).
pub const EMBEDDED_LEN: usize = 128 - 24;

/// Where a CT writes back (`c_cq_cfg_ct_wb_mem_addr`): an address context and an 8-byte
/// aligned address in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WbAddr {
    /// `wb_mem_context` (10 bits): the AC the DMA write goes through.
    pub context: u16,
    /// The byte address (`wb_mem_addr << 3`).
    pub addr: u64,
}

impl WbAddr {
    /// From the 64-bit `c_cq_cfg_ct_wb_mem_addr` CSR (`wb_mem_context@0:10`,
    /// `wb_mem_addr@10:54` in 8-byte units). Context 0 (`C_AC_NONE`) means write-back is
    /// disabled (cxi driver, `cxi_ct_alloc_internal`): `None`.
    pub fn from_csr(qw: u64) -> Option<WbAddr> {
        let context = (qw & 0x3FF) as u16;
        if context == 0 {
            return None;
        }
        Some(WbAddr {
            context,
            addr: (qw >> 10) << 3,
        })
    }

    /// The CSR encoding.
    pub fn to_csr(&self) -> u64 {
        (self.context as u64 & 0x3FF) | ((self.addr >> 3) << 10)
    }
}

/// A write-back of a CT's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writeback {
    /// The CT.
    pub ct: u16,
    /// Where to write.
    pub target: WbAddr,
    /// The image; `ct_writeback` is set.
    pub image: CtWriteback,
}

impl Writeback {
    /// The 8 bytes to write.
    pub fn bytes(&self) -> [u8; 8] {
        self.image.encode()
    }
}

/// A CT_TRIG_DMA whose threshold was reached: the caller launches the embedded command as
/// if it came from `from_cq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiredDma {
    /// The counter that triggered it.
    pub trig_ct: u16,
    /// Its threshold.
    pub threshold: u64,
    /// The trigger CQ the CT_TRIG_DMA came from.
    pub from_cq: u16,
    /// The embedded command, as it was in the ring (bytes 24..128).
    pub raw: [u8; EMBEDDED_LEN],
}

impl FiredDma {
    /// Decode the embedded command (validated when it was appended).
    pub fn command(&self) -> Result<EmbeddedDma, FormatError> {
        EmbeddedDma::decode(&self.raw)
    }
}

/// A CT_TRIG_EVENT with an EQ whose threshold was reached: post a TRIGGERED_OP event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiredEvent {
    /// The EQ (`eq` of the command, not 0).
    pub eq: u16,
    /// The counter (`trig_ct`), the event's `ct_handle`.
    pub ct: u16,
    /// The threshold.
    pub threshold: u64,
    /// The trigger CQ the command came from.
    pub from_cq: u16,
}

impl FiredEvent {
    /// The 16-byte `c_event_trig_op_short` to post (rc OK).
    pub fn event(&self) -> TrigOpShort {
        TrigOpShort {
            threshold: self.threshold,
            ct_handle: self.ct,
            return_code: ReturnCode::Ok,
        }
    }
}

/// One thing to do, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtAction {
    /// DMA-write a `c_ct_writeback`.
    Writeback(Writeback),
    /// Launch a triggered DMA command.
    FireDma(FiredDma),
    /// Post a TRIGGERED_OP event.
    FireEvent(FiredEvent),
}

/// The ordered actions one operation of the CT block produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// The actions, in the order the hardware would perform them.
    pub actions: Vec<CtAction>,
}

impl Effects {
    /// No action.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// The write-backs, in order.
    pub fn writebacks(&self) -> impl Iterator<Item = &Writeback> {
        self.actions.iter().filter_map(|a| match a {
            CtAction::Writeback(w) => Some(w),
            _ => None,
        })
    }

    /// The triggered DMA commands, in order.
    pub fn fired_dma(&self) -> impl Iterator<Item = &FiredDma> {
        self.actions.iter().filter_map(|a| match a {
            CtAction::FireDma(d) => Some(d),
            _ => None,
        })
    }

    /// The TRIGGERED_OP events, in order.
    pub fn fired_events(&self) -> impl Iterator<Item = &FiredEvent> {
        self.actions.iter().filter_map(|a| match a {
            CtAction::FireEvent(e) => Some(e),
            _ => None,
        })
    }

    pub(crate) fn push(&mut self, a: CtAction) {
        self.actions.push(a);
    }
}
