//! The client side of the uAPI: an open device file. [`Client::write`] is the in-process
//! `write(fd, &cmd, sizeof cmd)`: it checks the request the way the driver's `dispatch()`
//! does (opcode range, handler present, exact length, admin-only), runs it, and copies the
//! response into the caller's buffer. [`Client::mmap`] maps a token handed out by an alloc
//! response. Dropping (or [`Client::close`]-ing) a client releases everything it held.

use std::sync::Arc;

use emu_core::mmio::{Mmio, MmioError};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::core::{ClientId, Credentials, CxiDevice, MapTarget, Op};
use super::uapi::*;
use crate::mem::{MapShared, MemError, MemWindow, UserMemory, UserSpace};
use crate::pci::WaitObject;

/// A window of BAR0 handed to a client by `mmap` (a launch page, an EE page, a CT doorbell
/// page, or the CSR region). Accesses beyond the window fail; after the object behind it is
/// freed every access fails with [`MmioError::DeviceGone`].
#[derive(Clone)]
pub struct MmioWindow {
    bar: Arc<dyn Mmio>,
    base: u64,
    len: u64,
    shared: Arc<MapShared>,
}

impl std::fmt::Debug for MmioWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmioWindow")
            .field("base", &format_args!("{:#x}", self.base))
            .field("len", &format_args!("{:#x}", self.len))
            .field("revoked", &self.shared.is_revoked())
            .finish()
    }
}

impl MmioWindow {
    fn check(&self, offset: u64, width: usize) -> Result<u64, MmioError> {
        if self.shared.is_revoked() {
            return Err(MmioError::DeviceGone);
        }
        match offset.checked_add(width as u64) {
            Some(end) if end <= self.len => Ok(self.base + offset),
            _ => Err(MmioError::OutOfRange {
                offset,
                width,
                size: self.len,
            }),
        }
    }

    /// BAR0 offset of the window.
    pub fn bar_offset(&self) -> u64 {
        self.base
    }

    /// Whether the object behind the window was freed.
    pub fn is_revoked(&self) -> bool {
        self.shared.is_revoked()
    }
}

impl Mmio for MmioWindow {
    fn size(&self) -> u64 {
        self.len
    }
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        let at = self.check(offset, data.len())?;
        self.bar.read(at, data)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        let at = self.check(offset, data.len())?;
        self.bar.write(at, data)
    }
    fn write_burst(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        let at = self.check(offset, data.len())?;
        self.bar.write_burst(at, data)
    }
}

/// What `mmap` of a token gives.
#[derive(Clone, Debug)]
pub enum Mapping {
    /// Device registers: a launch page, an EE software-state page, a CT doorbell page, or
    /// the CSR region.
    Mmio(Arc<MmioWindow>),
    /// Host memory the driver owns: a command ring.
    Memory(MemWindow),
}

impl Mapping {
    /// The MMIO window, if this is one.
    pub fn mmio(&self) -> Option<Arc<dyn Mmio>> {
        match self {
            Mapping::Mmio(w) => Some(Arc::clone(w) as Arc<dyn Mmio>),
            Mapping::Memory(_) => None,
        }
    }

    /// The memory window, if this is one.
    pub fn memory(&self) -> Option<&MemWindow> {
        match self {
            Mapping::Memory(m) => Some(m),
            Mapping::Mmio(_) => None,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Mapping::Mmio(w) => w.len,
            Mapping::Memory(m) => m.len(),
        }
    }

    /// Never true.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An open device (`/dev/cxiN`): the handle user space talks to the driver through.
pub struct Client {
    dev: Arc<CxiDevice>,
    id: ClientId,
    space: UserSpace,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("id", &self.id).finish()
    }
}

impl CxiDevice {
    /// Open the device as an unprivileged process with its own address space.
    pub fn open(self: &Arc<Self>) -> Client {
        self.open_with(Credentials::default(), None)
    }

    /// Open the device as an admin (CAP_SYS_ADMIN) process.
    pub fn open_admin(self: &Arc<Self>) -> Client {
        self.open_with(
            Credentials {
                admin: true,
                ..Credentials::default()
            },
            None,
        )
    }

    /// Open with `creds`, in the address space `space` (a process that opens several devices
    /// passes the same space), or a fresh one.
    pub fn open_with(self: &Arc<Self>, creds: Credentials, space: Option<UserSpace>) -> Client {
        let space = space.unwrap_or_else(|| UserSpace::new(Arc::clone(self.memory())));
        let id = self.add_client(creds, space.clone());
        Client {
            dev: Arc::clone(self),
            id,
            space,
        }
    }
}

