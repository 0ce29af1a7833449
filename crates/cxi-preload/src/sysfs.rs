//! The sysfs tree of the emulated Cassini, as the kernel driver would show it, for the paths
//! libcxi, the libfabric CXI provider and their tools read (docs/real-cxi.md lists them).
//!
//! ```text
//! /sys/class/cxi_user/cxi0 -> ../../devices/pci0000:00/0000:3b:00.0/cxi_user/cxi0
//! /sys/class/cxi/cxi0      -> ../../devices/pci0000:00/0000:3b:00.0/cxi/cxi0
//! /sys/class/net/hsn0      -> ../../devices/pci0000:00/0000:3b:00.0/net/hsn0
//! /sys/devices/pci0000:00/0000:3b:00.0/
//!     vendor device uevent resource0 current_link_speed current_link_width aer_dev_*
//!     driver -> ../../../bus/pci/drivers/cxi_ss1
//!     properties/  (nid, pid_bits, ..., amo_remap_to_pcie_fadd rw, rdzv_get_en rw)
//!     fru/ port/ uc/ telemetry/<counter>
//!     cxi_user/cxi0/{device -> ../../../0000:3b:00.0, clients/<id>/wait/<n>/intr}
//!     cxi/cxi0/device, net/hsn0/{device, operstate, carrier, speed, addr_assign_type, address}
//! /sys/bus/pci/drivers/cxi_ss1/
//! /dev/cxi0
//! ```
//!
//! The tree is a pure function of the path ([`walk`]): which node a path names, following
//! the tree's symbolic links as the kernel does. What a file holds ([`FileId`]) is filled in
//! by the caller, the live parts (properties, counters, the MAC) from the device.

#![forbid(unsafe_code)]

use std::fmt::Write as _;

/// The PCI address of the emulated function (`platform`'s NIC slot, bus 0x3b).
pub const PCI_ADDRESS: &str = "0000:3b:00.0";
/// The PCI device directory.
pub const PCI_DIR: &str = "/sys/devices/pci0000:00/0000:3b:00.0";
/// The driver's name (`cxi_ss1`, what libcxi scans from `device/driver`).
pub const DRIVER: &str = "cxi_ss1";
/// The device's name.
pub const DEV_NAME: &str = "cxi0";
/// Its character device.
pub const DEV_PATH: &str = "/dev/cxi0";
/// The Ethernet netdev of the function.
pub const NETDEV: &str = "hsn0";

/// Properties (`/sys/class/cxi/cxi0/device/properties/*`, cass_sysfs.c).
pub const PROPERTIES: &[&str] = &[
    "nic_addr",
    "nid",
    "pid_bits",
    "pid_count",
    "pid_granule",
    "min_free_shift",
    "rdzv_get_idx",
    "hpc_mtu",
    "speed",
    "link",
    "rev",
    "proto",
    "platform",
    "system_type_identifier",
    "cassini_version",
    "uc_nic",
    "num_ptes",
    "num_txqs",
    "num_tgqs",
    "num_eqs",
    "num_cts",
    "num_acs",
    "num_tles",
    "num_les",
    "rgids_avail",
    "pct_eq",
    "driver_rev",
    "current_esm_link_speed",
    "rdzv_get_en",
    "pcie_corr_err",
    "pcie_uncorr_err",
    "amo_remap_to_pcie_fadd",
    "ats_enabled",
];

/// The writable properties.
pub const RW_PROPERTIES: &[&str] = &["amo_remap_to_pcie_fadd", "rdzv_get_en", "nid"];

/// FRU fields (`fru/*`).
pub const FRU: &[&str] = &[
    "chassis_type",
    "model",
    "part_number",
    "serial_number",
    "manufacturer",
    "manufacture_date",
    "vendor",
    "name",
    "sku",
    "version",
    "asset_tag",
    "description",
    "engineering_change_level",
    "other",
    "vendor_iana",
];

/// Port files of a Cassini 1 (`port/*`, what `cxi_stat` reads).
pub const PORT: &[&str] = &[
    "media",
    "speed",
    "link",
    "link_layer_retry",
    "loopback",
    "pause",
];

