//! The open files of `/dev/cxi0` and the sysfs files that need more than their bytes: what
//! each interposed call does once it knows a descriptor or an address is one of ours.
//!
//! - A device file is a client of the driver ([`driver::cassini::Client`]); `write` is
//!   [`driver::cassini::Client::write_user`] over this process's memory, `mmap` of a token
//!   is the driver's `mmap` turned into process memory: a command ring is the node's RAM the
//!   NIC reads (this process's own memory), a launch, EQ or CT page a doorbell page
//!   ([`crate::doorbell`]). `close` releases the client and every mapping, as the driver's
//!   `release` does (`vm_munmap` of what is still mapped).
//! - An `intr` file of a wait object is one end of a socket pair; the wait object's signal
//!   sends an urgent byte to the other end (`POLLPRI`, as `sysfs_notify`), a read takes it.
//! - A writable attribute opened with `open` is a memfd whose bytes are stored at `close`.
//!
//! Descriptors are looked up in a table of atomics first ([`kind`]), so calls on every other
//! descriptor pay one load.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use driver::cassini::{Client, Credentials, Errno, Mapping, MmioWindow};
use driver::pci::WaitObject;
use firmware_spec::cassini::pci as cpci;

use crate::doorbell::{self, Bell};
use crate::ffi::os::{self, SelfMemory};
use crate::sysfs::FileId;

/// What a descriptor is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Not ours.
    None = 0,
    /// `/dev/cxi0`.
    Device = 1,
    /// A wait object's `intr` file.
    Intr = 2,
    /// A writable attribute opened with `open`.
    Attr = 3,
}

const FAST: usize = 1 << 16;
static KINDS: [AtomicU8; FAST] = [const { AtomicU8::new(0) }; FAST];

/// What `fd` is (one atomic load for descriptors below 65536).
pub fn kind(fd: RawFd) -> Kind {
    let Ok(i) = usize::try_from(fd) else {
        return Kind::None;
    };
    let k = if i < FAST {
        KINDS[i].load(Ordering::Acquire)
    } else {
        tables().slow.get(&fd).copied().unwrap_or(0)
    };
    match k {
        1 => Kind::Device,
        2 => Kind::Intr,
        3 => Kind::Attr,
        _ => Kind::None,
    }
}

fn set_kind(t: &mut Tables, fd: RawFd, k: Kind) {
    let Ok(i) = usize::try_from(fd) else {
        return;
    };
    if i < FAST {
        KINDS[i].store(k as u8, Ordering::Release);
    } else if k == Kind::None {
        t.slow.remove(&fd);
    } else {
        t.slow.insert(fd, k as u8);
    }
}

/// An open `/dev/cxi0`.
pub struct DevFile {
    client: Client,
}

struct IntrFile {
    ours: OwnedFd,
    wait: Arc<WaitObject>,
    pos: usize,
}

/// A mapping handed to the process.
enum MapKind {
    /// A command ring: the node's RAM, kept alive by the mapping.
    Ring(#[allow(dead_code)] Mapping),
    /// A doorbell page.
    Bell(Arc<Bell>),
}

struct MapRec {
    fd: RawFd,
    len: usize,
    kind: MapKind,
}

struct Tables {
    devs: BTreeMap<RawFd, Arc<DevFile>>,
    intrs: BTreeMap<RawFd, IntrFile>,
    attrs: BTreeMap<RawFd, FileId>,
    maps: BTreeMap<usize, MapRec>,
    slow: BTreeMap<RawFd, u8>,
}

static TABLES: Mutex<Tables> = Mutex::new(Tables {
    devs: BTreeMap::new(),
    intrs: BTreeMap::new(),
    attrs: BTreeMap::new(),
    maps: BTreeMap::new(),
    slow: BTreeMap::new(),
});
/// Mappings outstanding: `munmap` looks at the table only when there are any.
static MAPPINGS: AtomicUsize = AtomicUsize::new(0);

fn tables() -> std::sync::MutexGuard<'static, Tables> {
    TABLES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Credentials of this process as the driver checks them: effective uid and gid,
/// CAP_SYS_ADMIN taken as effective uid 0 (`NICEMU_CXI_ADMIN=0|1` overrides), and the
/// network namespace (the inode of `/proc/self/ns/net`).
pub fn credentials() -> Credentials {
    let (uid, gid) = os::ids();
    let admin = match std::env::var("NICEMU_CXI_ADMIN")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        Some("1") => true,
        Some("0") => false,
        _ => uid == 0,
    };
    let netns = std::fs::metadata("/proc/self/ns/net")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m) as u32)
        .unwrap_or(0);
    Credentials {
        uid,
        gid,
        admin,
        netns,
    }
}