impl Client {
    /// The client's id (`client_id` in WAIT_ALLOC responses).
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The device.
    pub fn device(&self) -> &Arc<CxiDevice> {
        &self.dev
    }

    /// The opener's credentials as the driver checks them now: the kernel driver takes the
    /// effective uid at every `write` (`ucxi_write`), so a process that changes its
    /// effective ids (`seteuid`) is checked with the new ones.
    pub fn set_credentials(&self, creds: Credentials) {
        let mut st = self.dev.lock();
        if let Some(c) = st.clients.get_mut(&self.id) {
            c.creds = creds;
        }
    }

    /// The process address space of this client.
    pub fn space(&self) -> &UserSpace {
        &self.space
    }

    /// Allocate a zeroed user buffer of `len` bytes (rounded up to pages) in the client's
    /// address space: what a process gets from `mmap(MAP_ANONYMOUS)`.
    pub fn alloc_user_memory(&self, len: u64) -> Result<UserMemory, Errno> {
        self.space.alloc(len).map_err(|e| match e {
            MemError::ZeroLength => Errno::Einval,
            _ => Errno::Enomem,
        })
    }

    /// `write(fd, req, req.len())`: run one request. The response (if the opcode has one) is
    /// copied into `resp`, which must be at least the response size (else `EFAULT`, as a bad
    /// response pointer gives). Returns the request length, as `write` does. Lists a request
    /// names by address (`svc_list`, `ule_offsets`) are reached through the client's
    /// [`UserSpace`].
    pub fn write(&self, req: &[u8], resp: &mut [u8]) -> Result<usize, Errno> {
        let r = self.write_slice(req, resp);
        if r.is_err() {
            self.dev.note_refused();
        }
        r
    }

    fn write_slice(&self, req: &[u8], resp: &mut [u8]) -> Result<usize, Errno> {
        let op_raw = req
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
            .ok_or(Errno::Einval)?;
        let (op, info) = check_op(op_raw, req.len())?;
        if resp.len() < info.resp_size {
            return Err(Errno::Efault);
        }
        let space = self.space.clone();
        let inout = resp.get(..info.resp_size).unwrap_or_default().to_vec();
        let out = self.run(op, info, req, &inout, &space)?;
        if let Some(dst) = resp.get_mut(..out.len()) {
            dst.copy_from_slice(&out);
        }
        Ok(req.len())
    }

    /// `write(fd, buf, count)` from a process whose memory `user` reaches, as the driver's
    /// `ucxi_write` and `dispatch()` handle it: the 16-byte header is copied from `buf`
    /// whatever `count` is (`EFAULT`), then the opcode (`EINVAL`), its handler
    /// (`EOPNOTSUPP`), the exact length (`EINVAL`), the whole request (`EFAULT`),
    /// admin-only (`EPERM`), a dead device (`EIO`); the handler runs, and its response is
    /// copied to the request's `resp` pointer. A response that cannot be copied is `EFAULT`
    /// and whatever the request allocated is released again, as the driver's handlers do.
    /// Returns `count`.
    pub fn write_user(
        &self,
        user: &dyn UserAccess,
        buf: u64,
        count: usize,
    ) -> Result<usize, Errno> {
        let r = self.write_user_inner(user, buf, count);
        if r.is_err() {
            self.dev.note_refused();
        }
        r
    }

    fn write_user_inner(
        &self,
        user: &dyn UserAccess,
        buf: u64,
        count: usize,
    ) -> Result<usize, Errno> {
        let mut hdr = CommonCmd::new_zeroed();
        user.copy_from_user(buf, hdr.as_mut_bytes())?;
        let (op, info) = check_op(hdr.op, count)?;
        let mut req = vec![0u8; count];
        user.copy_from_user(buf, &mut req)?;
        // Every request with a response carries its pointer at offset 8 (`struct
        // cxi_common_cmd`); PTE_STATUS also reads its response buffer (`ule_offsets`).
        let resp_ptr = CommonCmd::read_from_prefix(&req)
            .map(|(c, _)| c.resp)
            .unwrap_or(0);
        let mut inout = vec![0u8; info.resp_size];
        if op == Opcode::PteStatus {
            user.copy_from_user(resp_ptr, &mut inout)?;
        }
        let out = self.run(op, info, &req, &inout, user)?;
        if !out.is_empty()
            && let Err(e) = user.copy_to_user(resp_ptr, &out)
        {
            self.undo(op, &out);
            return Err(e);
        }
        Ok(count)
    }

