//! Triggered operations: CT commands that wait on a counter (`CT_TRIG_DMA`,
//! `CT_TRIG_INC`, `CT_TRIG_SET`, `CT_TRIG_EVENT`), emitted on a trigger queue
//! ([`super::CqOptions::trigger`], with a profile from [`super::Lni::alloc_trig_cp`]).

use firmware_spec::cassini::cmd::{CtCmd, CtOp, DmaAmo, EmbeddedDma, FullDma, NomatchDma, TrigDma};
use firmware_spec::cassini::status::CT_SUCCESS_MASK;

/// CT_TRIG_DMA launching `dma` when CT `trig_ct` reaches `threshold`.
pub fn full_dma(trig_ct: u16, threshold: u64, dma: FullDma) -> TrigDma {
    TrigDma::new(trig_ct, threshold & CT_SUCCESS_MASK, EmbeddedDma::Full(dma))
}

/// CT_TRIG_DMA launching a non-matching DMA (made restricted, as `cxi_cq_emit_nomatch_dma`
/// does).
pub fn nomatch_dma(trig_ct: u16, threshold: u64, mut dma: NomatchDma) -> TrigDma {
    dma.flags.restricted = true;
    TrigDma::new(
        trig_ct,
        threshold & CT_SUCCESS_MASK,
        EmbeddedDma::Nomatch(dma),
    )
}

/// CT_TRIG_DMA launching a DMA AMO (`request_len` set to the operand size).
pub fn dma_amo(trig_ct: u16, threshold: u64, mut amo: DmaAmo) -> TrigDma {
    amo.request_len = amo.atomic_type.size() as u32;
    TrigDma::new(trig_ct, threshold & CT_SUCCESS_MASK, EmbeddedDma::Amo(amo))
}

fn trig(opcode: CtOp, ct: u16, trig_ct: u16, threshold: u64) -> CtCmd {
    CtCmd {
        opcode,
        ct,
        trig_ct,
        threshold: threshold & CT_SUCCESS_MASK,
        ..CtCmd::default()
    }
}

/// CT_TRIG_INC: add `success`/`failure` to CT `ct` when CT `trig_ct` reaches `threshold`.
pub fn ct_inc(ct: u16, trig_ct: u16, threshold: u64, success: u64, failure: u8) -> CtCmd {
    CtCmd {
        ct_success: success & CT_SUCCESS_MASK,
        ct_failure: failure & 0x7F,
        ..trig(CtOp::CtTrigInc, ct, trig_ct, threshold)
    }
}

/// CT_TRIG_SET: set CT `ct`'s success count when CT `trig_ct` reaches `threshold`.
pub fn ct_set(ct: u16, trig_ct: u16, threshold: u64, success: u64) -> CtCmd {
    CtCmd {
        ct_success: success & CT_SUCCESS_MASK,
        set_ct_success: true,
        ..trig(CtOp::CtTrigSet, ct, trig_ct, threshold)
    }
}

/// CT_TRIG_EVENT: write CT `trig_ct` back, and post TRIGGERED_OP to `eq` (0 = none), when it
/// reaches `threshold`.
pub fn event(trig_ct: u16, threshold: u64, eq: u16) -> CtCmd {
    CtCmd {
        eq,
        ..trig(CtOp::CtTrigEvent, 0, trig_ct, threshold)
    }
}
