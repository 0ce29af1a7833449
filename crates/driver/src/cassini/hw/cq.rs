//! Communication profiles (cxi_cp), command queues (cass_cq.c) and the pools of
//! triggered-list entries (cass_tle.c).

use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::limits;

use super::access::{CassHw, HwError};

/// Settings of one transmit or target command queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CqConfig {
    /// Bus address of the ring (4 KiB aligned).
    pub ring: u64,
    /// Number of 64 B slots (a power of two).
    pub slots: u32,
    /// EQ for COMMAND_FAILURE events (0 = none).
    pub eq: u32,
    /// Resource group of the owning LNI.
    pub rgid: u32,
    /// Initial LCID (transmit only).
    pub lcid: u32,
    /// Status write-back policy (`enum cxi_cq_update_policy`).
    pub policy: u8,
    /// AC the ring address is translated through.
    pub acid: u32,
    /// Statistics counter pool.
    pub stat_cnt_pool: u8,
    /// Trigger queue (transmit only).
    pub trig: bool,
    /// TLE pool of the owning service (transmit only; `mem_q_pfq`, low 2 bits).
    pub tle_pool: u8,
}

impl CassHw {
    /// Program CP table entry `cp`: VNI and traffic class, valid.
    pub fn cp_set(&self, cp: u32, vni: u32, tc: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_CFG_CP_FL_TABLE,
            cp,
            &[(f::c_cq_cfg_cp_fl_table::TC, u64::from(tc))],
        )?;
        self.write_fields(
            csr::C_CQ_CFG_CP_TABLE,
            cp,
            &[
                (f::c_cq_cfg_cp_table::VNI, u64::from(vni)),
                (f::c_cq_cfg_cp_table::VALID, 1),
            ],
        )
    }

    /// Invalidate CP table entry `cp`.
    pub fn cp_clear(&self, cp: u32) -> Result<(), HwError> {
        self.reset_entry(csr::C_CQ_CFG_CP_TABLE, cp)?;
        self.reset_entry(csr::C_CQ_CFG_CP_FL_TABLE, cp)
    }

    /// Point LCID `lcid` of resource group `rgid` at CP `cp`.
    pub fn lcid_set(&self, rgid: u32, lcid: u32, cp: u32) -> Result<(), HwError> {
        let idx = rgid * limits::C_COMM_PROF_PER_CQ as u32 + lcid;
        self.write_fields(
            csr::C_CQ_CFG_CID_ARRAY,
            idx,
            &[(f::c_cq_cfg_cid_array::CID, u64::from(cp))],
        )
    }

    /// Clear every LCID and LAC of resource group `rgid`.
    pub fn rgid_clear(&self, rgid: u32) -> Result<(), HwError> {
        for lcid in 0..limits::C_COMM_PROF_PER_CQ as u32 {
            self.reset_entry(
                csr::C_CQ_CFG_CID_ARRAY,
                rgid * limits::C_COMM_PROF_PER_CQ as u32 + lcid,
            )?;
        }
        for lac in 0..limits::C_NUM_LACS as u32 {
            self.lac_set(rgid, lac, 0)?;
        }
        Ok(())
    }

    /// Program and enable transmit CQ `n`.
    pub fn txq_enable(&self, n: u32, c: &CqConfig) -> Result<(), HwError> {
        use f::c_cq_txq_base_table as b;
        self.write_fields(
            csr::C_CQ_TXQ_BASE_TABLE,
            n,
            &[
                (b::MEM_Q_EQ, u64::from(c.eq)),
                (b::MEM_Q_BASE, c.ring >> 12),
                (b::MEM_Q_MAX_PTR, u64::from(c.slots.saturating_sub(1))),
                (b::MEM_Q_RGID, u64::from(c.rgid)),
                (b::MEM_Q_STAT_CNT_POOL, u64::from(c.stat_cnt_pool)),
                (b::MEM_Q_PFQ, u64::from(c.tle_pool)),
                (b::MEM_Q_LCID, u64::from(c.lcid)),
                (b::MEM_Q_ACID, u64::from(c.acid)),
                (b::MEM_Q_POLICY, u64::from(c.policy)),
            ],
        )?;
        self.write_fields(
            csr::C_CQ_TXQ_TC_TABLE,
            n,
            &[(f::c_cq_txq_tc_table::MEM_Q_TRIG, u64::from(c.trig))],
        )?;
        self.write_fields(
            csr::C_CQ_TXQ_ENABLE,
            n,
            &[(f::c_cq_txq_enable::TXQ_ENABLE, 1)],
        )
    }

    /// Disable transmit CQ `n` and clear its configuration.
    pub fn txq_disable(&self, n: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_TXQ_ENABLE,
            n,
            &[(f::c_cq_txq_enable::TXQ_ENABLE, 0)],
        )?;
        self.reset_entry(csr::C_CQ_TXQ_TC_TABLE, n)?;
        self.reset_entry(csr::C_CQ_TXQ_BASE_TABLE, n)
    }

    /// Program and enable target CQ `n`.
    pub fn tgq_enable(&self, n: u32, c: &CqConfig) -> Result<(), HwError> {
        use f::c_cq_tgq_table as b;
        self.write_fields(
            csr::C_CQ_TGQ_TABLE,
            n,
            &[
                (b::MEM_Q_EQ, u64::from(c.eq)),
                (b::MEM_Q_BASE, c.ring >> 12),
                (b::MEM_Q_MAX_PTR, u64::from(c.slots.saturating_sub(1))),
                (b::MEM_Q_RGID, u64::from(c.rgid)),
                (b::MEM_Q_STAT_CNT_POOL, u64::from(c.stat_cnt_pool)),
                (b::MEM_Q_ACID, u64::from(c.acid)),
                (b::MEM_Q_POLICY, u64::from(c.policy)),
            ],
        )?;
        self.write_fields(
            csr::C_CQ_TGQ_ENABLE,
            n,
            &[(f::c_cq_tgq_enable::TGQ_ENABLE, 1)],
        )
    }

    /// Disable target CQ `n` and clear its configuration.
    pub fn tgq_disable(&self, n: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_TGQ_ENABLE,
            n,
            &[(f::c_cq_tgq_enable::TGQ_ENABLE, 0)],
        )?;
        self.reset_entry(csr::C_CQ_TGQ_TABLE, n)
    }

    /// The acknowledgement counter of a CQ (`tx`: transmit, else target).
    pub fn cq_ack_counter(&self, tx: bool, n: u32) -> Result<u32, HwError> {
        let v = if tx {
            self.read_field(csr::C_CQ_TXQ_ACK_CTR, n, f::c_cq_txq_ack_ctr::MEM_Q_ACK_CTR)?
        } else {
            self.read_field(csr::C_CQ_TGQ_ACK_CTR, n, f::c_cq_tgq_ack_ctr::MEM_Q_ACK_CTR)?
        };
        Ok(v as u32)
    }

    /// LE pool `pool` of every PE: `reserved` LEs kept for it, at most `max` in use
    /// (`c_lpe_cfg_pe_le_pools`, cass_svc.c for a service that reserves LEs).
    pub fn le_pool_set(&self, pool: u32, reserved: u32, max: u32) -> Result<(), HwError> {
        for pe in 0..limits::C_PE_COUNT as u32 {
            let idx = pe * limits::LE_POOLS_PER_PE as u32 + pool;
            self.write_fields(
                csr::C_LPE_CFG_PE_LE_POOLS,
                idx,
                &[
                    (f::c_lpe_cfg_pe_le_pools::NUM_RESERVED, u64::from(reserved)),
                    (f::c_lpe_cfg_pe_le_pools::MAX_ALLOC, u64::from(max)),
                ],
            )?;
        }
        Ok(())
    }

    /// Configure TLE pool `pool`: `num_reserved` entries of its own, at most `max_alloc`.
    pub fn tle_pool_set(
        &self,
        pool: u32,
        num_reserved: u32,
        max_alloc: u32,
    ) -> Result<(), HwError> {
        use f::c_cq_cfg_tle_pool as t;
        self.write_fields(
            csr::C_CQ_CFG_TLE_POOL,
            pool,
            &[
                (t::NUM_RESERVED, u64::from(num_reserved)),
                (t::MAX_ALLOC, u64::from(max_alloc)),
            ],
        )
    }

    /// Set the shared TLE reserve (`c_cq_cfg_sts_tle_shared.num_shared`).
    pub fn tle_shared_set(&self, num_shared: u32) -> Result<(), HwError> {
        self.update_fields(
            csr::C_CQ_CFG_STS_TLE_SHARED,
            0,
            &[(
                f::c_cq_cfg_sts_tle_shared::NUM_SHARED,
                u64::from(num_shared),
            )],
        )
    }
}