/// Open `/dev/cxi0` on descriptor `fd` (a memfd the caller made): a new client of the
/// node's device (the node is built on the first open).
pub fn open_device(fd: RawFd) -> Result<(), i32> {
    let node = crate::node::get().map_err(|_| libc::ENODEV)?;
    let dev = node.device(0).ok_or(libc::ENODEV)?;
    let client = dev.open_with(credentials(), None);
    let mut t = tables();
    t.devs.insert(fd, Arc::new(DevFile { client }));
    set_kind(&mut t, fd, Kind::Device);
    Ok(())
}

fn dev(fd: RawFd) -> Option<Arc<DevFile>> {
    tables().devs.get(&fd).cloned()
}

/// `write(fd, buf, count)` on a device file: one uAPI request from this process's memory.
pub fn write(fd: RawFd, buf: u64, count: usize) -> Result<usize, i32> {
    let d = dev(fd).ok_or(libc::EBADF)?;
    d.client.set_credentials(credentials());
    d.client
        .write_user(&SelfMemory, buf, count)
        .map_err(|e| e.code())
}

/// The ids of the clients open in this process (`clients/<id>` of the sysfs tree).
pub fn client_ids() -> Vec<u32> {
    tables().devs.values().map(|d| d.client.id()).collect()
}

fn client_by_id(id: u32) -> Option<Arc<DevFile>> {
    tables()
        .devs
        .values()
        .find(|d| d.client.id() == id)
        .cloned()
}

/// Whether client `client` has wait object `wait`.
pub fn has_wait(client: u32, wait: u32) -> bool {
    client_by_id(client).is_some_and(|d| d.client.wait_object(wait).is_ok())
}

/// Open the `intr` file of wait object `wait` of client `client`: the process's end of a
/// socket pair whose other end the wait object's signals reach.
pub fn open_intr(client: u32, wait: u32, cloexec: bool) -> Result<RawFd, i32> {
    let d = client_by_id(client).ok_or(libc::ENOENT)?;
    let w = d.client.wait_object(wait).map_err(|_| libc::ENOENT)?;
    let (theirs, ours) =
        os::socket_pair(cloexec).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    let raw = ours.as_raw_fd();
    w.set_notify(Some(Arc::new(move || os::send_urgent(raw))));
    let mut t = tables();
    t.intrs.insert(
        theirs,
        IntrFile {
            ours,
            wait: w,
            pos: 0,
        },
    );
    set_kind(&mut t, theirs, Kind::Intr);
    Ok(theirs)
}

/// A read of an `intr` file at `offset` (the current position when `None`): takes the
/// pending notification and gives `"\n"` at offset 0, nothing after it, as sysfs does.
pub fn read_intr(fd: RawFd, offset: Option<usize>, buf: &mut [u8]) -> usize {
    os::take_urgent(fd);
    let mut t = tables();
    let Some(f) = t.intrs.get_mut(&fd) else {
        return 0;
    };
    let at = offset.unwrap_or(f.pos);
    let n = if at == 0 && !buf.is_empty() {
        buf[0] = b'\n';
        1
    } else {
        0
    };
    if offset.is_none() {
        f.pos += n;
    }
    n
}

/// Remember that `fd` is a writable attribute (stored at close).
pub fn open_attr(fd: RawFd, id: FileId) {
    let mut t = tables();
    t.attrs.insert(fd, id);
    set_kind(&mut t, fd, Kind::Attr);
}

/// Forget `fd` before the real `close`: a device file releases its client and every mapping
/// it made; an `intr` file stops its notifications; an attribute stores what was written
/// (false if the driver would refuse it).
pub fn close(fd: RawFd) -> bool {
    let mut t = tables();
    let k = kind_locked(&t, fd);
    set_kind(&mut t, fd, Kind::None);
    match k {
        Kind::Device => {
            let mine: Vec<usize> = t
                .maps
                .iter()
                .filter(|(_, m)| m.fd == fd)
                .map(|(a, _)| *a)
                .collect();
            let mut gone = Vec::new();
            for a in mine {
                if let Some(m) = t.maps.remove(&a) {
                    MAPPINGS.fetch_sub(1, Ordering::AcqRel);
                    gone.push(m);
                }
            }
            let d = t.devs.remove(&fd);
            drop(t);
            for m in gone {
                if let MapKind::Bell(b) = m.kind {
                    doorbell::unwatch(&b);
                    b.unmap_user();
                }
            }
            drop(d);
            true
        }
        Kind::Intr => {
            if let Some(f) = t.intrs.remove(&fd) {
                f.wait.set_notify(None);
                drop(f.ours);
            }
            true
        }
        Kind::Attr => {
            let id = t.attrs.remove(&fd);
            drop(t);
            match id {
                Some(id) => {
                    let bytes = os::read_all(fd);
                    bytes.is_empty() || crate::content::store(&id, &bytes)
                }
                None => true,
            }
        }
        Kind::None => true,
    }
}

fn kind_locked(t: &Tables, fd: RawFd) -> Kind {
    if t.devs.contains_key(&fd) {
        Kind::Device
    } else if t.intrs.contains_key(&fd) {
        Kind::Intr
    } else if t.attrs.contains_key(&fd) {
        Kind::Attr
    } else {
        Kind::None
    }
}

