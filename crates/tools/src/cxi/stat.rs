//! `stat` (like `cxi_stat`: what each device reports) and `dump-csrs` (like
//! `cxi_dump_csrs`: CSR contents read through the mapped CSR region).

use std::io::Write;

use firmware_spec::cassini::csr;
use platform::{Cluster, EngineKind};

use super::{RULE, ToolError, ToolResult, engine_name};
use userlib::cxi::{OpenOptions, get_device_list, open_device_with};

/// Options of [`stat`].
#[derive(Clone, Debug)]
pub struct StatOptions {
    /// Engine driving the pair.
    pub engine: EngineKind,
    /// Also print the hardware counters that are not zero.
    pub counters: bool,
}

impl Default for StatOptions {
    fn default() -> Self {
        StatOptions {
            engine: EngineKind::Threaded,
            counters: false,
        }
    }
}

fn pair(engine: &EngineKind) -> ToolResult<Cluster> {
    Ok(Cluster::builder()
        .nics(2)
        .engine(engine.clone())
        .memory_per_node(64 << 20)
        .build()?)
}

fn admin() -> OpenOptions {
    OpenOptions {
        admin: true,
        space: None,
    }
}

/// `cxi_stat`: the devices of every node of an emulated pair.
pub fn stat(opts: &StatOptions, out: &mut dyn Write) -> ToolResult<()> {
    let cluster = pair(&opts.engine)?;
    writeln!(out, "Emulated pair, {} engine", engine_name(&opts.engine))?;
    for node in cluster.nodes() {
        let devs = node.cxi_devices();
        for d in get_device_list(&devs)? {
            writeln!(out, "Device: {} (node {})", d.device_name, node.index())?;
            writeln!(out, "    Description: {}", d.fru_description)?;
            writeln!(out, "    NID: {} ({:#07x})", d.nid, d.nid)?;
            writeln!(out, "    PID bits: {}", d.pid_bits)?;
            writeln!(out, "    PID count: {}", d.pid_count)?;
            writeln!(out, "    PID granule: {}", d.pid_granule)?;
            writeln!(out, "    Min free shift: {}", d.min_free_shift)?;
            writeln!(out, "    Rendezvous PtlTE index: {}", d.rdzv_get_idx)?;
            writeln!(out, "    PCI bus: {}", d.pci_address)?;
            writeln!(
                out,
                "    PCI id: {:04x}:{:04x} ({})",
                d.vendor_id,
                d.device_id,
                if d.is_vf { "VF" } else { "PF" }
            )?;
            writeln!(
                out,
                "    Cassini version: {:#04x} (rev {}, proto {}, platform {})",
                d.cassini_version,
                d.device_rev,
                d.device_proto,
                match d.device_platform {
                    0 => "ASIC",
                    1 => "NETSIM",
                    2 => "Z1",
                    3 => "FPGA",
                    _ => "unknown",
                }
            )?;
            writeln!(out, "    Link MTU: {}", d.link_mtu)?;
            writeln!(out, "    Link speed: {} Mb/s", d.link_speed)?;
            writeln!(
                out,
                "    Link state: {}",
                if d.link_state == 1 { "up" } else { "down" }
            )?;
            writeln!(
                out,
                "    Retry handler: {}",
                if d.pct_eq != 0 {
                    "running"
                } else {
                    "not running"
                }
            )?;
            writeln!(
                out,
                "    Resources: PtlTEs {}  TXQs {}  TGQs {}  EQs {}  CTs {}  ACs {}  TLEs {}  LEs {}",
                d.num_ptes,
                d.num_txqs,
                d.num_tgqs,
                d.num_eqs,
                d.num_cts,
                d.num_acs,
                d.num_tles,
                d.num_les
            )?;
            if opts.counters {
                let dev = open_device_with(&devs, d.dev_id, admin())?;
                let csrs = dev.map_csr()?;
                let all = userlib::cxi::csr::counters(csrs.generation());
                let mut nonzero = Vec::new();
                for c in &all {
                    let v = csrs.read_counter(c)?;
                    if v != 0 {
                        nonzero.push(format!("      {}.{} = {v}", c.view, c.name));
                    }
                }
                // A freshly built pair has carried no traffic: say so rather than print a
                // heading with nothing under it.
                if nonzero.is_empty() {
                    writeln!(
                        out,
                        "    Counters: all {} are zero (no traffic since the device was probed)",
                        all.len()
                    )?;
                } else {
                    writeln!(out, "    Counters (non-zero):")?;
                    for line in nonzero {
                        writeln!(out, "{line}")?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Options of [`dump_csrs`].
#[derive(Clone, Debug)]
pub struct DumpOptions {
    /// Engine driving the pair.
    pub engine: EngineKind,
    /// Node whose device is dumped.
    pub node: usize,
    /// Only CSRs whose name contains this.
    pub grep: Option<String>,
    /// Entries dumped per CSR (arrays can hold thousands).
    pub max_entries: u32,
    /// Decode each entry's fields.
    pub fields: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            engine: EngineKind::Threaded,
            node: 0,
            grep: None,
            max_entries: 1,
            fields: false,
        }
    }
}

/// `cxi_dump_csrs`: the registers of one device of an emulated pair, read through the
/// mapped CSR region: `name[entry] @ offset: qwords`, optionally with decoded fields.
/// Returns the number of entries dumped.
pub fn dump_csrs(opts: &DumpOptions, out: &mut dyn Write) -> ToolResult<u64> {
    let cluster = pair(&opts.engine)?;
    let node = cluster
        .node(opts.node)
        .ok_or_else(|| ToolError::Option(format!("no node {}", opts.node)))?;
    let devs = node.cxi_devices();
    let dev = open_device_with(&devs, 0, admin())?;
    let csrs = dev.map_csr()?;
    let generation = csrs.generation();
    writeln!(out, "{RULE}")?;
    writeln!(
        out,
        "    CSR dump of {} (node {}, NID {:#x}, {:?})",
        dev.info().device_name,
        opts.node,
        dev.info().nid,
        generation
    )?;
    writeln!(out, "{RULE}")?;
    let grep = opts.grep.as_deref().map(str::to_ascii_lowercase);
    let mut n = 0u64;
    for c in csr::all().iter().filter(|c| {
        c.is_register()
            && c.applies_to(generation)
            && grep.as_deref().is_none_or(|g| c.name.contains(g))
    }) {
        for i in 0..c.entries.min(opts.max_entries) {
            let e = csrs.read_entry(c, i)?;
            let off = c.entry_offset(i).unwrap_or(c.offset);
            let words: Vec<String> = e
                .chunks(8)
                .map(|q| {
                    let mut b = [0u8; 8];
                    b[..q.len()].copy_from_slice(q);
                    format!("{:016x}", u64::from_le_bytes(b))
                })
                .collect();
            writeln!(out, "{}[{i}] @ {off:#010x}: {}", c.name, words.join(" "))?;
            if opts.fields {
                for f in c.fields.iter().filter(|f| f.is_register_field()) {
                    writeln!(out, "    {:<32} = {:#x}", f.name, f.get(&e))?;
                }
            }
            n += 1;
        }
    }
    writeln!(out, "{RULE}")?;
    writeln!(out, "{n} entries")?;
    Ok(n)
}
