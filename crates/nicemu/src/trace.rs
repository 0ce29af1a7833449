//! `nicemu trace`: run a short MPI job on an emulated machine with a capture hook on its
//! fabric and write every packet injected into the fabric to a pcapng (or pcap) file.
//!
//! The file format (docs/trace.md): link type [`LINKTYPE`] (`LINKTYPE_USER0`, 147); every
//! packet is a [`PSEUDO_HEADER_LEN`]-byte pseudo-header ([`pseudo_header`]) followed by the
//! frame exactly as the device built it (`Packet::data`). Timestamps are the virtual time
//! of the injection in nanoseconds (`if_tsresol` 9). `tools/wireshark/nicemu.lua` decodes
//! it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use emu_core::fabric::Packet;
use emu_core::time::SimTime;
use mpi::{Source, SystemOperation, Universe};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::{DataLink, PcapError};
use platform::{CaptureBuffer, EngineKind};
use runtime::Nic;

use crate::args::{EngineArg, NicArg};

/// The link type of a trace: `LINKTYPE_USER0` (tcpdump.org's link-type list reserves
/// 147..=162 for private use; Wireshark's "DLT_USER" table maps them to dissectors).
pub const LINKTYPE: u32 = 147;
/// Bytes of the pseudo-header before every frame.
pub const PSEUDO_HEADER_LEN: usize = 16;
/// Version of the pseudo-header layout (byte 0).
pub const PSEUDO_HEADER_VERSION: u8 = 1;
/// Family byte of a Cassini frame.
pub const FAMILY_CASSINI: u8 = 1;
/// Family byte of a Gemini frame.
pub const FAMILY_GEMINI: u8 = 2;

#[derive(Args)]
pub struct TraceArgs {
    /// NIC family of the emulated machine.
    #[arg(long, value_enum, default_value_t = NicArg::Cassini)]
    nic: NicArg,
    /// Nodes (one rank each, at least 2).
    #[arg(long, default_value_t = 2)]
    nodes: u32,
    /// Output file: pcapng, or classic pcap (nanosecond timestamps) if it ends in `.pcap`.
    #[arg(short = 'o', long, default_value = "nicemu.pcapng")]
    output: PathBuf,
    /// The job to trace.
    #[arg(long, value_enum, default_value_t = Workload::Mpi)]
    workload: Workload,
    /// Engine: deterministic (virtual time, the default) or threaded.
    #[arg(long, value_enum, default_value_t = EngineArg::Deterministic)]
    engine: EngineArg,
    /// Seed of the deterministic engine.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// What runs while the fabric is captured.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Ranks 0 and 1 exchange tagged messages of 8 B, 4 KiB and 64 KiB (eager and
    /// rendezvous paths), then every rank runs an allreduce and a barrier.
    Mpi,
    /// Only the allreduce and the barrier.
    Collectives,
}

/// Sizes of the tagged messages of the [`Workload::Mpi`] exchange.
const P2P_SIZES: [usize; 3] = [8, 4096, 65536];
/// The most nodes a trace may have (captures are kept in memory).
const MAX_NODES: u32 = 64;

/// What every rank runs; an error names what failed (the runtime adds the rank).
fn program(u: &Universe, workload: Workload) -> Result<(), String> {
    let w = u.world();
    let rank = w.rank();
    if workload == Workload::Mpi && w.size() >= 2 {
        for (i, &n) in P2P_SIZES.iter().enumerate() {
            let tag = 100 + i as i32;
            if rank == 0 {
                let buf: Vec<u8> = (0..n).map(|j| (j % 251) as u8).collect();
                w.process_at_rank(1)
                    .send_with_tag(&buf[..], tag)
                    .map_err(|e| format!("send of {n} B: {e}"))?;
            } else if rank == 1 {
                let mut buf = vec![0u8; n];
                w.process_at_rank(0)
                    .receive_into_with_tag(&mut buf[..], tag)
                    .map_err(|e| format!("receive of {n} B: {e}"))?;
                if buf.iter().enumerate().any(|(j, &b)| b != (j % 251) as u8) {
                    return Err(format!("the {n} B message arrived damaged"));
                }
            }
        }
    }
    let mut sum = 0u64;
    w.all_reduce_into(&(rank as u64 + 1), &mut sum, SystemOperation::sum())
        .map_err(|e| format!("allreduce: {e}"))?;
    let size = w.size() as u64;
    if sum != size * (size + 1) / 2 {
        return Err(format!("allreduce gave {sum}"));
    }
    w.barrier().map_err(|e| format!("barrier: {e}"))
}

