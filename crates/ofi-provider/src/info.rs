//! What `fi_getinfo` offers for given hints: capabilities, message ordering and addresses.
//! The C side (`ffi::prov`) reads the hints into a [`Hints`] and writes the [`Offer`] into
//! the `fi_info` it returns; a hint the provider cannot satisfy gives
//! [`Refusal`] (`-FI_ENODATA`).
//!
//! Semantics from libfabric's `fi_getinfo(3)` and `fi_endpoint(3)` (1.17): with `caps` in
//! the hints, the returned primary capabilities are those asked for (secondary ones may be
//! added); `tx_attr->caps`/`rx_attr->caps` are the transmit and receive subsets of the
//! endpoint's; `msg_order` must contain every ordering bit the hints ask for;
//! `domain_attr->caps` the domain capabilities asked for.
//!
//! **Addresses.** An endpoint address is the cxi transport's NID + PID (8 bytes,
//! [`crate::av::ADDR_LEN`]). The NID of a process's NIC is its rank in the job (0 alone,
//! docs/ofi-provider.md); the PID is given by the driver when the endpoint opens. So the
//! `src_addr` of an `fi_info` is this process's NID with `C_PID_ANY`, as the real CXI
//! provider reports its NIC with `C_PID_ANY` before a PID is allocated. `node` names a NIC:
//! a NID (decimal or `0x` hexadecimal), or this host (`localhost`, its host name, a
//! loopback IP address), meaning this process's NIC, since every NIC of the emulated fabric
//! lives on this host. `service` is a PID (decimal): for a destination it is the peer's PID
//! and must be below `C_PID_ANY`; for `FI_SOURCE` it is ignored (the driver allocates PIDs;
//! fabtests pass their TCP port there).

#![forbid(unsafe_code)]

use crate::ffi::rma_types::{FI_READ, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_WRITE};
use crate::ffi::types::*;

/// `C_PID_ANY` of a 9-bit PID field (firmware-spec `cassini::dfa`).
pub const PID_ANY: u32 = (1 << 9) - 1;
/// `C_NID_ANY`: NIDs are 20 bits.
pub const NID_ANY: u32 = 0xF_FFFF;

/// Primary capabilities the provider implements.
pub const PRIMARY: u64 = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV;
/// Access modifiers.
pub const MODIFIERS: u64 = FI_SEND | FI_RECV;
/// Secondary capabilities always offered.
pub const SECONDARY: u64 = FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
/// Every capability an `fi_info` of the provider may carry without RMA.
pub const CAPS: u64 = PRIMARY | MODIFIERS | SECONDARY;
/// RMA and atomics (`crate::rma`): offered only when asked for.
pub const RMA_PRIMARY: u64 = FI_RMA | FI_ATOMIC;
/// Their access modifiers: transmit (`FI_READ`, `FI_WRITE`) and target side.
pub const RMA_MODIFIERS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Transmit-side RMA capabilities.
pub const RMA_TX_SIDE: u64 = RMA_PRIMARY | FI_READ | FI_WRITE;
/// Receive-side (target) RMA capabilities.
pub const RMA_RX_SIDE: u64 = RMA_PRIMARY | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Accepted in hints without meaning a capability (`fi_senddata` always works:
/// `cq_data_size` 8).
const TOLERATED: u64 = FI_REMOTE_CQ_DATA;
/// Transmit-side capabilities.
pub const TX_SIDE: u64 = FI_MSG | FI_TAGGED | FI_SEND;
/// Receive-side capabilities.
pub const RX_SIDE: u64 = FI_MSG | FI_TAGGED | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV;
/// Domain capabilities.
pub const DOMAIN_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM;
/// Message orderings kept: a pair's sends are matched in the order they were sent (the
/// transport's PtlTE matches in arrival order on one path).
pub const MSG_ORDER: u64 = FI_ORDER_SAS;

/// The hints that matter here (0 for an absent attribute).
#[derive(Clone, Debug, Default)]
pub struct Hints {
    /// `hints->caps`.
    pub caps: u64,
    /// `tx_attr->caps`, `rx_attr->caps`, `domain_attr->caps`.
    pub tx_caps: u64,
    /// See `tx_caps`.
    pub rx_caps: u64,
    /// See `tx_caps`.
    pub domain_caps: u64,
    /// `tx_attr->msg_order`, `rx_attr->msg_order`.
    pub tx_order: u64,
    /// See `tx_order`.
    pub rx_order: u64,
    /// `tx_attr->comp_order` | `rx_attr->comp_order`.
    pub comp_order: u64,
    /// `hints->src_addr` (its bytes), `hints->dest_addr`.
    pub src_addr: Option<Vec<u8>>,
    /// See `src_addr`.
    pub dest_addr: Option<Vec<u8>>,
    /// `domain_attr->mr_mode`.
    pub mr_mode: i32,
    /// The application asked for an API before 1.5, where `mr_mode` is `FI_MR_UNSPEC`,
    /// `FI_MR_BASIC` or `FI_MR_SCALABLE` and an answer must be one of the last two.
    pub legacy_mr: bool,
}

/// The `node`, `service` and `flags` arguments.
#[derive(Clone, Debug, Default)]
pub struct Target<'a> {
    /// `node`.
    pub node: Option<&'a str>,
    /// `service`.
    pub service: Option<&'a str>,
    /// `flags & FI_SOURCE`.
    pub source: bool,
}