/// Netdev files (`/sys/class/net/hsn0/*`, what the CXI provider reads).
pub const NET: &[&str] = &[
    "operstate",
    "carrier",
    "speed",
    "addr_assign_type",
    "address",
    "mtu",
    "type",
];

/// PCI function files.
pub const PCI_FILES: &[&str] = &[
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "uevent",
    "resource0",
    "current_link_speed",
    "current_link_width",
    "aer_dev_correctable",
    "aer_dev_fatal",
    "aer_dev_nonfatal",
    "numa_node",
];

/// What a file is; its bytes come from [`crate::device`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileId {
    /// A file of the PCI function ([`PCI_FILES`]).
    Pci(&'static str),
    /// A property ([`PROPERTIES`]).
    Property(&'static str),
    /// A FRU field.
    Fru(&'static str),
    /// A port file.
    Port(&'static str),
    /// `uc/qspi_blob_version`.
    UcVersion,
    /// A telemetry counter, by name.
    Telemetry(String),
    /// A netdev file ([`NET`]).
    Net(&'static str),
    /// `uevent` of the cxi_user device.
    CxiUevent,
    /// The wait object `wait` of client `client`.
    Intr {
        /// Client (the open file's id).
        client: u32,
        /// Wait object handle.
        wait: u32,
    },
}

impl FileId {
    /// Whether writing is allowed (mode 0644).
    pub fn writable(&self) -> bool {
        matches!(self, FileId::Property(p) if RW_PROPERTIES.contains(p))
    }
}

/// A node of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A directory and its entries.
    Dir(Vec<String>),
    /// A regular file.
    File(FileId),
    /// A symbolic link and its target.
    Link(String),
    /// `/dev/cxi0`.
    CharDev,
}

/// What the tree needs to know of the running device: the open clients and their wait
/// objects (the directories under `clients/`), and which counters exist.
pub trait Live {
    /// Ids of open clients.
    fn clients(&self) -> Vec<u32>;
    /// Whether client `client` has wait object `wait`.
    fn has_wait(&self, client: u32, wait: u32) -> bool;
    /// Whether a telemetry counter of that name exists.
    fn counter(&self, name: &str) -> bool;
    /// Names of the telemetry counters (for listing).
    fn counters(&self) -> Vec<String>;
}

/// A [`Live`] with no device: no client, no counter.
pub struct NoDevice;

impl Live for NoDevice {
    fn clients(&self) -> Vec<u32> {
        Vec::new()
    }
    fn has_wait(&self, _client: u32, _wait: u32) -> bool {
        false
    }
    fn counter(&self, _name: &str) -> bool {
        false
    }
    fn counters(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Whether `path` could be one of ours: the cheap test every interposed call makes first.
pub fn maybe_ours(path: &[u8]) -> bool {
    path.starts_with(b"/sys/") || path.starts_with(b"/dev/cxi")
}

/// A lookup of one canonical path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Hit {
    /// Not part of the tree: the real file system answers.
    Real,
    /// Inside the tree but absent (`ENOENT`).
    Missing,
    /// A node of the tree.
    Node(Node),
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn find(list: &'static [&'static str], name: &str) -> Option<&'static str> {
    list.iter().copied().find(|s| *s == name)
}

fn num(s: &str) -> Option<u32> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

/// The node at canonical path `comps` (components after `/`).
fn lookup(comps: &[&str], live: &dyn Live) -> Hit {
    use Hit::{Missing, Node as N, Real};
    let pci: Vec<&str> = vec!["sys", "devices", "pci0000:00", PCI_ADDRESS];
    match comps {
        ["dev", "cxi0"] => N(Node::CharDev),
        ["dev", d] if d.starts_with("cxi") => Missing,
        ["sys", "class", "cxi_user"] | ["sys", "class", "cxi"] => {
            N(Node::Dir(vec![DEV_NAME.to_string()]))
        }
        ["sys", "class", class @ ("cxi_user" | "cxi"), "cxi0"] => N(Node::Link(format!(
            "../../devices/pci0000:00/{PCI_ADDRESS}/{class}/cxi0"
        ))),
        ["sys", "class", "cxi_user" | "cxi", ..] => Missing,
        ["sys", "class", "net", "hsn0"] => N(Node::Link(format!(
            "../../devices/pci0000:00/{PCI_ADDRESS}/net/hsn0"
        ))),
        ["sys", "bus", "pci", "drivers", "cxi_ss1"] => N(Node::Dir(vec![PCI_ADDRESS.to_string()])),
        ["sys", "bus", "pci", "drivers", "cxi_ss1", a] if *a == PCI_ADDRESS => N(Node::Link(
            format!("../../../../devices/pci0000:00/{PCI_ADDRESS}"),
        )),
        ["sys", "bus", "pci", "drivers", "cxi_ss1", ..] => Missing,
        _ if comps.len() >= 4 && comps[..4] == pci[..] => pci_node(&comps[4..], live),
        _ => Real,
    }
}

/// A node under the PCI function's directory.
fn pci_node(rest: &[&str], live: &dyn Live) -> Hit {
    use Hit::{Missing, Node as N};
    let up3 = format!("../../../{PCI_ADDRESS}");
    match rest {
        [] => {
            let mut v = names(PCI_FILES);
            v.extend(names(&[
                "driver",
                "properties",
                "fru",
                "port",
                "uc",
                "telemetry",
                "cxi_user",
                "cxi",
                "net",
            ]));
            N(Node::Dir(v))
        }
        ["driver"] => N(Node::Link(format!("../../../bus/pci/drivers/{DRIVER}"))),
        [f] if find(PCI_FILES, f).is_some() => N(Node::File(FileId::Pci(
            find(PCI_FILES, f).unwrap_or("vendor"),
        ))),
        ["properties"] => N(Node::Dir(names(PROPERTIES))),
        ["properties", p] => {
            find(PROPERTIES, p).map_or(Missing, |p| N(Node::File(FileId::Property(p))))
        }
        ["fru"] => N(Node::Dir(names(FRU))),
        ["fru", f] => find(FRU, f).map_or(Missing, |f| N(Node::File(FileId::Fru(f)))),
        ["port"] => N(Node::Dir(names(PORT))),
        ["port", f] => find(PORT, f).map_or(Missing, |f| N(Node::File(FileId::Port(f)))),
        ["uc"] => N(Node::Dir(vec!["qspi_blob_version".into()])),
        ["uc", "qspi_blob_version"] => N(Node::File(FileId::UcVersion)),
        ["telemetry"] => N(Node::Dir(live.counters())),
        ["telemetry", name] if live.counter(name) => {
            N(Node::File(FileId::Telemetry(name.to_string())))
        }
        ["cxi_user"] | ["cxi"] => N(Node::Dir(vec![DEV_NAME.into()])),
        ["cxi_user", "cxi0"] => N(Node::Dir(names(&["device", "clients", "uevent"]))),
        ["cxi", "cxi0"] => N(Node::Dir(names(&["device"]))),
        ["cxi_user" | "cxi", "cxi0", "device"] => N(Node::Link(up3)),
        ["cxi_user", "cxi0", "uevent"] => N(Node::File(FileId::CxiUevent)),
        ["cxi_user", "cxi0", "clients"] => N(Node::Dir(
            live.clients().iter().map(|c| c.to_string()).collect(),
        )),
        ["cxi_user", "cxi0", "clients", c, tail @ ..] => match num(c) {
            Some(c) if live.clients().contains(&c) => client_node(c, tail, live),
            _ => Missing,
        },
        ["net"] => N(Node::Dir(vec![NETDEV.into()])),
        ["net", "hsn0"] => {
            let mut v = names(NET);
            v.push("device".into());
            N(Node::Dir(v))
        }
        ["net", "hsn0", "device"] => N(Node::Link(up3)),
        ["net", "hsn0", f] => find(NET, f).map_or(Missing, |f| N(Node::File(FileId::Net(f)))),
        _ => Missing,
    }
}

fn client_node(client: u32, rest: &[&str], live: &dyn Live) -> Hit {
    use Hit::{Missing, Node as N};
    match rest {
        [] => N(Node::Dir(vec!["wait".into()])),
        // The handles are not listed (a directory listing is not served; docs/real-cxi.md).
        ["wait"] => N(Node::Dir(Vec::new())),
        ["wait", w, tail @ ..] => match num(w) {
            Some(w) if live.has_wait(client, w) => match tail {
                [] => N(Node::Dir(vec!["intr".into()])),
                ["intr"] => N(Node::File(FileId::Intr { client, wait: w })),
                _ => Missing,
            },
            _ => Missing,
        },
        _ => Missing,
    }
}

/// Why a path does not resolve in the tree.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WalkError {
    /// Not part of the tree: ask the real file system.
    Real,
    /// `ENOENT`.
    NoEntry,
    /// `ENOTDIR`: a component other than the last is a file.
    NotDir,
    /// `ELOOP`: too many links.
    Loop,
}

/// Where a path leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical path (`realpath`): links followed, `.` and `..` gone.
    pub canonical: String,
    /// The node there (a [`Node::Link`] only when the last link was not followed).
    pub node: Node,
}

/// Resolve `path` (absolute) in the tree, following links, the last one only when
/// `follow_last` (`stat` vs `lstat`). [`WalkError::Real`] when the path leaves the tree
/// before reaching one of its nodes: the real file system then answers.
pub fn walk(path: &str, follow_last: bool, live: &dyn Live) -> Result<Resolved, WalkError> {
    if !path.starts_with('/') || !maybe_ours(path.as_bytes()) {
        return Err(WalkError::Real);
    }
    let mut todo: Vec<String> = path
        .split('/')
        .filter(|c| !c.is_empty())
        .rev()
        .map(str::to_string)
        .collect();
    let mut comps: Vec<String> = Vec::new();
    let mut inside = false;
    let mut hops = 0;
    while let Some(c) = todo.pop() {
        if c == "." {
            continue;
        }
        if c == ".." {
            comps.pop();
            continue;
        }
        comps.push(c);
        let refs: Vec<&str> = comps.iter().map(String::as_str).collect();
        match lookup(&refs, live) {
            Hit::Real => {
                if inside {
                    // Left the tree through `..` into a real directory; we only answer
                    // for paths that end inside.
                    inside = false;
                }
                continue;
            }
            Hit::Missing => return Err(WalkError::NoEntry),
            Hit::Node(node) => {
                inside = true;
                let last = todo.is_empty();
                match node {
                    Node::Link(target) if !last || follow_last => {
                        hops += 1;
                        if hops > 40 {
                            return Err(WalkError::Loop);
                        }
                        comps.pop();
                        if target.starts_with('/') {
                            comps.clear();
                        }
                        for t in target.split('/').filter(|t| !t.is_empty()).rev() {
                            todo.push(t.to_string());
                        }
                    }
                    Node::File(_) | Node::CharDev if !last => return Err(WalkError::NotDir),
                    node if last => {
                        return Ok(Resolved {
                            canonical: format!("/{}", comps.join("/")),
                            node,
                        });
                    }
                    _ => {}
                }
            }
        }
    }
    if !inside {
        return Err(WalkError::Real);
    }
    // Only reached when the path ended on a link that was followed into a real place.
    Err(WalkError::Real)
}

/// The entries of a real directory that the tree adds (`/sys/class/net` gets `hsn0`).
pub fn extra_entries(dir: &str) -> &'static [&'static str] {
    match dir.trim_end_matches('/') {
        "/sys/class/net" => &["hsn0"],
        _ => &[],
    }
}

