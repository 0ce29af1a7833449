//! Address vectors: endpoint addresses (the cxi transport's NID + PID, 8 bytes) by
//! `fi_addr_t`. `FI_AV_MAP` and `FI_AV_TABLE` both hand out indices in insertion order
//! (for `FI_AV_MAP` an `fi_addr_t` is opaque, so an index is a valid choice).

#![forbid(unsafe_code)]

use std::sync::Mutex;

use crate::error::{Error, Result};

/// Length of an endpoint address.
pub const ADDR_LEN: usize = 8;

/// An address vector.
#[derive(Default)]
pub struct Av {
    entries: Mutex<Vec<[u8; ADDR_LEN]>>,
    /// Removed indices: never handed out again, no longer found by `lookup`.
    removed: Mutex<std::collections::BTreeSet<u64>>,
}

impl Av {
    /// Append `addrs`; returns their `fi_addr_t`s.
    pub fn insert(&self, addrs: &[[u8; ADDR_LEN]]) -> Vec<u64> {
        let mut e = self.lock();
        addrs
            .iter()
            .map(|a| {
                e.push(*a);
                (e.len() - 1) as u64
            })
            .collect()
    }

    /// The address of `fi_addr`.
    pub fn lookup(&self, fi_addr: u64) -> Option<[u8; ADDR_LEN]> {
        if self
            .removed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&fi_addr)
        {
            return None;
        }
        usize::try_from(fi_addr)
            .ok()
            .and_then(|i| self.lock().get(i).copied())
    }

    /// `fi_av_remove`: forget `fi_addrs` (an unknown or already removed one is an error and
    /// removes nothing). Endpoints that already learnt a removed peer keep it.
    pub fn remove(&self, fi_addrs: &[u64]) -> Result<()> {
        let n = self.lock().len() as u64;
        let mut removed = self.removed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bad) = fi_addrs.iter().find(|&&a| a >= n || removed.contains(&a)) {
            return Err(Error::Invalid(format!(
                "fi_av_remove: {bad:#x} is not in the address vector"
            )));
        }
        removed.extend(fi_addrs.iter().copied());
        Ok(())
    }

    /// The entries from index `from` on.
    pub fn since(&self, from: usize) -> Vec<[u8; ADDR_LEN]> {
        self.lock()
            .get(from..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<[u8; ADDR_LEN]>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `fi_av_straddr`: `nicemu://NID:PID` (hexadecimal).
pub fn straddr(addr: &[u8; ADDR_LEN]) -> String {
    let nid = u32::from_le_bytes([addr[0], addr[1], addr[2], addr[3]]);
    let pid = u32::from_le_bytes([addr[4], addr[5], addr[6], addr[7]]);
    format!("nicemu://{nid:#x}:{pid:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_addresses_are_found_by_their_fi_addr() {
        let av = Av::default();
        let a = [1, 0, 0, 0, 2, 0, 0, 0];
        let b = [3, 0, 0, 0, 4, 0, 0, 0];
        assert_eq!(av.insert(&[a, b]), vec![0, 1]);
        assert_eq!(av.lookup(1), Some(b));
        assert_eq!(av.lookup(2), None);
        assert_eq!(av.since(1), vec![b]);
        assert_eq!(straddr(&b), "nicemu://0x3:0x4");
        av.remove(&[0]).unwrap();
        assert_eq!(av.lookup(0), None);
        assert!(av.remove(&[0]).is_err(), "removed twice");
        assert!(av.remove(&[7]).is_err(), "never inserted");
        assert_eq!(av.lookup(1), Some(b));
    }
}
