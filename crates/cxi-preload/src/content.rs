//! What each sysfs file of the tree ([`crate::sysfs`]) holds, in the kernel driver's formats
//! (cass_sysfs.c, cass_telem.c, the netdev core): properties from the device's
//! `DEV_INFO_GET` answer, telemetry counters read from its CSRs (`value@sec.nsec`), the
//! netdev's locally administered MAC from the NID. The writable properties
//! (`amo_remap_to_pcie_fadd`, `rdzv_get_en`) keep what was last written, per process.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use driver::cassini::uapi::{DevInfoUse, NoArgCmd};
use driver::cassini::{CxiDevice, Opcode};
use firmware_spec::cassini::pci as cpci;

use crate::sysfs::{self, FileId};

/// `amo_remap_to_pcie_fadd`: -1 (disabled) until written.
static AMO_REMAP: AtomicI32 = AtomicI32::new(-1);
/// `rdzv_get_en` as written (-1: the driver's configuration).
static RDZV_GET_EN: AtomicI32 = AtomicI32::new(-1);

/// What [`bytes`] needs of the device: `None` for files that do not need it (the static
/// parts of the tree), else the node's device.
pub fn needs_device(id: &FileId) -> bool {
    !matches!(
        id,
        FileId::Pci(_)
            | FileId::CxiUevent
            | FileId::Intr { .. }
            | FileId::UcVersion
            | FileId::Port(_)
    )
}

fn dev_info(dev: &Arc<CxiDevice>) -> DevInfoUse {
    let c = dev.open();
    c.call(&driver::cassini::uapi::As::<{ Opcode::DevInfoGet as u32 }, _>(NoArgCmd::default()))
        .unwrap_or_default()
}

/// The counters of the device by telemetry name: every 64-bit slot of every Cassini 1
/// `c_*_cntrs` / `c1_*_cntrs` view of the CSR map, named as the driver names its telemetry
/// files (cassini_cntr_desc.h): the block without `c_`/`c1_` and `_cntrs`, the field, and
/// for a field of several counters `_<index>` (`cq_success_tx_cntr`,
/// `mb_crmc_ring_sbe_0`, `ixe_tc_req_ecn_pkts_3`).
fn counter_table() -> &'static Vec<(String, u64)> {
    static T: OnceLock<Vec<(String, u64)>> = OnceLock::new();
    T.get_or_init(|| {
        use firmware_spec::cassini::csr;
        let mut out = Vec::new();
        for c in csr::all()
            .iter()
            .filter(|c| c.name.ends_with("_cntrs") && c.applies_to(cpci::Generation::Cassini1))
        {
            let block = c
                .name
                .trim_end_matches("_cntrs")
                .trim_start_matches("c1_")
                .trim_start_matches("c_");
            for f in c.fields {
                if !f.bit.is_multiple_of(64) || !f.width.is_multiple_of(64) || f.width == 0 {
                    continue;
                }
                let n = f.width / 64;
                for i in 0..n {
                    let name = if n == 1 {
                        format!("{block}_{}", f.name)
                    } else {
                        format!("{block}_{}_{i}", f.name)
                    };
                    out.push((name, c.offset + u64::from(f.bit / 8) + 8 * u64::from(i)));
                }
            }
        }
        out
    })
}

/// Names of the telemetry counters.
pub fn counter_names() -> Vec<String> {
    counter_table().iter().map(|(n, _)| n.clone()).collect()
}

/// Whether `name` is a telemetry counter.
pub fn is_counter(name: &str) -> bool {
    counter_table().iter().any(|(n, _)| n == name)
}

fn read_counter(dev: &CxiDevice, name: &str) -> Option<u64> {
    let off = counter_table().iter().find(|(n, _)| n == name)?.1;
    let mut b = [0u8; 8];
    dev.hw()
        .bar()
        .read(driver::cassini::hw::csr_region_offset() + off, &mut b)
        .ok()?;
    Some(u64::from_le_bytes(b) & ((1u64 << userlib::cxi::csr::CNTR_BITS) - 1))
}

fn now() -> (u64, u32) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

