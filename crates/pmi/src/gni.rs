//! The job credentials a Cray launcher hands each process of a Gemini job (ALPS through
//! Cray's PMI; gemini.md §1.2), as environment variables: the protection tag and cookie of
//! the job's communication domain, the local Gemini devices and their NIC addresses. Open
//! MPI's ugni BTL reads them (`btl_ugni_init.c`: `PMI_GNI_PTAG`, `PMI_GNI_COOKIE` as decimal
//! numbers, `PMI_GNI_DEV_ID` and `PMI_GNI_LOC_ADDR` as colon-separated lists, device `i`'s
//! address at position `i`), as do Cray's own uGNI examples.
//!
//! `nicemu run` sets them for every rank ([`Credentials::env`]); the node a process hosts
//! configures its job with the same ptag and cookie, so a domain created with them passes
//! kgni's ptag/cookie check (docs/real-ugni.md).

use std::fmt;

/// `PMI_GNI_PTAG`: the job's protection tag (decimal).
pub const PTAG_VAR: &str = "PMI_GNI_PTAG";
/// `PMI_GNI_COOKIE`: the job's cookie (decimal).
pub const COOKIE_VAR: &str = "PMI_GNI_COOKIE";
/// `PMI_GNI_DEV_ID`: the local Gemini device ids, colon-separated.
pub const DEV_ID_VAR: &str = "PMI_GNI_DEV_ID";
/// `PMI_GNI_LOC_ADDR`: the NIC address of each of those devices, colon-separated.
pub const LOC_ADDR_VAR: &str = "PMI_GNI_LOC_ADDR";

/// The ptag of a nicemu job unless told otherwise (in the user range 3..=253, gni_pub.h).
pub const DEFAULT_PTAG: u8 = 16;
/// The protection key of a nicemu job's cookie (in the user range 128..=65407).
pub const DEFAULT_PKEY: u16 = 0x4000;
/// The cookie of a nicemu job unless told otherwise: `GNI_JOB_CREATE_COOKIE(DEFAULT_PKEY, 0)`
/// (`pkey << 16 | (cbps_mdd & 7) << 3`, gni_pub.h).
pub const DEFAULT_COOKIE: u32 = (DEFAULT_PKEY as u32) << 16;

/// A job's protection tag and cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// Protection tag.
    pub ptag: u8,
    /// Cookie.
    pub cookie: u32,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials {
            ptag: DEFAULT_PTAG,
            cookie: DEFAULT_COOKIE,
        }
    }
}

/// A credential variable with a value that is not a number of its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCredential {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
}

impl fmt::Display for BadCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?}: expected a decimal number",
            self.var, self.value
        )
    }
}

impl std::error::Error for BadCredential {}

impl Credentials {
    /// The credentials the variables seen through `lookup` give, each defaulting to nicemu's
    /// when unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, BadCredential> {
        let mut c = Credentials::default();
        if let Some(v) = lookup(PTAG_VAR) {
            c.ptag = v.trim().parse().map_err(|_| BadCredential {
                var: PTAG_VAR,
                value: v.clone(),
            })?;
        }
        if let Some(v) = lookup(COOKIE_VAR) {
            c.cookie = v.trim().parse().map_err(|_| BadCredential {
                var: COOKIE_VAR,
                value: v.clone(),
            })?;
        }
        Ok(c)
    }

    /// The variables of a process whose node has one Gemini (device 0) at NIC address
    /// `nic_addr`.
    pub fn env(&self, nic_addr: u32) -> Vec<(String, String)> {
        vec![
            (PTAG_VAR.into(), self.ptag.to_string()),
            (COOKIE_VAR.into(), self.cookie.to_string()),
            (DEV_ID_VAR.into(), "0".into()),
            (LOC_ADDR_VAR.into(), nic_addr.to_string()),
        ]
    }
}

/// The NIC address of device `device_id` as `PMI_GNI_DEV_ID` and `PMI_GNI_LOC_ADDR` list them
/// (`None` when the variables are absent, malformed or do not name the device).
pub fn local_address(lookup: impl Fn(&str) -> Option<String>, device_id: u32) -> Option<u32> {
    let devs = lookup(DEV_ID_VAR)?;
    let addrs = lookup(LOC_ADDR_VAR)?;
    let index = devs
        .split(':')
        .position(|d| d.trim().parse::<u32>().ok() == Some(device_id))?;
    addrs.split(':').nth(index)?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn credentials_default_and_parse() {
        assert_eq!(
            Credentials::from_lookup(lookup(&[])).unwrap(),
            Credentials {
                ptag: 16,
                cookie: 0x4000_0000
            }
        );
        let c =
            Credentials::from_lookup(lookup(&[(PTAG_VAR, "7"), (COOKIE_VAR, "12345")])).unwrap();
        assert_eq!((c.ptag, c.cookie), (7, 12345));
        let e = Credentials::from_lookup(lookup(&[(PTAG_VAR, "300")])).unwrap_err();
        assert_eq!(e.var, PTAG_VAR);
        assert!(Credentials::from_lookup(lookup(&[(COOKIE_VAR, "0x10")])).is_err());
    }

    #[test]
    fn the_address_list_follows_the_device_list() {
        let env = Credentials::default().env(5);
        let m: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(local_address(lookup(&m), 0), Some(5));
        assert_eq!(local_address(lookup(&m), 1), None);
        let two = lookup(&[(DEV_ID_VAR, "0:1"), (LOC_ADDR_VAR, "40:41")]);
        assert_eq!(local_address(&two, 1), Some(41));
        assert_eq!(local_address(lookup(&[(DEV_ID_VAR, "0")]), 0), None);
    }
}
