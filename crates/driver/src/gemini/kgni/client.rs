//! An open file of `/dev/kgniN`.

use super::*;

/// An open file of `/dev/kgniN`. Dropping it closes the file: every object the client made
/// is released and its mappings are revoked.
pub struct KgniClient {
    pub(super) dev: Arc<Kgni>,
    pub(super) id: ClientId,
    pub(super) privileged: bool,
    pub(super) space: UserSpace,
}

impl fmt::Debug for KgniClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KgniClient")
            .field("id", &self.id)
            .field("privileged", &self.privileged)
            .finish()
    }
}

impl Drop for KgniClient {
    fn drop(&mut self) {
        self.dev.close(self.id);
    }
}

impl KgniClient {
    /// The device.
    pub fn device(&self) -> &Arc<Kgni> {
        &self.dev
    }

    /// This client's id.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The client's address space.
    pub fn space(&self) -> &UserSpace {
        &self.space
    }

    /// Issue one request (the ioctl).
    pub fn request(&self, req: Request) -> Result<Response, KgniError> {
        let r = self.dev.handle(self, req);
        if r.is_err() {
            self.dev.note_refused();
        }
        r
    }

    fn expect<T>(
        &self,
        req: Request,
        f: impl FnOnce(Response) -> Option<T>,
    ) -> Result<T, KgniError> {
        f(self.request(req)?).ok_or(KgniError::InvalidState("unexpected response"))
    }

    /// `ConfigureJob`.
    pub fn configure_job(&self, job: JobConfig) -> Result<(), KgniError> {
        self.request(Request::ConfigureJob(job)).map(|_| ())
    }

    /// `CdmCreate`.
    pub fn cdm_create(
        &self,
        inst_id: u32,
        ptag: u8,
        cookie: u32,
        modes: u32,
    ) -> Result<CdmId, KgniError> {
        self.expect(
            Request::CdmCreate {
                inst_id,
                ptag,
                cookie,
                modes,
            },
            |r| match r {
                Response::Cdm(c) => Some(c),
                _ => None,
            },
        )
    }

    /// `CdmAttach` to this device.
    pub fn cdm_attach(&self, cdm: CdmId) -> Result<AttachInfo, KgniError> {
        self.expect(Request::CdmAttach { cdm, device_id: -1 }, |r| match r {
            Response::Attached(a) => Some(a),
            _ => None,
        })
    }

    /// `CqCreate`.
    pub fn cq_create(
        &self,
        cdm: CdmId,
        entry_count: u32,
        delay_count: u32,
        mode: CqMode,
    ) -> Result<CqInfo, KgniError> {
        self.expect(
            Request::CqCreate {
                cdm,
                entry_count,
                delay_count,
                mode: mode.bits(),
            },
            |r| match r {
                Response::Cq(c) => Some(c),
                _ => None,
            },
        )
    }

    /// `MemRegister`.
    pub fn mem_register(
        &self,
        cdm: CdmId,
        addr: u64,
        len: u64,
        dst_cq: Option<CqId>,
        flags: MemFlags,
    ) -> Result<MemHandle, KgniError> {
        self.expect(
            Request::MemRegister {
                cdm,
                addr,
                len,
                dst_cq,
                flags: flags.bits(),
            },
            |r| match r {
                Response::MemHandle(h) => Some(h),
                _ => None,
            },
        )
    }

    /// `MemDeregister`.
    pub fn mem_deregister(&self, cdm: CdmId, handle: MemHandle) -> Result<(), KgniError> {
        self.request(Request::MemDeregister { cdm, handle })
            .map(|_| ())
    }

    /// `EpCreate`.
    pub fn ep_create(&self, cdm: CdmId, cq: Option<CqId>) -> Result<EpId, KgniError> {
        self.expect(Request::EpCreate { cdm, cq }, |r| match r {
            Response::Ep(e) => Some(e),
            _ => None,
        })
    }

    /// `EpBind`.
    pub fn ep_bind(&self, ep: EpId, remote_addr: u32, remote_id: u32) -> Result<(), KgniError> {
        self.request(Request::EpBind {
            ep,
            remote_addr,
            remote_id,
        })
        .map(|_| ())
    }

    /// `PostRdma`.
    pub fn post_rdma(&self, ep: EpId, desc: PostDescriptor) -> Result<PostInfo, KgniError> {
        self.expect(
            Request::PostRdma {
                ep,
                desc: Box::new(desc),
            },
            |r| match r {
                Response::Posted(p) => Some(p),
                _ => None,
            },
        )
    }

    /// `EpPostData` / `EpPostDataWId`.
    pub fn post_data(
        &self,
        ep: EpId,
        id: Option<u64>,
        data: &[u8],
        out_len: usize,
    ) -> Result<(), KgniError> {
        self.request(Request::EpPostData {
            ep,
            id,
            data: data.to_vec(),
            out_len,
        })
        .map(|_| ())
    }

    /// `EpPostDataTest`.
    pub fn post_data_test(&self, ep: EpId) -> Result<DatagramResult, KgniError> {
        self.expect(Request::PostDataTest { ep }, |r| match r {
            Response::Datagram(d) => Some(d),
            _ => None,
        })
    }

    /// `EpPostDataWait`.
    pub fn post_data_wait(
        &self,
        ep: EpId,
        timeout: Option<Duration>,
    ) -> Result<DatagramResult, KgniError> {
        self.expect(Request::PostDataWait { ep, timeout }, |r| match r {
            Response::Datagram(d) => Some(d),
            _ => None,
        })
    }

    /// `Mmap`.
    pub fn mmap(&self, token: MmapToken) -> Result<Mapping, KgniError> {
        self.expect(Request::Mmap { token }, |r| match r {
            Response::Mapping(m) => Some(m),
            _ => None,
        })
    }
}