/// What the `fi_info` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// `caps`, `tx_attr->caps`, `rx_attr->caps`, `domain_attr->caps`.
    pub caps: u64,
    /// See `caps`.
    pub tx_caps: u64,
    /// See `caps`.
    pub rx_caps: u64,
    /// See `caps`.
    pub domain_caps: u64,
    /// `src_addr` (always set).
    pub src_addr: [u8; 8],
    /// `dest_addr`, when `node` (without `FI_SOURCE`) or the hints name one.
    pub dest_addr: Option<[u8; 8]>,
    /// `domain_attr->mr_mode`: 0 without RMA; with it, `FI_MR_PROV_KEY` when the hints
    /// allow it (else the application's keys), or `FI_MR_SCALABLE` when asked in the
    /// pre-1.5 style.
    pub mr_mode: i32,
}

/// Why no `fi_info` matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

fn refuse<T>(why: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(why.into()))
}

/// The 8-byte address of `nid`, `pid`.
pub fn addr(nid: u32, pid: u32) -> [u8; 8] {
    let mut a = [0; 8];
    a[..4].copy_from_slice(&nid.to_le_bytes());
    a[4..].copy_from_slice(&pid.to_le_bytes());
    a
}

fn number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The NID `node` names (module doc), or why it names none.
pub fn node_nid(node: &str, own_nid: u32, host_name: &str) -> Result<u32, Refusal> {
    if let Some(n) = number(node) {
        return if n < NID_ANY {
            Ok(n)
        } else {
            refuse(format!("node {node}: a NID has 20 bits"))
        };
    }
    let this_host = node.eq_ignore_ascii_case("localhost")
        || (!host_name.is_empty() && node.eq_ignore_ascii_case(host_name))
        || node
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if this_host {
        Ok(own_nid)
    } else {
        refuse(format!(
            "node {node}: neither a NID nor this host (every emulated NIC is on this host)"
        ))
    }
}

fn given_addr(what: &str, a: &Option<Vec<u8>>) -> Result<Option<[u8; 8]>, Refusal> {
    match a {
        None => Ok(None),
        Some(b) => match <[u8; 8]>::try_from(b.as_slice()) {
            Ok(a) => Ok(Some(a)),
            Err(_) => refuse(format!(
                "{what} of {} bytes (the provider's addresses have 8)",
                b.len()
            )),
        },
    }
}

