//! The context every request handler runs in ([`Op`]): the device, its state (locked) and
//! the client asking, with the checks every handler shares (ownership, service limits,
//! VNIs, EQ references, mmap tokens).

use super::*;

/// The context every handler runs in.
pub(crate) struct Op<'a> {
    pub(crate) dev: &'a CxiDevice,
    pub(crate) st: &'a mut DevState,
    pub(crate) client: ClientId,
    /// The writing process's memory for lists a request names by address (`svc_list`,
    /// `rsrc_list`, `ule_offsets`); `None`: the client's [`UserSpace`].
    pub(crate) user: Option<&'a dyn crate::cassini::client::UserAccess>,
}

impl Op<'_> {
    pub(super) fn creds(&self) -> Credentials {
        self.st
            .clients
            .get(&self.client)
            .map(|c| c.creds)
            .unwrap_or_default()
    }

    /// `copy_to_user` of a list or an array a request names by address.
    pub(super) fn copy_out(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        match self.user {
            Some(u) => u.copy_to_user(addr, data),
            None => self.space()?.copy_to_user(addr, data).ok_or(Errno::Efault),
        }
    }

    pub(super) fn space(&self) -> Result<UserSpace, Errno> {
        self.st
            .clients
            .get(&self.client)
            .map(|c| c.space.clone())
            .ok_or(Errno::Eio)
    }

    pub(super) fn hw(&self) -> &CassHw {
        &self.dev.hw
    }

    pub(super) fn new_token(
        &mut self,
        size: u64,
        target: MapTarget,
        shared: &Arc<MapShared>,
    ) -> Result<MmInfo, Errno> {
        let c = self.st.clients.get_mut(&self.client).ok_or(Errno::Eio)?;
        let offset = c.next_mmap;
        let step = size
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Einval)?;
        c.next_mmap = c.next_mmap.checked_add(step).ok_or(Errno::Enospc)?;
        c.mmaps.insert(
            offset,
            MmapEntry {
                used: false,
                size,
                target,
                shared: Arc::clone(shared),
            },
        );
        Ok(MmInfo { offset, size })
    }

    pub(super) fn lni(&self, id: u32) -> Result<&Lni, Errno> {
        Ok(owned!(self.st.lnis, id, self.client))
    }

    pub(super) fn service_of(&self, lni: u32) -> Result<&Service, Errno> {
        let svc = self.lni(lni)?.svc;
        self.st.services.get(&svc).ok_or(Errno::Einval)
    }

    /// A VNI the caller may use for an object of `lni` (a domain, a reservation, a CP).
    /// The real driver authorizes by profile: a VNI belongs to the transmit/receive profiles
    /// of the enabled services that hold it, device-wide, and the caller must be a member of
    /// one of them (`cxi_valid_vni`, `cxi_dev_get_tx_profile`; the LNI's own service does not
    /// matter). `EINVAL` for an invalid VNI (0 or above 16 bits) or one no enabled service
    /// holds, `EPERM` when the caller is a member of none of them. `lni` must be the
    /// caller's.
    pub(super) fn check_vni(&self, lni: u32, vni: u32) -> Result<(), Errno> {
        self.lni(lni)?;
        if vni == 0 || vni > 0xffff {
            return Err(Errno::Einval);
        }
        let creds = self.creds();
        let mut held = false;
        for s in self.st.services.values() {
            if s.desc.bits & svcbits::ENABLE == 0 || !svc_holds_vni(s, vni) {
                continue;
            }
            held = true;
            if svc_admits(s, &creds) {
                return Ok(());
            }
        }
        Err(if held { Errno::Eperm } else { Errno::Einval })
    }

    /// A service's limit on `kind` (resource_limits), checked before an allocation.
    pub(super) fn check_limit(&self, lni: u32, kind: usize) -> Result<(), Errno> {
        let s = self.service_of(lni)?;
        if s.desc.bits & svcbits::RESOURCE_LIMITS != 0
            && s.in_use.get(kind).copied().unwrap_or(0)
                >= s.desc.limits.get(kind).map_or(0, |l| l.max)
        {
            return Err(Errno::Enospc);
        }
        Ok(())
    }

    pub(super) fn eq_ref(&mut self, eq: u32) -> Result<(), Errno> {
        if eq == NONE {
            return Ok(());
        }
        let e = owned_mut!(self.st.eqs, eq, self.client);
        e.refs += 1;
        Ok(())
    }

    pub(super) fn check_eq(&self, eq: u32) -> Result<(), Errno> {
        if eq != NONE {
            owned!(self.st.eqs, eq, self.client);
        }
        Ok(())
    }
}

/// Whether QoS profile `profile` (`active_qos_profile`, cxi_qos_profiles.c) configures
/// traffic class `tc` with type `tc_type` for user traffic (`cass_tc_find`). Classes: 0
/// DEDICATED_ACCESS, 1 LOW_LATENCY, 2 BULK_DATA, 3 BEST_EFFORT; types: 0 DEFAULT, 1 HRP, 2
/// RESTRICTED, 3 COLL_LEAF (a type exists where the profile gives it a DSCP). HPC (1) shares
/// LOW_LATENCY's PCP with PCT control traffic, which `disable_user_pct_tc_usage` (default
/// on) keeps from users; LL_BE_BD_ET (2, the module's default) and LL_BE_BD_ET1_ET2 (3) have
/// no DEDICATED_ACCESS. Other classes (Ethernet) are not decided here.
pub fn qos_allows(profile: u8, tc: u32, tc_type: u32) -> bool {
    let types: &[u32] = match (profile, tc) {
        (1, 0) | (1, 2) | (2 | 3, 2) => &[0],
        (1, 3) => &[0, 1, 2, 3],
        (2 | 3, 1) => &[0, 3],
        (2 | 3, 3) => &[0, 1, 2],
        (_, 4..) => return true,
        _ => &[],
    };
    types.contains(&tc_type)
}

/// `CXI_TC_MAX`.
pub(super) fn lim_tc_max() -> u32 {
    firmware_spec::cassini::le::CXI_TC_MAX as u32
}

/// `C_EQ_RESERVED_EVENT_SLOTS`.
pub(super) fn lim_eq_reserved() -> u32 {
    firmware_spec::cassini::status::C_EQ_RESERVED_EVENT_SLOTS as u32
}

const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<CxiDevice>();
};