/// The pseudo-header of one packet (big-endian): version, family, traffic class, flags
/// (0), source port, destination port, CRC32 of the frame.
pub fn pseudo_header(family: u8, p: &Packet, crc: u32) -> [u8; PSEUDO_HEADER_LEN] {
    let mut h = [0u8; PSEUDO_HEADER_LEN];
    h[0] = PSEUDO_HEADER_VERSION;
    h[1] = family;
    h[2] = p.tc.0;
    h[4..8].copy_from_slice(&p.src.0.to_be_bytes());
    h[8..12].copy_from_slice(&p.dst.0.to_be_bytes());
    h[12..16].copy_from_slice(&crc.to_be_bytes());
    h
}

fn record(family: u8, p: &Packet) -> Vec<u8> {
    let mut v = Vec::with_capacity(PSEUDO_HEADER_LEN + p.data.len());
    v.extend_from_slice(&pseudo_header(family, p, p.crc));
    v.extend_from_slice(&p.data);
    v
}

fn ts(t: SimTime) -> Duration {
    Duration::from_nanos(t.as_ps() / 1000)
}

/// Write `packets` (time, packet with its real CRC) of NIC family `family` to `path`:
/// pcapng, or classic pcap if the name ends in `.pcap`.
pub fn write_capture(path: &Path, family: u8, packets: &[(SimTime, Packet)]) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let classic = path.extension().is_some_and(|e| e == "pcap");
    write_records(BufWriter::new(file), classic, family, packets)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A writer's error as what it is: pcap-file calls a failed write "Error reading bytes",
/// so its I/O errors are unwrapped to the system's own words ("No space left on device").
fn pcap_error(e: PcapError) -> std::io::Error {
    match e {
        PcapError::IoError(io) => io,
        other => std::io::Error::other(other),
    }
}

fn write_records(
    out: BufWriter<File>,
    classic: bool,
    family: u8,
    packets: &[(SimTime, Packet)],
) -> std::io::Result<()> {
    let out = if classic {
        let header = PcapHeader {
            datalink: DataLink::from(LINKTYPE),
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let mut w = PcapWriter::with_header(out, header).map_err(pcap_error)?;
        for (t, p) in packets {
            let data = record(family, p);
            w.write_packet(&PcapPacket::new(ts(*t), data.len() as u32, &data))
                .map_err(pcap_error)?;
        }
        w.into_writer()
    } else {
        let mut w = PcapNgWriter::new(out).map_err(pcap_error)?;
        let family_name = if family == FAMILY_CASSINI {
            "cassini"
        } else {
            "gemini"
        };
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::from(LINKTYPE),
            snaplen: 0,
            options: vec![
                InterfaceDescriptionOption::IfName(format!("nicemu-{family_name}-fabric").into()),
                // Timestamps in nanoseconds (10^-9 s).
                InterfaceDescriptionOption::IfTsResol(9),
            ],
        })
        .map_err(pcap_error)?;
        for (t, p) in packets {
            let data = record(family, p);
            w.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: ts(*t),
                original_len: data.len() as u32,
                data: data.into(),
                options: vec![],
            })
            .map_err(pcap_error)?;
        }
        w.into_inner()
    };
    out.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|mut f| f.flush())
}

pub fn run(args: TraceArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.nodes < 2 || args.nodes > MAX_NODES {
        bail!(
            "--nodes must be between 2 and {MAX_NODES} (got {})",
            args.nodes
        );
    }
    let (nic, family, name) = match args.nic {
        NicArg::Cassini => (Nic::Cassini, FAMILY_CASSINI, "Cassini"),
        NicArg::Gemini => (Nic::Gemini, FAMILY_GEMINI, "Gemini"),
    };
    let engine = match args.engine {
        EngineArg::Threaded => EngineKind::Threaded,
        EngineArg::Deterministic => EngineKind::Deterministic { seed: args.seed },
    };
    let buffer = CaptureBuffer::new();
    let job = crate::job::in_process(nic, args.nodes, engine)?.capture(buffer.clone());
    let workload = args.workload;
    let report = job
        .try_run_with_digest(|u| program(u, workload))
        .context("the traced job failed")?;
    let packets = buffer.take();
    write_capture(&args.output, family, &packets)?;
    let bytes: usize = packets.iter().map(|(_, p)| p.data.len()).sum();
    writeln!(
        out,
        "trace: {} ranks on emulated {name}, workload {:?}: {} packets ({bytes} B of frames) \
         written to {}",
        args.nodes,
        workload,
        packets.len(),
        args.output.display()
    )?;
    writeln!(out, "fabric packets injected: {}", report.packets_injected)?;
    writeln!(
        out,
        "link type {LINKTYPE} (LINKTYPE_USER0); read it with: tshark -X \
         lua_script:tools/wireshark/nicemu.lua -r {} -V",
        args.output.display()
    )?;
    Ok(())
}