    /// Admin and liveness checks, then the handler.
    fn run(
        &self,
        op: Opcode,
        info: OpInfo,
        req: &[u8],
        inout: &[u8],
        user: &dyn UserAccess,
    ) -> Result<Vec<u8>, Errno> {
        let mut st = self.dev.lock();
        let (creds, dead) = match st.clients.get(&self.id) {
            Some(c) => (c.creds, c.dead),
            None => return Err(Errno::Eio),
        };
        if info.admin_only && !creds.admin {
            return Err(Errno::Eperm);
        }
        if dead {
            return Err(Errno::Eio);
        }
        let mut h = Op {
            dev: &self.dev,
            st: &mut st,
            client: self.id,
            user: Some(user),
        };
        dispatch(&mut h, op, req, inout)
    }

    /// Release what a request allocated when its response could not be delivered.
    fn undo(&self, op: Opcode, out: &[u8]) {
        let word = |at: usize| {
            out.get(at..at + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_le_bytes)
                .unwrap_or(0)
        };
        let mut st = self.dev.lock();
        let mut h = Op {
            dev: &self.dev,
            st: &mut st,
            client: self.id,
            user: None,
        };
        let r = match op {
            Opcode::LniAlloc => h.lni_free(&LniFreeCmd {
                lni: word(0),
                ..Default::default()
            }),
            Opcode::DomainAlloc => h.domain_free(&DomainFreeCmd {
                domain: word(0),
                ..Default::default()
            }),
            Opcode::CpAlloc | Opcode::TrigCpAlloc => h.cp_free(&CpFreeCmd {
                cp_hndl: word(0),
                ..Default::default()
            }),
            Opcode::CqAlloc | Opcode::CqAllocBuf => h.cq_free(&CqFreeCmd {
                cq: word(0),
                ..Default::default()
            }),
            Opcode::AtuMap => h.atu_unmap(&AtuUnmapCmd {
                id: word(0),
                ..Default::default()
            }),
            Opcode::EqAlloc => h.eq_free(&EqFreeCmd {
                eq: word(0),
                ..Default::default()
            }),
            Opcode::PteAlloc => h.pte_free(&PteFreeCmd {
                pte_number: word(0),
                ..Default::default()
            }),
            Opcode::PteMap => h.pte_unmap(&PteUnmapCmd {
                pte_index: word(0),
                ..Default::default()
            }),
            Opcode::WaitAlloc => h.wait_free(&WaitFreeCmd {
                wait: word(4),
                ..Default::default()
            }),
            Opcode::CtAlloc => h.ct_free(&CtFreeCmd {
                ctn: word(0),
                ..Default::default()
            }),
            Opcode::SvcAlloc => h.svc_destroy(&SvcDestroyCmd {
                svc_id: word(0),
                ..Default::default()
            }),
            _ => Ok(()),
        };
        if let Err(e) = r {
            tracing::debug!(op = op.name(), error = %e, "undoing a request whose response faulted");
        }
    }

    /// Typed request: fill `op`, write it, decode the response.
    pub fn call<R: Request>(&self, req: &R) -> Result<R::Resp, Errno> {
        let mut r = *req;
        r.set_op();
        let mut resp = R::Resp::new_zeroed();
        self.write(r.as_bytes(), resp.as_mut_bytes())?;
        Ok(resp)
    }

    /// Typed request whose response buffer carries input too (PTE_STATUS reads
    /// `ule_offsets`/`ule_count` from it).
    pub fn call_inout<R: Request>(&self, req: &R, resp: &mut R::Resp) -> Result<(), Errno> {
        let mut r = *req;
        r.set_op();
        self.write(r.as_bytes(), resp.as_mut_bytes())?;
        Ok(())
    }

    /// `mmap(fd, size, offset)` of a token from an alloc response: `offset` and `size` must be
    /// exactly the token's.
    pub fn mmap(&self, offset: u64, size: u64) -> Result<Mapping, Errno> {
        let r = self.mmap_inner(offset, size);
        if r.is_err() {
            self.dev.note_refused();
        }
        r
    }

