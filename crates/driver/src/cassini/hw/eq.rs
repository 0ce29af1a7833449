//! Event queues (cass_eq.c).

use firmware_spec::cassini::csr::{self, fields as f};

use super::access::{CassHw, HwError};

/// Settings of one event queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EqConfig {
    /// Resource group of the owning LNI (`c_cq_cfg_eq_rgid_table`): commands of queues of
    /// other groups may not name this EQ.
    pub rgid: u32,
    /// Buffer address (IOVA in `acid`, 4 KiB aligned).
    pub addr: u64,
    /// Buffer size in bytes (whole 4 KiB pages).
    pub len: u64,
    /// AC of the buffer.
    pub acid: u32,
    /// Event slots reserved for flow control.
    pub reserved_fc: u32,
    /// MSI-X vector for events.
    pub event_irq: Option<u32>,
    /// MSI-X vector for status write-backs.
    pub status_irq: Option<u32>,
    /// Write the status block on drops.
    pub drop_status: bool,
    /// Number of fill thresholds (0..=4).
    pub thresh_count: u32,
    /// First threshold, percent.
    pub thresh_base: u32,
    /// Threshold step, percent.
    pub thresh_delta: u32,
    /// Event-combining latency tolerance (driver units).
    pub latency_tolerance: u32,
    /// Long format for initiator events.
    pub init_long: bool,
    /// Long format for target events.
    pub tgt_long: bool,
}

impl CassHw {
    /// Program and enable EQ `n`.
    pub fn eq_enable(&self, n: u32, c: &EqConfig) -> Result<(), HwError> {
        use f::c_ee_cfg_eq_descriptor as d;
        let t = csr::C_EE_CFG_EQ_DESCRIPTOR;
        let mut bytes = t.reset_bytes();
        d::RESERVED_FC.set(&mut bytes, u64::from(c.reserved_fc));
        if let Some(v) = c.event_irq {
            d::EVENT_INT_EN.set(&mut bytes, 1);
            d::EVENT_INT_IDX.set(&mut bytes, u64::from(v));
        }
        if let Some(v) = c.status_irq {
            d::EQ_STS_INT_EN.set(&mut bytes, 1);
            d::EQ_STS_INT_IDX.set(&mut bytes, u64::from(v));
        }
        d::LATENCY_TOLERANCE.set(&mut bytes, u64::from(c.latency_tolerance));
        d::EQ_STS_NUM_THLD.set(&mut bytes, u64::from(c.thresh_count));
        d::EQ_STS_THLD_BASE.set(&mut bytes, u64::from(c.thresh_base));
        d::EQ_STS_THLD_OFFST.set(&mut bytes, u64::from(c.thresh_delta));
        d::EQ_STS_DROPPED_EN.set(&mut bytes, u64::from(c.drop_status));
        d::BUFFER_A_ADDR.set(&mut bytes, c.addr >> 12);
        d::BUFFER_A_SIZE.set(&mut bytes, c.len / 4096);
        d::BUFFER_A_EN.set(&mut bytes, 1);
        d::ACID.set(&mut bytes, u64::from(c.acid));
        d::EQ_ENABLE.set(&mut bytes, 0);
        self.write_fields(
            csr::C_CQ_CFG_EQ_RGID_TABLE,
            n,
            &[(f::c_cq_cfg_eq_rgid_table::RGID, u64::from(c.rgid))],
        )?;
        self.set_long_format(n, c.init_long, c.tgt_long)?;
        // The software read pointer starts at the first event (byte 64, `rd_ptr` in 64 B units).
        self.write_fields(
            csr::C_EE_CFG_EQ_SW_STATE,
            n,
            &[(f::c_ee_cfg_eq_sw_state::RD_PTR, 1)],
        )?;
        // Everything but the enable first, then the qword holding `eq_enable` (qword 0).
        for qw in (1..Self::qwords(t)).rev() {
            let at = (qw * 8) as usize;
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            self.write_qword(t, n, qw, u64::from_le_bytes(b))?;
        }
        d::EQ_ENABLE.set(&mut bytes, 1);
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[..8]);
        self.write_qword(t, n, 0, u64::from_le_bytes(b))
    }

    /// Change the flow-control reservation of EQ `n`.
    pub fn eq_set_reserved_fc(&self, n: u32, reserved_fc: u32) -> Result<(), HwError> {
        self.update_fields(
            csr::C_EE_CFG_EQ_DESCRIPTOR,
            n,
            &[(
                f::c_ee_cfg_eq_descriptor::RESERVED_FC,
                u64::from(reserved_fc),
            )],
        )
    }

    /// Disable EQ `n` and clear its configuration.
    pub fn eq_disable(&self, n: u32) -> Result<(), HwError> {
        self.update_fields(
            csr::C_EE_CFG_EQ_DESCRIPTOR,
            n,
            &[(f::c_ee_cfg_eq_descriptor::EQ_ENABLE, 0)],
        )?;
        self.reset_entry(csr::C_EE_CFG_EQ_DESCRIPTOR, n)?;
        self.reset_entry(csr::C_EE_CFG_EQ_SW_STATE, n)?;
        self.reset_entry(csr::C_CQ_CFG_EQ_RGID_TABLE, n)?;
        self.set_long_format(n, false, false)
    }

    /// `c_ee_cfg_long_evnt_ovr_table`: entry n/32, field `n{n%32}_use_long_fmt` (2 bits; our
    /// reading: bit 0 initiator events, bit 1 target events).
    fn set_long_format(&self, n: u32, init: bool, tgt: bool) -> Result<(), HwError> {
        let t = csr::C_EE_CFG_LONG_EVNT_OVR_TABLE;
        let fld = Self::field_named(t, &format!("n{}_use_long_fmt", n % 32))?;
        self.update_fields(t, n / 32, &[(fld, u64::from(init) | u64::from(tgt) << 1)])
    }
}