/// What an mmap of a device file gives the process.
pub enum Mapped {
    /// Process memory that already exists (a ring in the node's RAM): its address.
    Existing(usize),
    /// A doorbell page: its address.
    Bell(usize),
}

fn bell_kind(w: &MmioWindow, client: &Client) -> Option<doorbell::Kind> {
    let off = w.bar_offset();
    let page = cpci::CQ_LAUNCH_PAGE_SIZE;
    let in_range = |base: u64, n: u64, step: u64| off >= base && off < base + n * step;
    if in_range(cpci::CQ_LAUNCH_TXQ_BASE, cpci::NUM_TXQS, page)
        || in_range(cpci::CQ_LAUNCH_TGT_BASE, cpci::NUM_TGQS, page)
    {
        let tgt = off >= cpci::CQ_LAUNCH_TGT_BASE;
        let base = if tgt {
            cpci::CQ_LAUNCH_TGT_BASE
        } else {
            cpci::CQ_LAUNCH_TXQ_BASE
        };
        let n = ((off - base) / page) as u32;
        let slots = ring_slots(client, tgt, n)?;
        Some(doorbell::Kind::Launch { slots })
    } else if in_range(cpci::TOU_BASE, cpci::NUM_CTS, cpci::TOU_LAUNCH_PAGE_SIZE) {
        Some(doorbell::Kind::Ct)
    } else if in_range(
        cpci::EE_SW_STATE_BASE,
        cpci::NUM_EQS,
        cpci::EE_SW_STATE_PAGE_SIZE,
    ) {
        Some(doorbell::Kind::EqState)
    } else {
        None
    }
}

/// The slots of CQ `n`'s ring (`mem_q_max_ptr + 1` of its base table entry).
fn ring_slots(client: &Client, tgt: bool, n: u32) -> Option<u64> {
    use firmware_spec::cassini::csr::{self, fields as f};
    let hw = client.device().hw();
    let max = if tgt {
        hw.read_field(csr::C_CQ_TGQ_TABLE, n, f::c_cq_tgq_table::MEM_Q_MAX_PTR)
    } else {
        hw.read_field(
            csr::C_CQ_TXQ_BASE_TABLE,
            n,
            f::c_cq_txq_base_table::MEM_Q_MAX_PTR,
        )
    };
    max.ok().map(|m| m + 1)
}

/// `mmap(NULL, len, ..., fd, offset)` of a device file: the token at `offset` (exactly
/// `len` bytes, once), as process memory. `ENODEV` for the CSR region, which this library
/// does not map (loads from it would need to be trapped, see docs/real-cxi.md).
pub fn mmap(fd: RawFd, offset: u64, len: usize) -> Result<Mapped, i32> {
    let d = dev(fd).ok_or(libc::EBADF)?;
    let m = d
        .client
        .mmap(offset, len as u64)
        .map_err(|e: Errno| e.code())?;
    let (addr, kind, out) = match &m {
        Mapping::Memory(w) => {
            let p = w.host_ptr().ok_or(libc::ENODEV)? as usize;
            (p, MapKind::Ring(m.clone()), Mapped::Existing(p))
        }
        Mapping::Mmio(w) => {
            let k = bell_kind(w, &d.client).ok_or(libc::ENODEV)?;
            let bell = Bell::new(k, Arc::clone(w))
                .map_err(|e| e.raw_os_error().unwrap_or(libc::ENOMEM))?;
            let a = bell.user_address();
            doorbell::watch(Arc::clone(&bell));
            (a, MapKind::Bell(bell), Mapped::Bell(a))
        }
    };
    let mut t = tables();
    t.maps.insert(addr, MapRec { fd, len, kind });
    MAPPINGS.fetch_add(1, Ordering::AcqRel);
    Ok(out)
}

/// `munmap(addr, len)`: true if `addr` was one of ours (then dealt with here; a doorbell
/// page's process view is unmapped, a ring is given back to the driver).
pub fn munmap(addr: usize, _len: usize) -> bool {
    if MAPPINGS.load(Ordering::Acquire) == 0 {
        return false;
    }
    let mut t = tables();
    let Some(m) = t.maps.remove(&addr) else {
        return false;
    };
    MAPPINGS.fetch_sub(1, Ordering::AcqRel);
    drop(t);
    let _ = m.len;
    if let MapKind::Bell(b) = m.kind {
        doorbell::unwatch(&b);
        b.unmap_user();
    }
    true
}

/// [`crate::sysfs::Live`] over this process's device files.
pub struct LiveFiles;

impl crate::sysfs::Live for LiveFiles {
    fn clients(&self) -> Vec<u32> {
        client_ids()
    }
    fn has_wait(&self, client: u32, wait: u32) -> bool {
        has_wait(client, wait)
    }
    fn counter(&self, name: &str) -> bool {
        crate::content::is_counter(name)
    }
    fn counters(&self) -> Vec<String> {
        crate::content::counter_names()
    }
}