/// The locally administered MAC of the netdev (`02:00:00` and the 20-bit NID; the CXI
/// provider requires a locally administered unicast address, as HPE's netsim VMs set).
pub fn mac(nid: u32) -> String {
    format!(
        "02:00:00:{:02x}:{:02x}:{:02x}",
        (nid >> 16) & 0xf,
        (nid >> 8) & 0xff,
        nid & 0xff
    )
}

/// The bytes of file `id`. `dev` is the node's device when [`needs_device`] says so.
pub fn bytes(id: &FileId, dev: Option<&Arc<CxiDevice>>) -> Option<Vec<u8>> {
    let (vendor, device) = (cpci::VENDOR_CRAY, cpci::DEVICE_CASSINI1);
    let s: String = match id {
        FileId::Pci(f) => match *f {
            "vendor" | "subsystem_vendor" => format!("{vendor:#06x}\n"),
            "device" | "subsystem_device" => format!("{device:#06x}\n"),
            "uevent" => sysfs::pci_uevent(vendor, device),
            "resource0" => String::new(),
            "current_link_speed" => "16.0 GT/s PCIe\n".into(),
            "current_link_width" => "16\n".into(),
            "numa_node" => "-1\n".into(),
            // aer_dev_*: no error was ever counted.
            _ => String::new(),
        },
        FileId::CxiUevent => sysfs::cxi_uevent(),
        FileId::Intr { .. } => "\n".into(),
        FileId::UcVersion => "nicemu\n".into(),
        FileId::Port(f) => match *f {
            "media" => "backplane\n",
            "speed" => "BS_200G\n",
            "link" => "up\n",
            "link_layer_retry" => "on\n",
            "loopback" => "off\n",
            _ => "none\n",
        }
        .into(),
        FileId::Property(p) => property(p, dev?)?,
        FileId::Fru(f) => match *f {
            "description" => "nicemu emulated Cassini (HPE Slingshot-11 NIC)\n".into(),
            "part_number" => "NICEMU-CASSINI-1\n".into(),
            "serial_number" => format!("NICEMU{:05X}\n", dev?.info().nid),
            "manufacturer" => "nicemu\n".into(),
            "model" => "Cassini 1.1\n".into(),
            _ => String::new(),
        },
        FileId::Telemetry(name) => {
            let v = read_counter(dev?, name)?;
            let (sec, nsec) = now();
            format!("{v}@{sec}.{nsec:09}\n")
        }
        FileId::Net(f) => match *f {
            "operstate" => "up\n".into(),
            "carrier" => "1\n".into(),
            "speed" => "200000\n".into(),
            "addr_assign_type" => "3\n".into(),
            "address" => format!("{}\n", mac(dev?.info().nid)),
            "mtu" => "1500\n".into(),
            _ => "1\n".into(),
        },
    };
    Some(s.into_bytes())
}

fn property(p: &str, dev: &Arc<CxiDevice>) -> Option<String> {
    let i = dev_info(dev);
    let d = dev.info();
    Some(match p {
        "nid" | "nic_addr" => format!("{:#x}\n", i.nid),
        "pid_bits" => format!("{}\n", i.pid_bits),
        "pid_count" => format!("{}\n", i.pid_count),
        "pid_granule" => format!("{}\n", i.pid_granule),
        "min_free_shift" => format!("{}\n", i.min_free_shift),
        "rdzv_get_idx" => format!("{}\n", i.rdzv_get_idx),
        "hpc_mtu" => format!("{}\n", i.link_mtu),
        "speed" => format!("{}\n", i.link_speed),
        "link" => format!("{}\n", i.link_state),
        "rev" => format!("{}\n", i.device_rev),
        "proto" => format!("{}\n", i.device_proto),
        "platform" => format!("{}\n", i.device_platform),
        "system_type_identifier" => format!("{}\n", i.system_type_identifier),
        "cassini_version" => match d.version.generation() {
            cpci::Generation::Cassini2 => "2.0\n".into(),
            cpci::Generation::Cassini1 => {
                if d.version == cpci::CassiniVersion::Cassini1_0 {
                    "1.0\n".into()
                } else {
                    "1.1\n".into()
                }
            }
        },
        "uc_nic" => format!("{}\n", i.uc_nic),
        "pct_eq" => format!("{}\n", i.pct_eq),
        "num_ptes" => format!("{}\n", i.num_ptes),
        "num_txqs" => format!("{}\n", i.num_txqs),
        "num_tgqs" => format!("{}\n", i.num_tgqs),
        "num_eqs" => format!("{}\n", i.num_eqs),
        "num_cts" => format!("{}\n", i.num_cts),
        "num_acs" => format!("{}\n", i.num_acs),
        "num_tles" => format!("{}\n", i.num_tles),
        "num_les" => format!("{}\n", i.num_les),
        "rgids_avail" => format!("{}\n", dev.free_counts().rgids),
        "driver_rev" => format!("nicemu {}\n", env!("CARGO_PKG_VERSION")),
        "current_esm_link_speed" => "Absent\n".into(),
        "rdzv_get_en" => {
            let v = RDZV_GET_EN.load(Ordering::Relaxed);
            let v = if v < 0 {
                i32::from(dev.config().rdzv_get_en)
            } else {
                v
            };
            format!("{v}\n")
        }
        "amo_remap_to_pcie_fadd" => format!("{}\n", AMO_REMAP.load(Ordering::Relaxed)),
        "pcie_corr_err" | "pcie_uncorr_err" | "ats_enabled" => "0\n".into(),
        _ => return None,
    })
}