    fn mmap_inner(&self, offset: u64, size: u64) -> Result<Mapping, Errno> {
        let mut st = self.dev.lock();
        let c = st.clients.get_mut(&self.id).ok_or(Errno::Eio)?;
        if c.dead {
            return Err(Errno::Eio);
        }
        let e = c.mmaps.get_mut(&offset).ok_or(Errno::Einval)?;
        if e.used || e.size != size || e.shared.is_revoked() {
            return Err(Errno::Einval);
        }
        e.used = true;
        Ok(match &e.target {
            MapTarget::Mmio { offset, len } => Mapping::Mmio(Arc::new(MmioWindow {
                bar: Arc::clone(self.dev.hw().bar()),
                base: *offset,
                len: *len,
                shared: Arc::clone(&e.shared),
            })),
            MapTarget::Memory { pages, offset, len } => Mapping::Memory(MemWindow::new(
                Arc::clone(pages),
                *offset,
                *len,
                Arc::clone(&e.shared),
            )),
        })
    }

    /// Map a token (`mmap(token.size, token.offset)`).
    pub fn mmap_token(&self, token: &MmInfo) -> Result<Mapping, Errno> {
        self.mmap(token.offset, token.size)
    }

    /// The wait object behind a WAIT_ALLOC handle (what libcxi reaches through sysfs).
    pub fn wait_object(&self, wait: u32) -> Result<Arc<WaitObject>, Errno> {
        let mut st = self.dev.lock();
        let h = Op {
            dev: &self.dev,
            st: &mut st,
            client: self.id,
            user: None,
        };
        h.wait_object(wait)
    }

    /// Close the device file: release everything the client holds.
    pub fn close(self) {
        drop(self);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.dev.close_client(self.id);
    }
}

fn decode<T: FromBytes>(req: &[u8]) -> Result<T, Errno> {
    T::read_from_bytes(req).map_err(|_| Errno::Einval)
}

fn bytes<T: IntoBytes + zerocopy::Immutable>(v: T) -> Vec<u8> {
    v.as_bytes().to_vec()
}

/// The opcode of a request and its sizes, checked as the driver's `dispatch()` does: opcode
/// range (`EINVAL`), a handler (`EOPNOTSUPP`), the exact length and `MAX_REQ_SIZE`
/// (`EINVAL`).
fn check_op(op_raw: u32, count: usize) -> Result<(Opcode, OpInfo), Errno> {
    if op_raw == Opcode::Invalid as u32 {
        return Err(Errno::Einval);
    }
    let op = Opcode::from_u32(op_raw).ok_or(Errno::Einval)?;
    let info = op.info().ok_or(Errno::Eopnotsupp)?;
    if count != info.req_size || count > MAX_REQ_SIZE {
        return Err(Errno::Einval);
    }
    Ok((op, info))
}

