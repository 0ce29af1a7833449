//! Communication profiles (`cxil_alloc_cp`, `cxil_alloc_trig_cp`): a VNI and traffic class a
//! transmit CQ sends with, named by an LCID.

use std::sync::Arc;

use driver::cassini::uapi::{CpAllocCmd, CpFreeCmd, CpModifyCmd, TrigCpAllocCmd};
use firmware_spec::cassini::le::{TcType, TrafficClass, TrigCp};

use super::error::Result;
use super::lni::{Lni, LniInner};

/// A communication profile (`struct cxi_cp`). Freed on drop.
pub struct Cp {
    lni: Arc<LniInner>,
    hndl: u32,
    lcid: u32,
    vni: u32,
    tc: TrafficClass,
    tc_type: TcType,
}

impl std::fmt::Debug for Cp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cp")
            .field("lcid", &self.lcid)
            .field("vni", &self.vni)
            .field("tc", &self.tc)
            .finish()
    }
}

impl Lni {
    /// `cxil_alloc_cp(lni, vni, tc, tc_type)`: a profile for ordinary transmit CQs.
    pub fn alloc_cp(&self, vni: u32, tc: TrafficClass, tc_type: TcType) -> Result<Cp> {
        let r = self.dev().client.call(&CpAllocCmd {
            lni: self.id(),
            vni,
            tc: tc as u32,
            tc_type: tc_type as u32,
            ..CpAllocCmd::default()
        })?;
        Ok(Cp {
            lni: Arc::clone(&self.inner),
            hndl: r.cp_hndl,
            lcid: r.lcid,
            vni,
            tc,
            tc_type,
        })
    }

    /// `cxil_alloc_trig_cp(lni, vni, tc, tc_type, kind)`: a profile for trigger CQs
    /// (`TrigCp::TrigLcid` gives LCID 0, which trigger CQs must use).
    pub fn alloc_trig_cp(
        &self,
        vni: u32,
        tc: TrafficClass,
        tc_type: TcType,
        kind: TrigCp,
    ) -> Result<Cp> {
        let r = self.dev().client.call(&TrigCpAllocCmd {
            lni: self.id(),
            vni,
            tc: tc as u32,
            tc_type: tc_type as u32,
            cp_type: kind as u32,
            ..TrigCpAllocCmd::default()
        })?;
        Ok(Cp {
            lni: Arc::clone(&self.inner),
            hndl: r.cp_hndl,
            lcid: r.lcid,
            vni,
            tc,
            tc_type,
        })
    }
}

impl Cp {
    /// The LCID CQs and CQ_LCID commands name.
    pub fn lcid(&self) -> u32 {
        self.lcid
    }

    /// The VNI.
    pub fn vni(&self) -> u32 {
        self.vni
    }

    /// The traffic class.
    pub fn tc(&self) -> TrafficClass {
        self.tc
    }

    /// The traffic class type.
    pub fn tc_type(&self) -> TcType {
        self.tc_type
    }

    /// `cxil_modify_cp`: change the VNI of a profile nobody else shares.
    pub fn modify(&mut self, vni: u32) -> Result<()> {
        self.lni.dev.client.call(&CpModifyCmd {
            cp_hndl: self.hndl,
            vni,
            ..CpModifyCmd::default()
        })?;
        self.vni = vni;
        Ok(())
    }
}

impl Drop for Cp {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&CpFreeCmd {
            cp_hndl: self.hndl,
            ..CpFreeCmd::default()
        }) {
            tracing::warn!(cp = self.hndl, error = %e, "CP_FREE failed");
        }
    }
}
