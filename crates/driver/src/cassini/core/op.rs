//! The context every request handler runs in ([`Op`]): the device, its state (locked) and
//! the client asking, with the checks every handler shares (ownership, service limits,
//! VNIs, EQ references, mmap tokens).

use super::*;

/// The context every handler runs in.
pub(crate) struct Op<'a> {
    pub(crate) dev: &'a CxiDevice,
    pub(crate) st: &'a mut DevState,
    pub(crate) client: ClientId,
}

impl Op<'_> {
    pub(super) fn creds(&self) -> Credentials {
        self.st
            .clients
            .get(&self.client)
            .map(|c| c.creds)
            .unwrap_or_default()
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

    pub(super) fn check_vni(&self, lni: u32, vni: u32) -> Result<(), Errno> {
        if vni > 0xffff {
            return Err(Errno::Einval);
        }
        let s = self.service_of(lni)?;
        if s.desc.bits & svcbits::RESTRICTED_VNIS != 0 {
            let n = usize::from(s.desc.num_vld_vnis).min(lim::CXI_SVC_MAX_VNIS);
            if !s.desc.vnis[..n].iter().any(|v| u32::from(*v) == vni) {
                return Err(Errno::Eperm);
            }
        }
        Ok(())
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
