//! `nicemu trace`: the capture file holds one record per fabric packet, each with the
//! documented pseudo-header, and (when tshark is installed) the Wireshark dissector in
//! tools/wireshark decodes every frame.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

fn nicemu(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(args)
        .output()
        .expect("run nicemu");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nicemu-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The number after `prefix` on the line that starts with it.
fn count(out: &str, prefix: &str) -> usize {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {out}"))
        .trim()
        .parse()
        .unwrap()
}

/// One record of a trace, split into its pseudo-header fields and frame.
#[derive(Debug)]
struct Record {
    time: Duration,
    family: u8,
    tc: u8,
    src: u32,
    dst: u32,
    crc: u32,
    frame: Vec<u8>,
}

fn split(time: Duration, data: &[u8]) -> Record {
    assert!(data.len() >= 16, "record of {} B", data.len());
    assert_eq!(data[0], 1, "pseudo-header version");
    assert_eq!(data[3], 0, "pseudo-header flags");
    let be = |i: usize| u32::from_be_bytes(data[i..i + 4].try_into().unwrap());
    Record {
        time,
        family: data[1],
        tc: data[2],
        src: be(4),
        dst: be(8),
        crc: be(12),
        frame: data[16..].to_vec(),
    }
}

fn read_pcapng(path: &Path) -> Vec<Record> {
    let mut r = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    let mut interfaces = 0;
    while let Some(block) = r.next_block() {
        match block.unwrap() {
            Block::InterfaceDescription(idb) => {
                interfaces += 1;
                assert_eq!(u32::from(idb.linktype), 147, "LINKTYPE_USER0");
            }
            Block::EnhancedPacket(epb) => {
                assert_eq!(epb.interface_id, 0);
                assert_eq!(epb.original_len as usize, epb.data.len());
                out.push(split(epb.timestamp, &epb.data));
            }
            other => panic!("unexpected block {other:?}"),
        }
    }
    assert_eq!(interfaces, 1);
    out
}

fn read_pcap(path: &Path) -> Vec<Record> {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    assert_eq!(u32::from(r.header().datalink), 147);
    assert_eq!(
        r.header().ts_resolution,
        pcap_file::TsResolution::NanoSecond
    );
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        out.push(split(p.timestamp, &p.data));
    }
    out
}

/// Every record: the family asked for, ports of the machine, a CRC that matches its frame,
/// virtual time never going backwards.
fn check_records(records: &[Record], family: u8, nodes: u32) {
    let mut last = Duration::ZERO;
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.family, family, "record {i}");
        assert!(
            r.src < nodes && r.dst < nodes && r.src != r.dst,
            "record {i}: {r:?}"
        );
        assert_eq!(r.crc, crc32fast::hash(&r.frame), "record {i}");
        assert!(r.time >= last, "record {i} goes back in time");
        last = r.time;
    }
    assert!(last > Duration::ZERO, "virtual time never advanced");
}

/// `tshark` with the dissector over `path`: one output line per frame, with `fields`.
fn tshark(path: &Path, fields: &[&str]) -> Option<Vec<String>> {
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!("skipping the dissector check: tshark is not installed");
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/nicemu.lua");
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", script.display()))
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {err}");
    assert!(
        !err.contains("Lua: Error"),
        "the dissector failed to load: {err}"
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn a_cassini_trace_holds_every_fabric_packet_and_the_dissector_decodes_them() {
    let path = scratch("cassini.pcapng");
    let p = path.to_str().unwrap();
    let (ok, out, err) = nicemu(&["trace", "--nic", "cassini", "--nodes", "3", "-o", p]);
    assert!(ok, "{err}");
    let injected = count(&out, "fabric packets injected:");
    let records = read_pcapng(&path);
    assert_eq!(records.len(), injected);
    check_records(&records, 1, 3);
    // Every Cassini frame: fabric header version 4, its total length, and the PCT tag.
    for r in &records {
        assert_eq!(r.frame[0] >> 4, 4);
        let total = usize::from(u16::from_be_bytes([r.frame[2], r.frame[3]]));
        assert_eq!(total, r.frame.len());
    }
    // The 64 KiB message went by rendezvous: its data came back in GET replies, so some
    // frames are much larger than others.
    assert!(records.iter().any(|r| r.frame.len() > 2048));
    let Some(lines) = tshark(
        &path,
        &[
            "nicemu.src",
            "nicemu.cxi.kind",
            "nicemu.cxi.opcode",
            "nicemu.cxi.match_bits",
            "nicemu.cxi.pct.seq",
        ],
    ) else {
        return;
    };
    assert_eq!(lines.len(), injected);
    for (l, r) in lines.iter().zip(&records) {
        let f: Vec<&str> = l.split('|').collect();
        assert_eq!(f[0], r.src.to_string(), "{l}");
        assert!(!f[1].is_empty(), "no packet kind: {l}");
        assert!(!f[4].is_empty(), "no PCT sequence number: {l}");
    }
    // Opcodes 1 PUT, 2 GET, 3 RENDEZVOUS_PUT and 7 SMALL_MESSAGE all appear, with the MPI
    // tags (100..=102) in the match bits of the tagged messages.
    for op in ["1", "2", "3", "7"] {
        assert!(
            lines.iter().any(|l| l.split('|').nth(2) == Some(op)),
            "no opcode {op}: {lines:#?}"
        );
    }
    for tag in ["0x64", "0x65", "0x66"] {
        assert!(
            lines
                .iter()
                .any(|l| l.split('|').nth(3).is_some_and(|m| m.ends_with(&tag[2..]))),
            "no match bits with MPI tag {tag}"
        );
    }
    assert!(lines.iter().any(|l| l.contains("continuation")));
    assert!(lines.iter().any(|l| l.contains("response")));
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_gemini_trace_in_classic_pcap_is_decoded_too() {
    let path = scratch("gemini.pcap");
    let p = path.to_str().unwrap();
    let (ok, out, err) = nicemu(&["trace", "--nic", "gemini", "-o", p]);
    assert!(ok, "{err}");
    let injected = count(&out, "fabric packets injected:");
    let records = read_pcap(&path);
    assert_eq!(records.len(), injected);
    check_records(&records, 2, 2);
    assert!(
        records
            .iter()
            .all(|r| r.frame.len() >= 48 && (1..=9).contains(&r.frame[0]))
    );
    assert!(records.iter().any(|r| r.tc == 1), "no BTE traffic class");
    let Some(lines) = tshark(
        &path,
        &["nicemu.family", "nicemu.gni.kind", "nicemu.gni.tag"],
    ) else {
        return;
    };
    assert_eq!(lines.len(), injected);
    for (l, r) in lines.iter().zip(&records) {
        let f: Vec<&str> = l.split('|').collect();
        assert_eq!(f[0], "2", "{l}");
        assert_eq!(f[1], r.frame[0].to_string(), "{l}");
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn bad_arguments_are_clear_errors() {
    let (ok, _, err) = nicemu(&["trace", "--nodes", "1", "-o", "/dev/null"]);
    assert!(!ok);
    assert!(err.contains("--nodes must be between 2 and"), "{err}");
    let (ok, _, err) = nicemu(&["trace", "-o", "/nonexistent-dir/x.pcapng"]);
    assert!(!ok);
    assert!(
        err.contains("cannot create /nonexistent-dir/x.pcapng"),
        "{err}"
    );
}
