//! Portal table entries (`cxil_alloc_pte`, `cxil_map_pte`, `cxil_pte_status`,
//! `cxil_pte_transition_sm`, `cxil_invalidate_pte_le`). State changes to ENABLED go through
//! a SETSTATE command on a target queue ([`Pte::set_state_cmd`]).

use std::sync::Arc;

use driver::cassini::uapi::{
    PteAllocCmd, PteFreeCmd, PteLeInvalidateCmd, PteMapCmd, PteStatus, PteStatusCmd,
    PteTransitionSmCmd, PteUnmapCmd,
};
use firmware_spec::cassini::cmd::SetStateCmd;
use firmware_spec::cassini::le::{PtAllocOpts, PtlList, PtlteState};

use super::domain::{Domain, DomainInner};
use super::error::{CxiError, Result};
use super::evtq::{EqShared, EventQueue};
use super::lni::{Lni, LniInner};

pub(crate) struct PteInner {
    pub(crate) lni: Arc<LniInner>,
    pub(crate) number: u32,
    _eq: Option<Arc<EqShared>>,
}

impl Drop for PteInner {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&PteFreeCmd {
            pte_number: self.number,
            ..PteFreeCmd::default()
        }) {
            tracing::warn!(pte = self.number, error = %e, "PTE_FREE failed");
        }
    }
}

/// A portal table entry (`struct cxil_pte`). Freed when it and its mappings are dropped.
#[derive(Clone)]
pub struct Pte {
    pub(crate) inner: Arc<PteInner>,
}

impl std::fmt::Debug for Pte {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pte")
            .field("number", &self.inner.number)
            .finish()
    }
}

/// `struct cxi_pte_status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PteStatusInfo {
    /// Messages dropped while disabled.
    pub drop_count: u32,
    /// State.
    pub state: PtlteState,
    /// LEs reserved in the PtlTE's pool.
    pub les_reserved: u16,
    /// LEs allocated in the pool.
    pub les_allocated: u16,
    /// Pool limit.
    pub les_max: u16,
    /// Remote offsets of the unexpected headers, in order (when asked for).
    pub ule_offsets: Vec<u64>,
}

impl Lni {
    /// `cxil_alloc_pte(lni, evtq, opts)`: a PtlTE (starts DISABLED) whose target events go to
    /// `eq`.
    pub fn alloc_pte(&self, eq: Option<&EventQueue>, opts: PtAllocOpts) -> Result<Pte> {
        let r = self.dev().client.call(&PteAllocCmd {
            lni_hndl: self.id(),
            evtq_hndl: eq.map_or(0, EventQueue::eqn),
            opts: opts.bits(),
            ..PteAllocCmd::default()
        })?;
        Ok(Pte {
            inner: Arc::new(PteInner {
                lni: Arc::clone(&self.inner),
                number: r.pte_number,
                _eq: eq.map(|q| Arc::clone(&q.shared)),
            }),
        })
    }
}

/// A mapping of a PtlTE into a domain (`cxil_map_pte`). Unmapped on drop.
pub struct PteMap {
    pte: Arc<PteInner>,
    _domain: Arc<DomainInner>,
    index: u32,
}

impl std::fmt::Debug for PteMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PteMap")
            .field("pte", &self.pte.number)
            .field("index", &self.index)
            .finish()
    }
}

impl PteMap {
    /// The mapping handle.
    pub fn index(&self) -> u32 {
        self.index
    }
}

impl Drop for PteMap {
    fn drop(&mut self) {
        if let Err(e) = self.pte.lni.dev.client.call(&PteUnmapCmd {
            pte_index: self.index,
            ..PteUnmapCmd::default()
        }) {
            tracing::warn!(map = self.index, error = %e, "PTE_UNMAP failed");
        }
    }
}

impl Pte {
    /// The PtlTE number (what target commands and events name).
    pub fn number(&self) -> u32 {
        self.inner.number
    }