/// Store what was written to a writable file (`kstrtoint` / `kstrtobool` of the text);
/// `false` for text the driver would refuse (`EINVAL`).
pub fn store(id: &FileId, text: &[u8]) -> bool {
    let t = String::from_utf8_lossy(text);
    let t = t.trim();
    match id {
        FileId::Property("amo_remap_to_pcie_fadd") => match t.parse::<i32>() {
            Ok(v) => {
                AMO_REMAP.store(v, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        },
        FileId::Property("rdzv_get_en") => {
            let v = match t {
                "1" | "y" | "Y" | "on" | "true" => 1,
                "0" | "n" | "N" | "off" | "false" => 0,
                _ => return false,
            };
            RDZV_GET_EN.store(v, Ordering::Relaxed);
            true
        }
        // The NID is fixed by the fabric position of this process's node.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_locally_administered_unicast() {
        assert_eq!(mac(0), "02:00:00:00:00:00");
        assert_eq!(mac(0x12345), "02:00:00:01:23:45");
        let first = u8::from_str_radix(&mac(7)[..2], 16).unwrap();
        assert_eq!(first & 3, 2);
    }

    #[test]
    fn telemetry_names_follow_libcxis() {
        assert!(is_counter("cq_success_tx_cntr"));
        assert!(is_counter("lpe_success_cntr"));
        // Fields of several counters get an index; Cassini 1 views drop `c1_`.
        for n in [
            "mb_crmc_ring_sbe_0",
            "ixe_tc_req_ecn_pkts_3",
            "pi_ipd_pri_rtrgt_tlps",
            "oxe_prf_set1_occ_hist_bin3",
            "ee_eq_state_ucor_err_cntr",
        ] {
            assert!(is_counter(n), "{n}");
        }
        assert!(!is_counter("bogus"));
    }

    #[test]
    fn writable_properties_parse_as_the_kernel_does() {
        assert!(store(&FileId::Property("amo_remap_to_pcie_fadd"), b"3\n"));
        assert_eq!(AMO_REMAP.load(Ordering::Relaxed), 3);
        assert!(!store(&FileId::Property("amo_remap_to_pcie_fadd"), b"x"));
        assert!(store(&FileId::Property("amo_remap_to_pcie_fadd"), b"-1"));
        assert!(!store(&FileId::Property("nid"), b"5"));
        assert!(store(&FileId::Property("rdzv_get_en"), b"off"));
        assert!(!store(&FileId::Property("rdzv_get_en"), b"maybe"));
    }

    #[test]
    fn static_files_need_no_device() {
        let v = bytes(&FileId::Pci("vendor"), None).unwrap();
        assert_eq!(v, b"0x17db\n");
        assert!(!needs_device(&FileId::Pci("resource0")));
        assert!(needs_device(&FileId::Property("nid")));
        assert_eq!(bytes(&FileId::Property("nid"), None), None);
        let u = String::from_utf8(bytes(&FileId::Pci("uevent"), None).unwrap()).unwrap();
        assert!(u.contains("PCI_SLOT_NAME=0000:3b:00.0\n"), "{u}");
    }
}
