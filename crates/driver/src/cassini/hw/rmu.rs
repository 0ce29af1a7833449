//! The RMU's VNI and portal TCAMs (cass_rmu.c).

use firmware_spec::cassini::csr::{self, Field, fields as f};

use super::access::{CassHw, HwError, mask};

/// What a portal TCAM entry matches.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PortalKey {
    /// `index_ext` (5 bits).
    pub index_ext: u32,
    /// `endpoint_defined` (12 bits), or the multicast id (13 bits) when `is_multicast`.
    pub endpoint: u32,
    /// Multicast entry.
    pub is_multicast: bool,
    /// The VNI list entry.
    pub vni_list_idx: u32,
}

impl CassHw {
    /// Program VNI list entry `i` to match exactly `vni` (writing `_y` validates it).
    pub fn rmu_vni_set(&self, i: u32, vni: u32) -> Result<(), HwError> {
        let w = f::c_rmu_cfg_vni_list_x::VNI.width;
        let v = u64::from(vni) & mask(w);
        self.write_fields(
            csr::C_RMU_CFG_VNI_LIST_X,
            i,
            &[(f::c_rmu_cfg_vni_list_x::VNI, v)],
        )?;
        self.write_fields(
            csr::C_RMU_CFG_VNI_LIST_Y,
            i,
            &[(f::c_rmu_cfg_vni_list_y::VNI, !v & mask(w))],
        )
    }

    /// Invalidate VNI list entry `i`.
    pub fn rmu_vni_clear(&self, i: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_RMU_CFG_VNI_LIST_INVALIDATE,
            i,
            &[(f::c_rmu_cfg_vni_list_invalidate::INVALIDATE, 1)],
        )
    }

    /// Program portal TCAM entry `j` to match `key` exactly and steer it to PtlTE `ptlte`.
    pub fn rmu_portal_set(&self, j: u32, key: &PortalKey, ptlte: u32) -> Result<(), HwError> {
        use f::c_rmu_cfg_portal_list_x as x;
        let t = csr::C_RMU_CFG_PORTAL_INDEX_TABLE;
        let slot = Self::field_named(t, &format!("n{}_phys_portal_table_idx", j % 4))?;
        self.update_fields(t, j / 4, &[(slot, u64::from(ptlte))])?;
        // The key and its complement over the fields the key uses (x = 1 requires a one,
        // y = 1 requires a zero).
        let key_fields: [(&Field, u64); 4] = [
            (x::INDEX_EXT, u64::from(key.index_ext)),
            (
                if key.is_multicast {
                    x::MULTICAST_ID
                } else {
                    x::ENDPOINT_DEFINED
                },
                u64::from(key.endpoint),
            ),
            (x::IS_MULTICAST, u64::from(key.is_multicast)),
            (x::VNI_LIST_IDX, u64::from(key.vni_list_idx)),
        ];
        let mut xb = csr::C_RMU_CFG_PORTAL_LIST_X.reset_bytes();
        let mut yb = csr::C_RMU_CFG_PORTAL_LIST_Y.reset_bytes();
        for (fld, v) in key_fields {
            let v = v & fld.value_mask();
            fld.set(&mut xb, v);
            fld.set(&mut yb, !v & fld.value_mask());
        }
        self.write_entry(csr::C_RMU_CFG_PORTAL_LIST_X, j, &xb)?;
        self.write_entry(csr::C_RMU_CFG_PORTAL_LIST_Y, j, &yb)
    }

    /// Invalidate portal TCAM entry `j`.
    pub fn rmu_portal_clear(&self, j: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_RMU_CFG_PORTAL_LIST_INVALIDATE,
            j,
            &[(f::c_rmu_cfg_portal_list_invalidate::INVALIDATE, 1)],
        )
    }
}
