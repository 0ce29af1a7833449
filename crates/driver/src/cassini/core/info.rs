//! Device information and the CSR region (`DEV_INFO_GET`, properties, `MAP_CSRS`).

use super::*;

impl Op<'_> {
    // ---- Device information, CSRs ----

    pub(crate) fn map_csrs(&mut self) -> Result<MapCsrsResp, Errno> {
        let c = self.st.clients.get_mut(&self.client).ok_or(Errno::Eio)?;
        if c.csrs_mapped {
            return Err(Errno::Ealready);
        }
        c.csrs_mapped = true;
        let shared = MapShared::new();
        let csr = self.new_token(
            CSR_SIZE,
            MapTarget::Mmio {
                offset: hw::csr_region_offset(),
                len: CSR_SIZE,
            },
            &shared,
        )?;
        Ok(MapCsrsResp { csr })
    }

    pub(super) fn rsrc_limits() -> [Limits; 8] {
        let mut l = [Limits::default(); 8];
        for (x, t) in l.iter_mut().zip(device_limits()) {
            x.max = t;
        }
        l
    }

    pub(crate) fn dev_properties(&self) -> PropertiesInfo {
        let i = &self.dev.info;
        PropertiesInfo {
            nid: i.nid,
            pid_bits: i.pid_bits.get(),
            pid_count: i.pid_count,
            pid_granule: i.pid_granule,
            min_free_shift: 0,
            rdzv_get_idx: i.rdzv_get_idx,
            rsrcs: Self::rsrc_limits(),
            device_rev: u32::from(i.rev),
            device_proto: u32::from(i.proto),
            device_platform: i.platform as u32,
            cassini_version: u32::from(i.version.value()),
            rdzv_get_en: u8::from(self.dev.config.rdzv_get_en),
            amo_remap_to_pcie_fadd: -1,
            ..PropertiesInfo::default()
        }
    }

    pub(crate) fn dev_info(&self) -> DevInfoUse {
        let i = &self.dev.info;
        let l = device_limits();
        let mut fru = [0u8; 16];
        let name = b"nicemu cassini";
        fru[..name.len()].copy_from_slice(name);
        DevInfoUse {
            nid: i.nid,
            pid_bits: i.pid_bits.get(),
            pid_count: i.pid_count,
            pid_granule: i.pid_granule,
            min_free_shift: 0,
            rdzv_get_idx: i.rdzv_get_idx,
            vendor_id: u32::from(i.id.vendor),
            device_id: u32::from(i.id.device),
            device_rev: u32::from(i.rev),
            device_proto: u32::from(i.proto),
            device_platform: i.platform as u32,
            pct_eq: 0,
            uc_nic: -1,
            link_mtu: lim::HPC_LINK_MTU as u64,
            link_speed: 200_000,
            link_state: 1,
            num_ptes: l[rsrc::PTE],
            num_txqs: l[rsrc::TXQ],
            num_tgqs: l[rsrc::TGQ],
            num_eqs: l[rsrc::EQ],
            num_cts: l[rsrc::CT],
            num_acs: l[rsrc::AC],
            num_tles: l[rsrc::TLE],
            num_les: l[rsrc::LE],
            fru_description: fru,
            cassini_version: u32::from(i.version.value()),
            system_type_identifier: match i.version.generation() {
                Generation::Cassini1 => 1,
                Generation::Cassini2 => 2,
            },
            ..DevInfoUse::default()
        }
    }
}
