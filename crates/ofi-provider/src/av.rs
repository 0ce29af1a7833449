//! Address vectors: endpoint addresses (the cxi transport's NID + PID, 8 bytes) by
//! `fi_addr_t`. `FI_AV_MAP` and `FI_AV_TABLE` both hand out indices in insertion order
//! (for `FI_AV_MAP` an `fi_addr_t` is opaque, so an index is a valid choice).

#![forbid(unsafe_code)]

use std::sync::Mutex;

/// Length of an endpoint address.
pub const ADDR_LEN: usize = 8;

/// An address vector.
#[derive(Default)]
pub struct Av {
    entries: Mutex<Vec<[u8; ADDR_LEN]>>,
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
        usize::try_from(fi_addr)
            .ok()
            .and_then(|i| self.lock().get(i).copied())
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
    }
}