    /// The PtlTE number as a target-command field.
    pub fn index(&self) -> u16 {
        (self.inner.number & 0x7FF) as u16
    }

    /// `cxil_map_pte(pte, domain, pid_offset, is_multicast)`: make the PtlTE addressable at
    /// index `pid_offset` of the domain's PID (or, multicast, at a `cxi_pte_map_offset`).
    pub fn map(&self, domain: &Domain, pid_offset: u32, is_multicast: bool) -> Result<PteMap> {
        let r = self.inner.lni.dev.client.call(&PteMapCmd {
            pte_number: self.inner.number,
            domain_hndl: domain.id(),
            pid_offset,
            is_multicast: u8::from(is_multicast),
            ..PteMapCmd::default()
        })?;
        Ok(PteMap {
            pte: Arc::clone(&self.inner),
            _domain: Arc::clone(&domain.inner),
            index: r.pte_index,
        })
    }

    /// `cxil_pte_status` without the unexpected-header offsets.
    pub fn status(&self) -> Result<PteStatusInfo> {
        self.status_with_ules(0)
    }

    /// `cxil_pte_status`, also returning the remote offsets of up to `max_ules` unexpected
    /// headers.
    pub fn status_with_ules(&self, max_ules: u16) -> Result<PteStatusInfo> {
        let dev = &self.inner.lni.dev;
        let buf = if max_ules > 0 {
            Some(dev.client.alloc_user_memory(u64::from(max_ules) * 8)?)
        } else {
            None
        };
        let mut resp = PteStatus {
            ule_offsets: buf.as_ref().map_or(0, |b| b.va()),
            ule_count: max_ules,
            ..PteStatus::default()
        };
        dev.client.call_inout(
            &PteStatusCmd {
                pte_index: self.inner.number,
                ..PteStatusCmd::default()
            },
            &mut resp,
        )?;
        let mut ule_offsets = Vec::with_capacity(usize::from(resp.ule_count));
        if let Some(b) = &buf {
            for i in 0..u64::from(resp.ule_count.min(max_ules)) {
                ule_offsets.push(b.read_u64(i * 8)?);
            }
        }
        Ok(PteStatusInfo {
            drop_count: resp.drop_count,
            state: PtlteState::try_from(resp.state)
                .map_err(|_| CxiError::Invalid("driver reported an unknown PtlTE state"))?,
            les_reserved: resp.les_reserved,
            les_allocated: resp.les_allocated,
            les_max: resp.les_max,
            ule_offsets,
        })
    }

    /// `cxil_pte_transition_sm(pte, drop_count)`: DISABLED → SOFTWARE_MANAGED if the drop
    /// count matches (`EAGAIN` if not).
    pub fn transition_sm(&self, drop_count: u32) -> Result<()> {
        self.inner.lni.dev.client.call(&PteTransitionSmCmd {
            pte_index: self.inner.number,
            drop_count,
            ..PteTransitionSmCmd::default()
        })?;
        Ok(())
    }

    /// `cxil_invalidate_pte_le(pte, buffer_id, list)`: cancel in-flight DMA into the LE
    /// (its target events complete with `C_RC_MST_CANCELLED`).
    pub fn le_invalidate(&self, buffer_id: u16, list: PtlList) -> Result<()> {
        self.inner.lni.dev.client.call(&PteLeInvalidateCmd {
            pte_index: self.inner.number,
            buffer_id: u32::from(buffer_id),
            list: list as u32,
            ..PteLeInvalidateCmd::default()
        })?;
        Ok(())
    }

    /// The SETSTATE command moving this PtlTE to `state` (libcxi tests enable fresh PtlTEs
    /// with drop count 0); emit it on a target queue.
    pub fn set_state_cmd(&self, state: PtlteState, drop_count: u32) -> SetStateCmd {
        SetStateCmd {
            ptlte_state: state,
            ptlte_index: self.index(),
            current_addr: 0,
            drop_count: drop_count & 0xFF_FFFF,
        }
    }
}