/// `fnmatch(pattern, name, 0)` for the patterns glob uses on one component: `*`, `?`,
/// `[...]` (with `!`/`^` and ranges) and `\` escapes. A leading `.` is matched only
/// literally.
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some('[') => {
                let Some(&c) = n.first() else { return false };
                let mut i = 1;
                let neg = matches!(p.get(1), Some('!') | Some('^'));
                if neg {
                    i += 1;
                }
                let mut hit = false;
                let mut first = true;
                while i < p.len() && (first || p[i] != ']') {
                    first = false;
                    if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
                        hit |= p[i] <= c && c <= p[i + 2];
                        i += 3;
                    } else {
                        hit |= p[i] == c;
                        i += 1;
                    }
                }
                if i >= p.len() {
                    // No closing bracket: a literal '['.
                    return n.first() == Some(&'[') && go(&p[1..], &n[1..]);
                }
                hit != neg && go(&p[i + 1..], &n[1..])
            }
            Some('\\') if p.len() > 1 => n.first() == Some(&p[1]) && go(&p[2..], &n[1..]),
            Some(&c) => n.first() == Some(&c) && go(&p[1..], &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

/// The paths of the tree that `pattern` matches, when only its last component has
/// wildcards: the entries of its directory (of the tree, or the tree's additions to a real
/// directory), spelled with the pattern's own directory part (libcxi parses the device
/// number out of `/sys/class/cxi_user/cxiN`).
pub fn glob(pattern: &str, live: &dyn Live) -> Vec<String> {
    let Some((dir, last)) = pattern.rsplit_once('/') else {
        return Vec::new();
    };
    if dir.contains(['*', '?', '[']) {
        return Vec::new();
    }
    let dir_path = if dir.is_empty() { "/" } else { dir };
    let entries: Vec<String> = match walk(dir_path, true, live) {
        Ok(Resolved {
            node: Node::Dir(e), ..
        }) => e,
        Err(WalkError::Real) => extra_entries(dir_path)
            .iter()
            .map(|s| s.to_string())
            .collect(),
        _ => Vec::new(),
    };
    let has_wild = last.contains(['*', '?', '[']);
    let mut out: Vec<String> = entries
        .into_iter()
        .filter(|e| {
            if has_wild {
                fnmatch(last, e)
            } else {
                e == last
            }
        })
        .map(|e| format!("{dir}/{e}"))
        .collect();
    out.sort();
    out
}

/// `key=value` lines of the cxi_user device's `uevent`.
pub fn cxi_uevent() -> String {
    let mut s = String::new();
    let _ = writeln!(s, "MAJOR=240");
    let _ = writeln!(s, "MINOR=0");
    let _ = writeln!(s, "DEVNAME={DEV_NAME}");
    s
}

/// The PCI function's `uevent`.
pub fn pci_uevent(vendor: u16, device: u16) -> String {
    format!(
        "DRIVER={DRIVER}\nPCI_CLASS=20000\nPCI_ID={vendor:04X}:{device:04X}\n\
         PCI_SUBSYS_ID={vendor:04X}:{device:04X}\nPCI_SLOT_NAME={PCI_ADDRESS}\n\
         MODALIAS=pci:v{vendor:08X}d{device:08X}sv{vendor:08X}sd{device:08X}bc02sc00i00\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    struct OneClient;
    impl Live for OneClient {
        fn clients(&self) -> Vec<u32> {
            vec![1]
        }
        fn has_wait(&self, client: u32, wait: u32) -> bool {
            (client, wait) == (1, 3)
        }
        fn counter(&self, name: &str) -> bool {
            name == "cq_success_tx_cntr"
        }
        fn counters(&self) -> Vec<String> {
            vec!["cq_success_tx_cntr".into()]
        }
    }

    fn canon(p: &str) -> String {
        walk(p, true, &OneClient).unwrap().canonical
    }

    #[test]
    fn libcxi_paths_resolve_as_on_a_real_node() {
        // cxil_query_devinfo: realpath of device/driver and device.
        assert_eq!(
            canon("/sys/class/cxi_user/cxi0/device/driver"),
            "/sys/bus/pci/drivers/cxi_ss1"
        );
        assert_eq!(canon("/sys/class/cxi_user/cxi0/device"), PCI_DIR);
        assert_eq!(canon("/sys/class/cxi/cxi0/device"), PCI_DIR);
        assert_eq!(canon("/sys/class/net/hsn0/device"), PCI_DIR);
        assert_eq!(
            walk("/sys/class/cxi_user/cxi0/device/resource0", true, &NoDevice)
                .unwrap()
                .node,
            Node::File(FileId::Pci("resource0"))
        );
        assert_eq!(
            walk("/sys/class/cxi/cxi0/device/properties/nid", true, &NoDevice)
                .unwrap()
                .node,
            Node::File(FileId::Property("nid"))
        );
        // lstat sees the link itself.
        assert!(matches!(
            walk("/sys/class/cxi_user/cxi0", false, &NoDevice)
                .unwrap()
                .node,
            Node::Link(_)
        ));
        assert_eq!(
            walk(
                "/sys/class/cxi_user/cxi0/clients/1/wait/3/intr",
                true,
                &OneClient
            )
            .unwrap()
            .node,
            Node::File(FileId::Intr { client: 1, wait: 3 })
        );
        assert_eq!(
            walk(
                "/sys/class/cxi/cxi0/device/telemetry/cq_success_tx_cntr",
                true,
                &OneClient
            )
            .unwrap()
            .node,
            Node::File(FileId::Telemetry("cq_success_tx_cntr".into()))
        );
        assert_eq!(
            walk("/dev/cxi0", true, &NoDevice).unwrap().node,
            Node::CharDev
        );
    }

    #[test]
    fn other_paths_are_the_real_file_systems_or_absent() {
        assert_eq!(walk("/etc/passwd", true, &NoDevice), Err(WalkError::Real));
        assert_eq!(
            walk("/sys/class/net/lo", true, &NoDevice),
            Err(WalkError::Real)
        );
        assert_eq!(
            walk("/sys/class/net", true, &NoDevice),
            Err(WalkError::Real)
        );
        assert_eq!(walk("/sys", true, &NoDevice), Err(WalkError::Real));
        assert_eq!(walk("/dev/cxi1", true, &NoDevice), Err(WalkError::NoEntry));
        assert_eq!(
            walk("/sys/class/cxi_user/cxi1", true, &NoDevice),
            Err(WalkError::NoEntry)
        );
        assert_eq!(
            walk(
                "/sys/class/cxi/cxi0/device/properties/bogus",
                true,
                &NoDevice
            ),
            Err(WalkError::NoEntry)
        );
        assert_eq!(
            walk("/sys/class/cxi/cxi0/device/vendor/x", true, &NoDevice),
            Err(WalkError::NotDir)
        );
        // A wait object of a client that is not open, a non-canonical number.
        assert_eq!(
            walk(
                "/sys/class/cxi_user/cxi0/clients/2/wait/3/intr",
                true,
                &OneClient
            ),
            Err(WalkError::NoEntry)
        );
        assert_eq!(
            walk(
                "/sys/class/cxi_user/cxi0/clients/01/wait/3/intr",
                true,
                &OneClient
            ),
            Err(WalkError::NoEntry)
        );
        // `..` out of the tree and back.
        assert_eq!(
            canon("/sys/class/cxi_user/cxi0/device/../0000:3b:00.0/properties/../vendor"),
            format!("{PCI_DIR}/vendor")
        );
        assert_eq!(walk("relative/path", true, &NoDevice), Err(WalkError::Real));
    }

    #[test]
    fn globs_keep_the_callers_spelling() {
        assert_eq!(
            glob("/sys/class/cxi_user/cxi*", &NoDevice),
            vec!["/sys/class/cxi_user/cxi0"]
        );
        assert_eq!(
            glob("/sys/class/cxi/cxi[0-9]", &NoDevice),
            vec!["/sys/class/cxi/cxi0"]
        );
        assert_eq!(
            glob("/sys/class/cxi_user/foo*", &NoDevice),
            Vec::<String>::new()
        );
        // The real /sys/class/net gets hsn0 added.
        assert_eq!(
            glob("/sys/class/net/*", &NoDevice),
            vec!["/sys/class/net/hsn0"]
        );
        assert_eq!(glob("/sys/class/net/eth*", &NoDevice), Vec::<String>::new());
        assert_eq!(glob("/etc/*", &NoDevice), Vec::<String>::new());
    }

    #[test]
    fn fnmatch_handles_globs_components() {
        for (p, n, want) in [
            ("cxi*", "cxi0", true),
            ("cxi*", "cx", false),
            ("*", ".hidden", false),
            ("?xi0", "cxi0", true),
            ("cxi[0-3]", "cxi2", true),
            ("cxi[!0-3]", "cxi2", false),
            ("cxi[^a]", "cxi0", true),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("[", "[", true),
        ] {
            assert_eq!(fnmatch(p, n), want, "{p} {n}");
        }
    }
}
