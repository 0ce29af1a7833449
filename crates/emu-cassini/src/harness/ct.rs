//! Counting events and triggered-operation pools: allocated with CSR stores as the driver
//! does, and software's side of a counting event ([`Ct`]: TOU doorbells, the write-back).

use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::pci::{TOU_BASE, TOU_LAUNCH_PAGE_SIZE};
use firmware_spec::cassini::status::{
    CT_INC_FAILURE_OFFSET, CT_INC_SUCCESS_OFFSET, CT_RESET_FAILURE_OFFSET, CT_RESET_SUCCESS_OFFSET,
    CtWriteback,
};

use super::error::HarnessError;
use super::fixed::{AC_USER, RGID};
use super::node::{Md, Node};

impl Node {
    /// Counting event `ct` (`cxil_alloc_ct`): counts zeroed (`c_cq_cfg_init_ct_hw_state`
    /// init), RGID 1, written back to the first 8 bytes of `wb` (or never), enabled.
    pub fn alloc_ct(&self, ct: u16, wb: Option<&Md>) -> Result<Ct, HarnessError> {
        use f::c_cq_cfg_ct_wb_mem_addr as w;
        self.csr_write(
            csr::C_CQ_CFG_INIT_CT_HW_STATE,
            0,
            &[
                (f::c_cq_cfg_init_ct_hw_state::CT_HANDLE, u64::from(ct)),
                (f::c_cq_cfg_init_ct_hw_state::INIT, 1),
            ],
        )?;
        self.csr_write(csr::C_CQ_CFG_INIT_CT_HW_STATE, 0, &[])?;
        self.csr_write(
            csr::C_CQ_CFG_CT_RGID_TABLE,
            u32::from(ct),
            &[(f::c_cq_cfg_ct_rgid_table::RGID, u64::from(RGID))],
        )?;
        let (ctx, addr) = wb.map_or((0, 0), |m| (u64::from(AC_USER), m.iova >> 3));
        self.csr_write(
            csr::C_CQ_CFG_CT_WB_MEM_ADDR,
            u32::from(ct),
            &[(w::WB_MEM_CONTEXT, ctx), (w::WB_MEM_ADDR, addr)],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_CT_ENABLE,
            u32::from(ct),
            &[(f::c_cq_cfg_ct_enable::CT_ENABLE, 1)],
        )?;
        Ok(Ct {
            n: ct,
            wb_host: wb.map(|m| m.host),
        })
    }

    /// TLE pool `pool` (`c_cq_cfg_tle_pool`): `num_reserved` of its own, at most `max_alloc`.
    pub fn set_tle_pool(
        &self,
        pool: u8,
        num_reserved: u16,
        max_alloc: u16,
    ) -> Result<(), HarnessError> {
        use f::c_cq_cfg_tle_pool as t;
        self.csr_write(
            csr::C_CQ_CFG_TLE_POOL,
            u32::from(pool),
            &[
                (t::NUM_RESERVED, u64::from(num_reserved)),
                (t::MAX_ALLOC, u64::from(max_alloc)),
            ],
        )
    }

    /// The shared TLE reserve (`c_cq_cfg_sts_tle_shared.num_shared`).
    pub fn set_tle_shared(&self, num_shared: u16) -> Result<(), HarnessError> {
        self.csr_write(
            csr::C_CQ_CFG_STS_TLE_SHARED,
            0,
            &[(
                f::c_cq_cfg_sts_tle_shared::NUM_SHARED,
                u64::from(num_shared),
            )],
        )
    }

    /// The ack counter of transmit CQ `n` (`CXI_OP_CQ_ACK_COUNTER`): its triggered
    /// operations still pending.
    pub fn ack_counter(&self, n: u16) -> Result<u64, HarnessError> {
        self.csr_field(
            csr::C_CQ_TXQ_ACK_CTR,
            u32::from(n),
            f::c_cq_txq_ack_ctr::MEM_Q_ACK_CTR,
        )
    }
}

/// Software's side of a counting event ([`Node::alloc_ct`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ct {
    /// CT number.
    pub n: u16,
    /// Host address of the write-back buffer, if any.
    pub wb_host: Option<u64>,
}

impl Ct {
    fn doorbell(&self, node: &Node, offset: u64, value: u64) -> Result<(), HarnessError> {
        let at = TOU_BASE + u64::from(self.n) * TOU_LAUNCH_PAGE_SIZE + offset;
        node.bar.write_u64(at, value).map_err(Into::into)
    }

    /// `cxi_ct_inc_success`: a doorbell store adding `v` to the success count.
    pub fn inc_success(&self, node: &Node, v: u64) -> Result<(), HarnessError> {
        self.doorbell(node, CT_INC_SUCCESS_OFFSET as u64, v)
    }

    /// `cxi_ct_inc_failure`.
    pub fn inc_failure(&self, node: &Node, v: u64) -> Result<(), HarnessError> {
        self.doorbell(node, CT_INC_FAILURE_OFFSET as u64, v)
    }

    /// `cxi_ct_reset_success`.
    pub fn reset_success(&self, node: &Node) -> Result<(), HarnessError> {
        self.doorbell(node, CT_RESET_SUCCESS_OFFSET as u64, 0)
    }

    /// `cxi_ct_reset_failure`.
    pub fn reset_failure(&self, node: &Node) -> Result<(), HarnessError> {
        self.doorbell(node, CT_RESET_FAILURE_OFFSET as u64, 0)
    }

    /// The write-back buffer as it is in host memory now.
    pub fn writeback(&self, node: &Node) -> Result<CtWriteback, HarnessError> {
        let host = self
            .wb_host
            .ok_or_else(|| HarnessError::Invalid("CT without write-back".into()))?;
        CtWriteback::decode(&node.read_host(host, 8)?)
            .map_err(|e| HarnessError::Invalid(e.to_string()))
    }

    /// Zero the write-back buffer (software clearing `ct_writeback` before waiting).
    pub fn clear_writeback(&self, node: &Node) -> Result<(), HarnessError> {
        match self.wb_host {
            Some(h) => node.write_host(h, &[0u8; 8]),
            None => Ok(()),
        }
    }
}
