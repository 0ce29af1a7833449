//! Memory registration (`fi_mr_reg`, `fi_mr_regv`, `fi_mr_regattr`): a domain's table of
//! memory regions, each exposed to remote access on every enabled endpoint of the domain.
//!
//! As the CXI provider does on Cassini (cassini.md §2.1), a region open to remote access is
//! one persistent LE on the endpoint's RMA PtlTE (index 117) matching on the region's key,
//! allowing Puts and AMOs (`FI_REMOTE_WRITE`) and Gets (`FI_REMOTE_READ`), with
//! `NO_TRUNCATE` so that an access beyond the region matches nothing
//! (`transport::cxi::CxiTransport::region_expose`). Keys are chosen by the provider
//! (`FI_MR_PROV_KEY`: 1, 2, ...) or by the application (`requested_key`, below
//! [`KEY_LIMIT`]); addresses in RMA calls are offsets into the region (`FI_MR_VIRT_ADDR`
//! is not offered).
//!
//! **Mirroring.** The emulated NIC reaches only its node's memory, not the application's,
//! so each exposure has a NIC-side copy ([`crate::rma`]): what peers write there is copied
//! into the application's buffer when the target endpoint is progressed, and the
//! application's own stores reach the copy when it next posts a message on that endpoint
//! (`fi_send`, `fi_tsend`, ...; only the bytes it changed, so a peer's write not yet
//! copied out is never undone). Stores followed only by RMA or atomics (no message) are
//! not seen by peers' reads: see docs/ofi-provider.md.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use crate::ep::Ep;
use crate::error::{Error, Result};
use crate::ffi::region::UserRegion;
use crate::ffi::rma_types::{
    FI_EKEYREJECTED, FI_ENOKEY, FI_READ, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_WRITE,
};
use crate::ffi::types::{FI_RECV, FI_SEND};

/// Keys are below this (`domain_attr->mr_key_size` 4).
pub const KEY_LIMIT: u64 = 1 << 32;
/// Access flags a registration may carry.
pub const ACCESS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;

/// A registered region.
pub struct Mr {
    /// Its key.
    pub key: u64,
    /// `FI_REMOTE_READ`, `FI_REMOTE_WRITE`, ... as registered.
    pub access: u64,
    /// The application's memory.
    pub region: UserRegion,
}

impl Mr {
    /// Whether peers may reach it.
    pub fn remote(&self) -> bool {
        self.access & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0
    }
}

#[derive(Default)]
struct Inner {
    mrs: BTreeMap<u64, Arc<Mr>>,
    next_key: u64,
    eps: Vec<Weak<Ep>>,
}

/// A domain's memory regions.
#[derive(Default)]
pub struct MrTable {
    inner: Mutex<Inner>,
    /// The provider chooses keys (`FI_MR_PROV_KEY` in the domain's `mr_mode`); else the
    /// application's `requested_key` is the key.
    pub prov_key: bool,
}

impl MrTable {
    /// An empty table.
    pub fn new(prov_key: bool) -> MrTable {
        MrTable {
            prov_key,
            ..MrTable::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Register `region` with `access`; the key is `requested` or, with `None`, the
    /// provider's choice. The region is exposed on every enabled endpoint of the domain.
    pub fn register(
        &self,
        region: UserRegion,
        access: u64,
        requested: Option<u64>,
    ) -> Result<Arc<Mr>> {
        if access & !ACCESS != 0 {
            return Err(Error::Invalid(format!(
                "access flags {:#x} are not supported",
                access & !ACCESS
            )));
        }
        let mut g = self.lock();
        let key = match requested {
            Some(k) if k >= KEY_LIMIT => {
                return Err(Error::Errno(
                    FI_EKEYREJECTED,
                    format!("key {k:#x}: keys have 32 bits (mr_key_size 4)"),
                ));
            }
            Some(k) if g.mrs.contains_key(&k) => {
                return Err(Error::Errno(FI_ENOKEY, format!("key {k:#x} is in use")));
            }
            Some(k) => k,
            None => loop {
                g.next_key = (g.next_key + 1) % KEY_LIMIT;
                if g.next_key != 0 && !g.mrs.contains_key(&g.next_key) {
                    break g.next_key;
                }
            },
        };
        let mr = Arc::new(Mr {
            key,
            access,
            region,
        });
        if mr.remote() {
            g.eps.retain(|w| w.strong_count() > 0);
            let eps: Vec<Arc<Ep>> = g.eps.iter().filter_map(Weak::upgrade).collect();
            for (i, ep) in eps.iter().enumerate() {
                if let Err(e) = ep.expose(&mr) {
                    // All or nothing: the endpoints that exposed it withdraw it again.
                    for done in &eps[..i] {
                        let _ = done.withdraw(key);
                    }
                    return Err(e);
                }
            }
        }
        g.mrs.insert(key, Arc::clone(&mr));
        Ok(mr)
    }

    /// `fi_close` of region `key`: withdrawn from every endpoint.
    pub fn close(&self, key: u64) -> Result<()> {
        let mut g = self.lock();
        let mr = g
            .mrs
            .remove(&key)
            .ok_or_else(|| Error::Invalid(format!("no memory region with key {key:#x}")))?;
        if mr.remote() {
            for ep in g.eps.iter().filter_map(Weak::upgrade) {
                ep.withdraw(key)?;
            }
        }
        Ok(())
    }

    /// An endpoint was enabled: it exposes every region open to remote access, now and
    /// when registered later.
    pub fn attach(&self, ep: &Arc<Ep>) -> Result<()> {
        let mut g = self.lock();
        for mr in g.mrs.values().filter(|m| m.remote()) {
            ep.expose(mr)?;
        }
        g.eps.push(Arc::downgrade(ep));
        Ok(())
    }
}