/// The `fi_info` for `hints` (`None`: no hints) and `target`, on the NIC of NID `own_nid`.
pub fn offer(
    hints: Option<&Hints>,
    target: &Target<'_>,
    own_nid: u32,
    host_name: &str,
) -> Result<Offer, Refusal> {
    let default = Hints::default();
    let h = hints.unwrap_or(&default);
    if h.caps & !(CAPS | RMA_PRIMARY | RMA_MODIFIERS | TOLERATED) != 0 {
        return refuse("capabilities");
    }
    if h.tx_caps & !(TX_SIDE | RMA_TX_SIDE | DOMAIN_CAPS | TOLERATED) != 0
        || h.rx_caps & !(RX_SIDE | RMA_RX_SIDE | DOMAIN_CAPS | TOLERATED) != 0
    {
        return refuse("tx/rx capabilities");
    }
    if h.domain_caps & !DOMAIN_CAPS != 0 {
        return refuse("domain capabilities");
    }
    if (h.tx_order | h.rx_order) & !MSG_ORDER != 0 {
        return refuse("message ordering");
    }
    if h.comp_order != 0 {
        return refuse("completion ordering");
    }
    // Primary capabilities: those asked for (of the endpoint, else of its tx/rx
    // attributes), all when none is.
    let asked = if h.caps != 0 {
        h.caps
    } else {
        h.tx_caps | h.rx_caps
    };
    let mut primary = if asked == 0 { PRIMARY } else { asked & PRIMARY };
    if primary & (FI_MSG | FI_TAGGED) == 0 && asked & RMA_PRIMARY == 0 {
        primary |= FI_MSG | FI_TAGGED;
    }
    let mut modifiers = asked & MODIFIERS;
    if modifiers == 0 {
        modifiers = MODIFIERS;
    }
    let rma = asked & RMA_PRIMARY;
    let mut rma_modifiers = 0;
    let mut mr_mode = 0;
    if rma != 0 {
        use crate::ffi::rma_types::{FI_MR_BASIC, FI_MR_PROV_KEY, FI_MR_SCALABLE};
        primary |= rma;
        rma_modifiers = asked & RMA_MODIFIERS;
        if rma_modifiers == 0 {
            rma_modifiers = RMA_MODIFIERS;
        }
        // Remote addresses are offsets into the region: no FI_MR_VIRT_ADDR, so not the
        // pre-1.5 FI_MR_BASIC (which implies it).
        mr_mode = match h.mr_mode {
            FI_MR_BASIC => return refuse("FI_MR_BASIC (virtual addresses)"),
            FI_MR_SCALABLE => FI_MR_SCALABLE,
            0 if h.legacy_mr => FI_MR_SCALABLE,
            m => m & FI_MR_PROV_KEY,
        };
    }
    let caps = primary | modifiers | rma_modifiers | SECONDARY;
    let tx_caps = if modifiers & FI_SEND != 0 {
        caps & TX_SIDE
    } else {
        0
    } | if rma_modifiers & (FI_READ | FI_WRITE) != 0 {
        caps & RMA_TX_SIDE
    } else {
        0
    };
    let rx_caps = if modifiers & FI_RECV != 0 {
        caps & RX_SIDE
    } else {
        0
    } | if rma_modifiers & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
        caps & RMA_RX_SIDE
    } else {
        0
    };

    let mut src = given_addr("src_addr", &h.src_addr)?;
    let mut dest = given_addr("dest_addr", &h.dest_addr)?;
    if let Some(node) = target.node {
        let nid = node_nid(node, own_nid, host_name)?;
        if target.source {
            if nid != own_nid {
                return refuse(format!(
                    "node {node}: FI_SOURCE names NID {nid:#x}, this process's NIC is {own_nid:#x}"
                ));
            }
            src = Some(addr(nid, PID_ANY));
        } else {
            let pid = match target.service {
                None => PID_ANY,
                Some(s) => match number(s) {
                    Some(p) if p < PID_ANY => p,
                    _ => return refuse(format!("service {s}: not a PID (0..{PID_ANY})")),
                },
            };
            dest = Some(addr(nid, pid));
        }
    }
    Ok(Offer {
        caps,
        tx_caps,
        rx_caps,
        domain_caps: DOMAIN_CAPS,
        src_addr: src.unwrap_or(addr(own_nid, PID_ANY)),
        dest_addr: dest,
        mr_mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints(caps: u64) -> Hints {
        Hints {
            caps,
            ..Hints::default()
        }
    }

    #[test]
    fn primary_capabilities_are_those_asked_for() {
        let t = Target::default();
        let o = offer(Some(&hints(FI_TAGGED)), &t, 0, "h").unwrap();
        assert_eq!(o.caps & PRIMARY, FI_TAGGED);
        assert_eq!(o.tx_caps, FI_TAGGED | FI_SEND);
        assert_eq!(o.rx_caps, FI_TAGGED | FI_RECV | FI_SOURCE);
        let o = offer(Some(&hints(FI_MSG | FI_DIRECTED_RECV)), &t, 0, "h").unwrap();
        assert_eq!(o.caps & PRIMARY, FI_MSG | FI_DIRECTED_RECV);
        assert_eq!(o.rx_caps & FI_DIRECTED_RECV, FI_DIRECTED_RECV);
        // No hints: everything; tx/rx attributes never carry domain capabilities.
        let o = offer(None, &t, 0, "h").unwrap();
        assert_eq!(o.caps, CAPS);
        assert_eq!(o.tx_caps & DOMAIN_CAPS, 0);
        assert_eq!(o.rx_caps & DOMAIN_CAPS, 0);
        assert_eq!(o.domain_caps, DOMAIN_CAPS);
        // Only receiving: no transmit capabilities.
        let o = offer(Some(&hints(FI_TAGGED | FI_RECV)), &t, 0, "h").unwrap();
        assert_eq!(o.tx_caps, 0);
    }

    #[test]
    fn unsupported_hints_are_refused() {
        let t = Target::default();
        for caps in [FI_MULTI_RECV, FI_TAGGED | FI_HMEM] {
            assert!(offer(Some(&hints(caps)), &t, 0, "h").is_err(), "{caps:#x}");
        }
        let mut h = hints(FI_TAGGED);
        h.tx_order = FI_ORDER_SAS;
        assert!(offer(Some(&h), &t, 0, "h").is_ok());
        h.tx_order = FI_ORDER_SAS | FI_ORDER_RAW;
        assert!(offer(Some(&h), &t, 0, "h").is_err());
        let mut h = hints(0);
        h.domain_caps = FI_SHARED_AV;
        assert!(offer(Some(&h), &t, 0, "h").is_err());
        let mut h = hints(0);
        h.src_addr = Some(vec![0; 16]);
        assert!(offer(Some(&h), &t, 0, "h").is_err());
    }

    #[test]
    fn addresses_come_from_the_nid_node_and_service() {
        let o = offer(None, &Target::default(), 3, "h").unwrap();
        assert_eq!(o.src_addr, addr(3, PID_ANY));
        assert_eq!(o.dest_addr, None);
        let to = |node, service| Target {
            node: Some(node),
            service,
            source: false,
        };
        let o = offer(None, &to("0x5", Some("7")), 3, "h").unwrap();
        assert_eq!(o.dest_addr, Some(addr(5, 7)));
        let o = offer(None, &to("localhost", Some("2")), 3, "h").unwrap();
        assert_eq!(o.dest_addr, Some(addr(3, 2)));
        assert!(offer(None, &to("127.0.0.1", None), 3, "h").is_ok());
        assert!(offer(None, &to("h", None), 3, "h").is_ok());
        assert!(offer(None, &to("elsewhere", None), 3, "h").is_err());
        assert!(offer(None, &to("localhost", Some("9228")), 3, "h").is_err());
        // FI_SOURCE: this NIC only; the service does not choose the PID.
        let src = |node| Target {
            node: Some(node),
            service: Some("9228"),
            source: true,
        };
        let o = offer(None, &src("localhost"), 3, "h").unwrap();
        assert_eq!((o.src_addr, o.dest_addr), (addr(3, PID_ANY), None));
        assert!(offer(None, &src("4"), 3, "h").is_err());
    }

    #[test]
    fn rma_and_atomics_only_when_asked() {
        use crate::ffi::rma_types::{FI_MR_BASIC, FI_MR_LOCAL, FI_MR_PROV_KEY, FI_MR_VIRT_ADDR};
        let t = Target::default();
        let o = offer(None, &t, 0, "h").unwrap();
        assert_eq!(o.caps & (RMA_PRIMARY | RMA_MODIFIERS), 0);
        assert_eq!(o.mr_mode, 0);
        let mut h = hints(FI_RMA | FI_MSG);
        h.mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
        let o = offer(Some(&h), &t, 0, "h").unwrap();
        assert_eq!(o.caps & PRIMARY, FI_MSG);
        assert_eq!(o.caps & RMA_PRIMARY, FI_RMA);
        assert_eq!(o.caps & RMA_MODIFIERS, RMA_MODIFIERS);
        assert_eq!(o.mr_mode, FI_MR_PROV_KEY);
        assert_eq!(o.tx_caps & (FI_READ | FI_WRITE), FI_READ | FI_WRITE);
        assert_eq!(
            o.rx_caps & (FI_REMOTE_READ | FI_REMOTE_WRITE),
            FI_REMOTE_READ | FI_REMOTE_WRITE
        );
        assert_eq!(o.tx_caps & FI_REMOTE_WRITE, 0);
        // Only the target side asked for.
        let o = offer(Some(&hints(FI_ATOMIC | FI_REMOTE_WRITE)), &t, 0, "h").unwrap();
        assert_eq!(
            o.caps & (PRIMARY | RMA_PRIMARY),
            FI_ATOMIC,
            "only the primary asked for"
        );
        assert_eq!(o.caps & RMA_MODIFIERS, FI_REMOTE_WRITE);
        assert_eq!(o.tx_caps & RMA_TX_SIDE, 0);
        assert_eq!(o.rx_caps & FI_ATOMIC, FI_ATOMIC);
        assert_eq!(
            o.mr_mode, 0,
            "no FI_MR_PROV_KEY in the hints: the application's keys"
        );
        let mut h = hints(FI_RMA);
        h.mr_mode = FI_MR_BASIC;
        assert!(offer(Some(&h), &t, 0, "h").is_err());
    }
}