/// Memory of the process writing a request: what the driver's `copy_from_user` and
/// `copy_to_user` reach (the request, its response, the lists it names). A bad address is
/// `EFAULT`.
pub trait UserAccess {
    /// Copy `buf.len()` bytes from `addr`.
    fn copy_from_user(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno>;
    /// Copy `data` to `addr`.
    fn copy_to_user(&self, addr: u64, data: &[u8]) -> Result<(), Errno>;
}

impl UserAccess for UserSpace {
    fn copy_from_user(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        UserSpace::copy_from_user(self, addr, buf).ok_or(Errno::Efault)
    }
    fn copy_to_user(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        UserSpace::copy_to_user(self, addr, data).ok_or(Errno::Efault)
    }
}

/// Run `op`; the response bytes (empty for none). `resp` holds the caller's response buffer
/// on entry (PTE_STATUS reads `ule_offsets` and `ule_count` from it).
fn dispatch(h: &mut Op<'_>, op: Opcode, req: &[u8], resp: &[u8]) -> Result<Vec<u8>, Errno> {
    use Opcode as O;
    Ok(match op {
        O::LniAlloc => bytes(h.lni_alloc(&decode(req)?)?),
        O::LniFree => {
            h.lni_free(&decode(req)?)?;
            Vec::new()
        }
        O::DomainReserve => bytes(h.domain_reserve(&decode(req)?)?),
        O::DomainAlloc => bytes(h.domain_alloc(&decode(req)?)?),
        O::DomainFree => {
            h.domain_free(&decode(req)?)?;
            Vec::new()
        }
        O::CpAlloc => bytes(h.cp_alloc(&decode(req)?)?),
        O::TrigCpAlloc => bytes(h.trig_cp_alloc(&decode(req)?)?),
        O::CpFree => {
            h.cp_free(&decode(req)?)?;
            Vec::new()
        }
        O::CpModify => {
            h.cp_modify(&decode(req)?)?;
            Vec::new()
        }
        O::CqAlloc => bytes(h.cq_alloc(&decode(req)?)?),
        O::CqAllocBuf => bytes(h.cq_alloc_buf(&decode(req)?)?),
        O::CqFree => {
            h.cq_free(&decode(req)?)?;
            Vec::new()
        }
        O::CqAckCounter => bytes(h.cq_ack_counter(&decode(req)?)?),
        O::AtuMap => bytes(h.atu_map(&decode(req)?)?),
        O::AtuUnmap => {
            h.atu_unmap(&decode(req)?)?;
            Vec::new()
        }
        O::AtuUpdateMd => {
            h.atu_update_md(&decode(req)?)?;
            Vec::new()
        }
        O::EqAlloc => bytes(h.eq_alloc(&decode(req)?)?),
        O::EqFree => {
            h.eq_free(&decode(req)?)?;
            Vec::new()
        }
        O::EqAdjustReservedFc => bytes(h.eq_adjust_reserved_fc(&decode(req)?)?),
        O::PteAlloc => bytes(h.pte_alloc(&decode(req)?)?),
        O::PteFree => {
            h.pte_free(&decode(req)?)?;
            Vec::new()
        }
        O::PteMap => bytes(h.pte_map(&decode(req)?)?),
        O::PteUnmap => {
            h.pte_unmap(&decode(req)?)?;
            Vec::new()
        }
        O::PteLeInvalidate => {
            h.pte_le_invalidate(&decode(req)?)?;
            Vec::new()
        }
        O::PteStatus => {
            let inout: PteStatus = resp
                .get(..core::mem::size_of::<PteStatus>())
                .and_then(|b| PteStatus::read_from_bytes(b).ok())
                .ok_or(Errno::Efault)?;
            bytes(h.pte_status(&decode(req)?, &inout)?)
        }
        O::PteTransitionSm => {
            h.pte_transition_sm(&decode(req)?)?;
            Vec::new()
        }
        O::WaitAlloc => bytes(h.wait_alloc(&decode(req)?)?),
        O::WaitFree => {
            h.wait_free(&decode(req)?)?;
            Vec::new()
        }
        O::CtAlloc => bytes(h.ct_alloc(&decode(req)?)?),
        O::CtWbUpdate => {
            h.ct_wb_update(&decode(req)?)?;
            Vec::new()
        }
        O::CtFree => {
            h.ct_free(&decode(req)?)?;
            Vec::new()
        }
        O::MapCsrs => bytes(h.map_csrs()?),
        O::GetDevProperties => bytes(h.dev_properties()),
        O::DevInfoGet => bytes(h.dev_info()),
        O::RetryHandlerRunning => bytes(RetryHandlerRunningResp { running: 0 }),
        O::InboundWait => Vec::new(),
        O::SvcAlloc => match h.svc_alloc(&decode(req)?) {
            Ok(r) => bytes(r),
            Err((e, _)) => return Err(e),
        },
        O::SvcUpdate => match h.svc_update(&decode(req)?) {
            Ok(r) => bytes(r),
            Err((e, _)) => return Err(e),
        },
        O::SvcDestroy => {
            h.svc_destroy(&decode(req)?)?;
            Vec::new()
        }
        O::SvcEnable => {
            h.svc_enable(&decode(req)?)?;
            Vec::new()
        }
        O::SvcGet => bytes(h.svc_get(&decode(req)?)?),
        O::SvcRsrcGet => bytes(h.svc_rsrc_get(&decode(req)?)?),
        O::SvcListGet => bytes(h.svc_list_get(&decode(req)?)?),
        O::SvcRsrcListGet => bytes(h.svc_rsrc_list_get(&decode(req)?)?),
        O::SvcSetLpr => {
            h.svc_set_lpr(&decode(req)?)?;
            Vec::new()
        }
        O::SvcGetLpr => bytes(h.svc_get_lpr(&decode(req)?)?),
        O::SvcSetVniRange => {
            h.svc_set_vni_range(&decode(req)?)?;
            Vec::new()
        }
        O::SvcGetVniRange => bytes(h.svc_get_vni_range(&decode(req)?)?),
        O::SvcSetExclusiveCp => {
            h.svc_set_exclusive_cp(&decode(req)?)?;
            Vec::new()
        }
        O::SvcGetExclusiveCp => bytes(h.svc_get_exclusive_cp(&decode(req)?)?),
        O::SvcSetNetns => {
            h.svc_set_netns(&decode(req)?)?;
            Vec::new()
        }
        O::SvcGetNetns => bytes(h.svc_get_netns(&decode(req)?)?),
        _ => return Err(Errno::Eopnotsupp),
    })
}
