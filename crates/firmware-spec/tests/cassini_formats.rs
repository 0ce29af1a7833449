//! Cassini command, event and status formats against the public ABI.
//!
//! Golden vectors: every format's field table is written here once, as `(name, bit offset,
//! width)` copied from our notes on the public headers (cassini.md §1.4, §2, §3, §5, §6;
//! formats the notes do not spell out were read from the bit-field order of
//! `cassini_user_defs.h` and are marked so). For several value sets (each 1-bit field gets a
//! distinct on/off pattern across the sets, wider fields get pseudo-random contents, and one
//! set is all ones) the expected bytes are computed with `bits::set_bits` from the table
//! alone, and the crate's encoder must produce exactly those bytes (so it sets those bits
//! and nothing else), and its decoder must give the value back.
//!
//! Round trips: proptest `decode(encode(x)) == x` over images built from each format's own
//! field table, at the command/event level over every variant, and decode of arbitrary
//! bytes never panics.

use std::cell::RefCell;
use std::fmt::Debug;

use firmware_spec::bits::{mask, set_bits};
use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp, SmallAmoPayload};
use firmware_spec::cassini::cmd::*;
use firmware_spec::cassini::dfa::{
    MulticastDfa, PteMapOffset, RdzvMatchBits, RdzvUserPtr, UnicastDfa,
};
use firmware_spec::cassini::event::*;
use firmware_spec::cassini::layout::{FieldKind, Layout};
use firmware_spec::cassini::le::{LeFlags, PtlList, PtlteState, ScReason};
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::status::{CqStatus, CtWriteback, EqStatus, EqSwState};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// Field tables and the golden-vector machinery
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Kind {
    /// Any value of the width.
    Any,
    /// One of these raw values (an enumeration).
    OneOf(&'static [u64]),
    /// Fixed by the format; the builder does not set it.
    Const(u64),
}

#[derive(Clone, Copy)]
struct S {
    name: &'static str,
    off: usize,
    w: usize,
    kind: Kind,
}

const fn f(name: &'static str, off: usize, w: usize) -> S {
    S {
        name,
        off,
        w,
        kind: Kind::Any,
    }
}
const fn e(name: &'static str, off: usize, w: usize, vals: &'static [u64]) -> S {
    S {
        name,
        off,
        w,
        kind: Kind::OneOf(vals),
    }
}
const fn k(name: &'static str, off: usize, w: usize, v: u64) -> S {
    S {
        name,
        off,
        w,
        kind: Kind::Const(v),
    }
}

const AMO_OPS: &[u64] = &[0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12];
const AMO_TYPES: &[u64] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
const CSWAP_OPS: &[u64] = &[0, 1, 2, 3, 4, 5];
const LISTS: &[u64] = &[0, 1, 2, 3];
const PTLTE_STATES: &[u64] = &[0, 1, 2, 3, 4];
const SC_REASONS: &[u64] = &[0, 1, 2, 3, 4, 5, 6];
const RCS: &[u64] = &[
    1, 2, 3, 4, 5, 6, 8, 9, 10, 16, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
    34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57,
    58, 59, 60, 61, 62,
];
const INIT_TYPES: &[u64] = &[8, 9, 10];
const TGT_TYPES: &[u64] = &[0, 1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14, 15, 21];

/// The 11 event/option bits shared by C_STATE and the DMA commands, from `base`
/// (cassini.md §2.1: event_send_disable@19 .. use_offset_for_get@29).
fn dma_flag_specs(base: usize) -> Vec<S> {
    [
        "event_send_disable",
        "event_success_disable",
        "event_ct_send",
        "event_ct_reply",
        "event_ct_ack",
        "event_ct_bytes",
        "get_with_local_flag",
        "restricted",
        "reduction",
        "flush",
        "use_offset_for_get",
    ]
    .iter()
    .enumerate()
    .map(|(i, n)| f(n, base + i, 1))
    .collect()
}

fn table(parts: &[&[S]]) -> Vec<S> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// `t` moved by `bits` with its names under `prefix` (an embedded format).
fn embedded(t: &[S], bits: usize, prefix: &str) -> Vec<S> {
    shifted(t, bits)
        .into_iter()
        .map(|s| S {
            name: Box::leak(format!("{prefix}{}", s.name).into_boxed_str()),
            ..s
        })
        .collect()
}

fn shifted(t: &[S], bits: usize) -> Vec<S> {
    t.iter()
        .map(|s| S {
            off: s.off + bits,
            ..*s
        })
        .collect()
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Value sets: 0..=7 patterned, 8 = all ones.
const SEEDS: u64 = 9;
const ONES: u64 = 8;

/// The value of entry `i` of `t` in value set `seed`.
fn value(t: &[S], i: usize, seed: u64) -> u64 {
    let s = t[i];
    match s.kind {
        Kind::Const(v) => v,
        Kind::OneOf(l) if seed == ONES => *l.iter().max().unwrap(),
        Kind::OneOf(l) => l[(i + seed as usize) % l.len()],
        Kind::Any if seed == ONES => mask(s.w as u32),
        Kind::Any if s.w == 1 => ((i as u64 + 1) >> seed) & 1,
        Kind::Any => {
            splitmix(name_hash(s.name) ^ seed.wrapping_mul(0x1234_5678_9ABC)) & mask(s.w as u32)
        }
    }
}

/// Field values by name for a builder; records which were used.
struct Vals {
    t: Vec<S>,
    vals: Vec<u64>,
    used: RefCell<Vec<bool>>,
    /// Prefix of the names the builder asks for (for embedded formats).
    prefix: RefCell<&'static str>,
}

impl Vals {
    fn new(t: &[S], seed: u64) -> Self {
        Vals {
            t: t.to_vec(),
            vals: (0..t.len()).map(|i| value(t, i, seed)).collect(),
            used: RefCell::new(vec![false; t.len()]),
            prefix: RefCell::new(""),
        }
    }
    /// Build with names looked up under `prefix` (an embedded format's table).
    fn under<X>(&self, prefix: &'static str, build: impl Fn(&Vals) -> X) -> X {
        let old = self.prefix.replace(prefix);
        let x = build(self);
        self.prefix.replace(old);
        x
    }
    fn get(&self, name: &str) -> u64 {
        let full = format!("{}{}", self.prefix.borrow(), name);
        let name = full.as_str();
        let i = self
            .t
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no field {name} in the table"));
        self.used.borrow_mut()[i] = true;
        self.vals[i]
    }
    fn u8(&self, n: &str) -> u8 {
        self.get(n) as u8
    }
    fn u16(&self, n: &str) -> u16 {
        self.get(n) as u16
    }
    fn u32(&self, n: &str) -> u32 {
        self.get(n) as u32
    }
    fn u64(&self, n: &str) -> u64 {
        self.get(n)
    }
    fn b(&self, n: &str) -> bool {
        self.get(n) != 0
    }
    fn en<T: TryFrom<u8>>(&self, n: &str) -> T
    where
        T::Error: Debug,
    {
        T::try_from(self.get(n) as u8).unwrap()
    }
    fn assert_all_used(&self, what: &str) {
        for (s, u) in self.t.iter().zip(self.used.borrow().iter()) {
            if !matches!(s.kind, Kind::Const(_)) {
                assert!(*u, "{what}: builder never set {}", s.name);
            }
        }
    }
}

/// The image `t` describes for `vals`, computed from the table alone.
fn expected(t: &[S], size: usize, vals: &Vals) -> Vec<u8> {
    let mut b = vec![0u8; size];
    for (s, v) in t.iter().zip(vals.vals.iter()) {
        set_bits(&mut b, s.off, s.w, *v);
    }
    b
}

/// A table is well formed: fields inside `size` bytes, no two overlapping.
fn check_spec_table(what: &str, t: &[S], size: usize) {
    for (i, s) in t.iter().enumerate() {
        assert!(
            t[..i].iter().all(|o| o.name != s.name),
            "{what}: {} twice",
            s.name
        );
    }
    let mut used = vec![false; size * 8];
    for s in t {
        assert!((1..=64).contains(&s.w), "{what}.{}", s.name);
        assert!(s.off + s.w <= size * 8, "{what}.{} past the end", s.name);
        for (b, u) in used.iter_mut().enumerate().skip(s.off).take(s.w) {
            assert!(!*u, "{what}.{} overlaps at bit {b}", s.name);
            *u = true;
        }
    }
}

/// Golden check of any encoder: for every value set, `enc(build(vals))` is exactly the image
/// the table gives (plus whatever `extra` adds, e.g. inline payload), and `dec` of that image
/// gives the value back.
fn golden_with<X: PartialEq + Debug>(
    what: &str,
    t: &[S],
    size: usize,
    build: impl Fn(&Vals) -> X,
    extra: impl Fn(&X, &mut Vec<u8>),
    enc: impl Fn(&X) -> Vec<u8>,
    dec: impl Fn(&[u8]) -> X,
) {
    check_spec_table(what, t, size);
    for seed in 0..SEEDS {
        let vals = Vals::new(t, seed);
        let x = build(&vals);
        vals.assert_all_used(what);
        let mut want = expected(t, size, &vals);
        extra(&x, &mut want);
        let got = enc(&x);
        assert_eq!(got, want, "{what}: encoding, value set {seed}: {x:?}");
        assert_eq!(dec(&want), x, "{what}: decoding, value set {seed}");
    }
}

/// Golden check of a fixed-size [`Layout`].
fn golden<T: Layout + PartialEq + Debug>(t: &[S], build: impl Fn(&Vals) -> T) {
    assert!(!t.is_empty());
    golden_with(
        T::NAME,
        t,
        T::SIZE,
        build,
        |_, _| {},
        |x| x.to_vec(),
        |b| T::read_from(b).unwrap(),
    );
}

fn dma_flags(v: &Vals) -> DmaFlags {
    DmaFlags {
        event_send_disable: v.b("event_send_disable"),
        event_success_disable: v.b("event_success_disable"),
        event_ct_send: v.b("event_ct_send"),
        event_ct_reply: v.b("event_ct_reply"),
        event_ct_ack: v.b("event_ct_ack"),
        event_ct_bytes: v.b("event_ct_bytes"),
        get_with_local_flag: v.b("get_with_local_flag"),
        restricted: v.b("restricted"),
        reduction: v.b("reduction"),
        flush: v.b("flush"),
        use_offset_for_get: v.b("use_offset_for_get"),
    }
}

// ---------------------------------------------------------------------------------------
// Command tables (cassini.md §2.1, §2.2, §5)
// ---------------------------------------------------------------------------------------

fn cstate_table() -> Vec<S> {
    table(&[
        &[
            k("cmd_type", 0, 2, 0),
            k("cmd_size", 2, 2, 0),
            k("opcode", 4, 4, 10),
        ],
        &[k("length", 8, 8, 32), f("write_lac", 16, 3)],
        &dma_flag_specs(19),
        &[
            f("initiator", 32, 32),
            f("index_ext", 64, 5),
            f("user_ptr", 128, 64),
            f("ct", 224, 11),
            f("eq", 240, 11),
        ],
    ])
}

const IDC_HDR: &[S] = &[
    f("command", 0, 8),
    f("length", 8, 8),
    f("dfa", 32, 32),
    f("remote_offset", 64, 56),
];

const IDC_MSG_HDR: &[S] = &[
    f("command", 0, 8),
    f("length", 8, 8),
    f("dfa", 32, 32),
    f("match_bits", 64, 64),
    f("header_data", 128, 64),
    f("user_ptr", 192, 64),
];

const IDC_AMO: &[S] = &[
    k("cmd_type", 0, 2, 0),
    k("cmd_size", 2, 2, 1),
    e("opcode", 4, 4, &[4, 5]),
    k("length", 8, 8, 64),
    f("dfa", 32, 32),
    f("remote_offset", 64, 56),
    f("local_addr", 128, 57),
    e("atomic_op", 192, 4, AMO_OPS),
    e("atomic_type", 200, 4, AMO_TYPES),
    e("cswap_op", 208, 3, CSWAP_OPS),
    f("op1_word1", 256, 64),
    f("op1_word2", 320, 64),
    f("op2_word1", 384, 64),
    f("op2_word2", 448, 64),
];

const SMALL_AMO_PAYLOAD: &[S] = &[
    e("amo_op", 0, 4, AMO_OPS),
    e("amo_type", 8, 4, AMO_TYPES),
    f("op1_word1", 64, 64),
];

/// IDC small AMO: a 16 B IDC header (opcode ATOMIC, 32 B, length 32) + payload at byte 16.
fn idc_small_amo_table() -> Vec<S> {
    table(&[
        &[
            k("cmd_type", 0, 2, 0),
            k("cmd_size", 2, 2, 0),
            k("opcode", 4, 4, 4),
            k("length", 8, 8, 32),
            f("dfa", 32, 32),
            f("remote_offset", 64, 56),
        ],
        &shifted(SMALL_AMO_PAYLOAD, 128),
    ])
}

/// `c_idc_eth_cmd` header (packed; from the `cassini_user_defs.h` bit-field order).
const IDC_ETH_HDR: &[S] = &[
    f("command", 0, 8),
    f("length", 8, 8),
    f("flow_hash", 16, 8),
    f("checksum_ctrl", 24, 2),
    f("fmt", 28, 1),
    f("checksum_start", 32, 10),
    f("checksum_offset", 44, 6),
];

/// First 32 B of `c_full_dma_cmd` = `c_nomatch_dma_cmd` without the constants.
fn dma_head(opcodes: &'static [u64]) -> Vec<S> {
    table(&[
        &[
            e("opcode", 4, 4, opcodes),
            f("index_ext", 8, 5),
            f("lac", 16, 3),
        ],
        &dma_flag_specs(19),
        &[
            f("dfa", 32, 32),
            f("remote_offset", 64, 56),
            f("local_addr", 128, 57),
            f("request_len", 192, 32),
            f("ct", 224, 11),
            f("eq", 240, 11),
        ],
    ])
}

fn full_dma_table() -> Vec<S> {
    table(&[
        &[k("cmd_type", 0, 2, 1), k("cmd_size", 2, 2, 1)],
        &dma_head(&[1, 2, 3]),
        &[
            f("eager_length", 256, 20),
            f("rendezvous_id", 280, 8),
            f("initiator", 288, 32),
            f("match_bits", 320, 64),
            f("header_data", 384, 64),
            f("user_ptr", 448, 64),
        ],
    ])
}

fn nomatch_table() -> Vec<S> {
    table(&[
        &[k("cmd_type", 0, 2, 1), k("cmd_size", 2, 2, 0)],
        &dma_head(&[8, 9]),
    ])
}

fn dma_amo_table() -> Vec<S> {
    let head: Vec<S> = dma_head(&[4, 5])
        .into_iter()
        .map(|s| {
            if s.name == "local_addr" {
                S {
                    name: "local_read_addr",
                    ..s
                }
            } else {
                s
            }
        })
        .collect();
    table(&[
        &[k("cmd_type", 0, 2, 1), k("cmd_size", 2, 2, 2)],
        &head,
        &[
            f("initiator", 288, 32),
            f("match_bits", 320, 64),
            f("header_data", 384, 64),
            f("user_ptr", 448, 64),
            f("local_write_addr", 512, 57),
            e("atomic_op", 576, 4, AMO_OPS),
            e("atomic_type", 584, 4, AMO_TYPES),
            e("cswap_op", 592, 3, CSWAP_OPS),
            f("write_lac", 608, 3),
            f("op2_word1", 640, 64),
            f("op2_word2", 704, 64),
        ],
    ])
}

/// `c_dma_eth_cmd` (packed; from the `cassini_user_defs.h` bit-field order).
fn dma_eth_table() -> Vec<S> {
    let mut t = vec![
        k("cmd_type", 0, 2, 1),
        k("cmd_size", 2, 2, 2),
        k("opcode", 4, 4, 6),
        f("read_lac", 8, 3),
        f("fmt", 15, 1),
        f("flow_hash", 16, 8),
        f("checksum_ctrl", 24, 2),
        f("num_segments", 29, 3),
        f("checksum_start", 32, 10),
        f("checksum_offset", 44, 6),
        f("user_ptr", 64, 64),
    ];
    const LENS: [&str; 7] = ["len0", "len1", "len2", "len3", "len4", "len5", "len6"];
    const ADDRS: [&str; 7] = [
        "addr0", "addr1", "addr2", "addr3", "addr4", "addr5", "addr6",
    ];
    for i in 0..7 {
        t.push(f(LENS[i], 128 + 16 * i, 16));
        t.push(f(ADDRS[i], 256 + 64 * i, 64));
    }
    t.push(f("total_len", 704, 16));
    t.extend(dma_flag_specs(720));
    t.push(f("ct", 736, 11));
    t.push(f("eq", 752, 11));
    t
}

const CQ_CMD: &[S] = &[
    k("cmd_type", 0, 2, 3),
    k("cmd_size", 2, 2, 1),
    e("opcode", 4, 4, &[0, 1, 2]),
    f("lcid", 32, 4),
];

/// `c_ct_cmd` header (cassini.md §5); `cmd_size` 64 B for all but CT_TRIG_DMA.
const CT_CMD: &[S] = &[
    k("cmd_type", 0, 2, 2),
    k("cmd_size", 2, 2, 1),
    e("opcode", 4, 4, &[0, 1, 2, 3, 4, 6, 7, 8]),
    f("ct", 16, 11),
    f("trig_ct", 32, 11),
    f("eq", 48, 11),
    f("ct_success", 64, 48),
    f("ct_failure", 112, 7),
    f("set_ct_success", 126, 1),
    f("set_ct_failure", 127, 1),
    f("threshold", 128, 48),
];

/// CT_TRIG_DMA header: 128 B, opcode 5.
fn trig_ct_table() -> Vec<S> {
    CT_CMD
        .iter()
        .map(|s| match s.name {
            "cmd_size" => k("cmd_size", 2, 2, 2),
            "opcode" => k("opcode", 4, 4, 5),
            _ => *s,
        })
        .collect()
}

fn target_table() -> Vec<S> {
    let le = [
        "event_ct_bytes",
        "event_ct_overflow",
        "event_ct_comm",
        "event_unlink_disable",
        "event_success_disable",
        "event_comm_disable",
        "event_link_disable",
        "unrestricted_end_ro",
        "unrestricted_body_ro",
        "unexpected_hdr_disable",
        "use_once",
        "no_truncate",
        "manage_local",
        "op_get",
        "op_put",
    ];
    let flags: Vec<S> = le
        .iter()
        .enumerate()
        .map(|(i, n)| f(n, 32 + i, 1))
        .collect();
    table(&[
        &[
            k("cmd_type", 0, 2, 3),
            k("cmd_size", 2, 2, 1),
            e("opcode", 4, 4, &[8, 9, 10, 11]),
            e("ptl_list", 8, 2, LISTS),
            f("ptlte_index", 16, 11),
        ],
        &flags,
        &[
            f("ct", 48, 11),
            f("buffer_id", 64, 16),
            f("lac", 80, 3),
            f("restart_seq", 88, 1),
            f("start", 128, 57),
            f("length", 192, 56),
            f("min_free", 256, 24),
            f("match_id", 288, 32),
            f("match_bits", 320, 64),
            f("ignore_bits", 384, 64),
        ],
    ])
}

const SET_STATE: &[S] = &[
    k("cmd_type", 0, 2, 3),
    k("cmd_size", 2, 2, 1),
    k("opcode", 4, 4, 12),
    e("ptlte_state", 8, 3, PTLTE_STATES),
    f("ptlte_index", 16, 11),
    f("current_addr", 64, 57),
    f("drop_count", 128, 24),
];

// ---------------------------------------------------------------------------------------
// Command builders
// ---------------------------------------------------------------------------------------

fn build_cstate(v: &Vals) -> CState {
    CState {
        write_lac: v.u8("write_lac"),
        flags: dma_flags(v),
        initiator: v.u32("initiator"),
        index_ext: v.u8("index_ext"),
        user_ptr: v.u64("user_ptr"),
        ct: v.u16("ct"),
        eq: v.u16("eq"),
    }
}

fn build_idc_amo(v: &Vals) -> IdcAmo {
    IdcAmo {
        opcode: v.en("opcode"),
        dfa: v.u32("dfa"),
        remote_offset: v.u64("remote_offset"),
        local_addr: v.u64("local_addr"),
        atomic_op: v.en("atomic_op"),
        atomic_type: v.en("atomic_type"),
        cswap_op: v.en("cswap_op"),
        op1_word1: v.u64("op1_word1"),
        op1_word2: v.u64("op1_word2"),
        op2_word1: v.u64("op2_word1"),
        op2_word2: v.u64("op2_word2"),
    }
}

fn build_idc_small_amo(v: &Vals) -> IdcSmallAmo {
    IdcSmallAmo {
        dfa: v.u32("dfa"),
        remote_offset: v.u64("remote_offset"),
        atomic_op: v.en("amo_op"),
        atomic_type: v.en("amo_type"),
        op1_word1: v.u64("op1_word1"),
    }
}

fn build_full_dma(v: &Vals) -> FullDma {
    FullDma {
        opcode: v.en("opcode"),
        index_ext: v.u8("index_ext"),
        lac: v.u8("lac"),
        flags: dma_flags(v),
        dfa: v.u32("dfa"),
        remote_offset: v.u64("remote_offset"),
        local_addr: v.u64("local_addr"),
        request_len: v.u32("request_len"),
        ct: v.u16("ct"),
        eq: v.u16("eq"),
        eager_length: v.u32("eager_length"),
        rendezvous_id: v.u8("rendezvous_id"),
        initiator: v.u32("initiator"),
        match_bits: v.u64("match_bits"),
        header_data: v.u64("header_data"),
        user_ptr: v.u64("user_ptr"),
    }
}

fn build_nomatch(v: &Vals) -> NomatchDma {
    NomatchDma {
        opcode: v.en("opcode"),
        index_ext: v.u8("index_ext"),
        lac: v.u8("lac"),
        flags: dma_flags(v),
        dfa: v.u32("dfa"),
        remote_offset: v.u64("remote_offset"),
        local_addr: v.u64("local_addr"),
        request_len: v.u32("request_len"),
        ct: v.u16("ct"),
        eq: v.u16("eq"),
    }
}

fn build_dma_amo(v: &Vals) -> DmaAmo {
    DmaAmo {
        opcode: v.en("opcode"),
        index_ext: v.u8("index_ext"),
        lac: v.u8("lac"),
        flags: dma_flags(v),
        dfa: v.u32("dfa"),
        remote_offset: v.u64("remote_offset"),
        local_read_addr: v.u64("local_read_addr"),
        request_len: v.u32("request_len"),
        ct: v.u16("ct"),
        eq: v.u16("eq"),
        initiator: v.u32("initiator"),
        match_bits: v.u64("match_bits"),
        header_data: v.u64("header_data"),
        user_ptr: v.u64("user_ptr"),
        local_write_addr: v.u64("local_write_addr"),
        atomic_op: v.en("atomic_op"),
        atomic_type: v.en("atomic_type"),
        cswap_op: v.en("cswap_op"),
        write_lac: v.u8("write_lac"),
        op2_word1: v.u64("op2_word1"),
        op2_word2: v.u64("op2_word2"),
    }
}

fn build_dma_eth(v: &Vals) -> DmaEth {
    DmaEth {
        read_lac: v.u8("read_lac"),
        fmt: v.u8("fmt"),
        flow_hash: v.u8("flow_hash"),
        checksum_ctrl: v.en("checksum_ctrl"),
        num_segments: v.u8("num_segments"),
        checksum_start: v.u16("checksum_start"),
        checksum_offset: v.u8("checksum_offset"),
        user_ptr: v.u64("user_ptr"),
        len: ["len0", "len1", "len2", "len3", "len4", "len5", "len6"].map(|n| v.u16(n)),
        addr: [
            "addr0", "addr1", "addr2", "addr3", "addr4", "addr5", "addr6",
        ]
        .map(|n| v.u64(n)),
        total_len: v.u16("total_len"),
        flags: dma_flags(v),
        ct: v.u16("ct"),
        eq: v.u16("eq"),
    }
}

fn build_ct(v: &Vals) -> CtCmd {
    CtCmd {
        opcode: v.en("opcode"),
        ct: v.u16("ct"),
        trig_ct: v.u16("trig_ct"),
        eq: v.u16("eq"),
        ct_success: v.u64("ct_success"),
        ct_failure: v.u8("ct_failure"),
        set_ct_success: v.b("set_ct_success"),
        set_ct_failure: v.b("set_ct_failure"),
        threshold: v.u64("threshold"),
    }
}

fn build_target(v: &Vals) -> TargetCmd {
    let names = [
        ("event_ct_bytes", LeFlags::EVENT_CT_BYTES),
        ("event_ct_overflow", LeFlags::EVENT_CT_OVERFLOW),
        ("event_ct_comm", LeFlags::EVENT_CT_COMM),
        ("event_unlink_disable", LeFlags::EVENT_UNLINK_DISABLE),
        ("event_success_disable", LeFlags::EVENT_SUCCESS_DISABLE),
        ("event_comm_disable", LeFlags::EVENT_COMM_DISABLE),
        ("event_link_disable", LeFlags::EVENT_LINK_DISABLE),
        ("unrestricted_end_ro", LeFlags::UNRESTRICTED_END_RO),
        ("unrestricted_body_ro", LeFlags::UNRESTRICTED_BODY_RO),
        ("unexpected_hdr_disable", LeFlags::UNEXPECTED_HDR_DISABLE),
        ("use_once", LeFlags::USE_ONCE),
        ("no_truncate", LeFlags::NO_TRUNCATE),
        ("manage_local", LeFlags::MANAGE_LOCAL),
        ("op_get", LeFlags::OP_GET),
        ("op_put", LeFlags::OP_PUT),
        ("restart_seq", LeFlags::RESTART_SEQ),
    ];
    let opts = names
        .iter()
        .fold(LeFlags::empty(), |acc, (n, fl)| acc.with(*fl, v.b(n)));
    let mut c = TargetCmd {
        opcode: v.en("opcode"),
        ptl_list: v.en("ptl_list"),
        ptlte_index: v.u16("ptlte_index"),
        ct: v.u16("ct"),
        buffer_id: v.u16("buffer_id"),
        lac: v.u8("lac"),
        start: v.u64("start"),
        length: v.u64("length"),
        min_free: v.u32("min_free"),
        match_id: v.u32("match_id"),
        match_bits: v.u64("match_bits"),
        ignore_bits: v.u64("ignore_bits"),
        ..TargetCmd::default()
    };
    // cxi_target_cmd_setopts(): the C_LE_* word, RESTART_SEQ included.
    c.set_opts(opts);
    assert_eq!(c.opts(), opts);
    c
}

fn build_set_state(v: &Vals) -> SetStateCmd {
    SetStateCmd {
        ptlte_state: v.en("ptlte_state"),
        ptlte_index: v.u16("ptlte_index"),
        current_addr: v.u64("current_addr"),
        drop_count: v.u32("drop_count"),
    }
}

// ---------------------------------------------------------------------------------------
// Command golden tests
// ---------------------------------------------------------------------------------------

fn cmd_enc(c: &Command) -> Vec<u8> {
    c.encode().unwrap()
}
fn cmd_dec(b: &[u8]) -> Command {
    Command::decode(b).unwrap()
}

#[test]
fn golden_cstate() {
    let t = cstate_table();
    golden(&t, build_cstate);
    golden_with(
        "CState cmd",
        &t,
        32,
        |v| Command::CState(build_cstate(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
}

#[test]
fn golden_idc_headers() {
    let hdr = |v: &Vals| IdcHdr {
        command: CmdHeader::from_byte(v.u8("command")),
        length: v.u8("length"),
        dfa: v.u32("dfa"),
        remote_offset: v.u64("remote_offset"),
    };
    golden(IDC_HDR, hdr);
    golden(IDC_MSG_HDR, |v| IdcMsgHdr {
        command: CmdHeader::from_byte(v.u8("command")),
        length: v.u8("length"),
        dfa: v.u32("dfa"),
        match_bits: v.u64("match_bits"),
        header_data: v.u64("header_data"),
        user_ptr: v.u64("user_ptr"),
    });
    golden(IDC_ETH_HDR, |v| IdcEthHdr {
        command: CmdHeader::from_byte(v.u8("command")),
        length: v.u8("length"),
        flow_hash: v.u8("flow_hash"),
        checksum_ctrl: v.en("checksum_ctrl"),
        fmt: v.u8("fmt"),
        checksum_start: v.u16("checksum_start"),
        checksum_offset: v.u8("checksum_offset"),
    });
}

/// Payload of `n` distinct bytes.
fn payload_bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) | 1)
        .collect()
}

#[test]
fn golden_idc_put() {
    // Header fields come from the table; command byte and length follow §2.1: IDC/PUT,
    // cmd_size = __cxi_cmd_size(16 + n), length = 16 + n; data at byte 16.
    let t: Vec<S> = IDC_HDR
        .iter()
        .filter(|s| s.name == "dfa" || s.name == "remote_offset")
        .copied()
        .collect();
    for (n, size, size_code) in [
        (0, 32, 0u64),
        (16, 32, 0),
        (17, 64, 1),
        (48, 64, 1),
        (49, 128, 2),
        (112, 128, 2),
        (113, 256, 3),
        (224, 256, 3),
    ] {
        let mut tt = t.clone();
        tt.push(k("cmd_type", 0, 2, 0));
        tt.push(k("cmd_size", 2, 2, size_code));
        tt.push(k("opcode", 4, 4, 1));
        tt.push(k("length", 8, 8, 16 + n as u64));
        let data = payload_bytes(n, 3);
        golden_with(
            "IDC put",
            &tt,
            size,
            |v| {
                Command::IdcPut(IdcPut {
                    dfa: v.u32("dfa"),
                    remote_offset: v.u64("remote_offset"),
                    payload: Payload::new(&data).unwrap(),
                })
            },
            |_, want| want[16..16 + n].copy_from_slice(&data),
            cmd_enc,
            cmd_dec,
        );
        let c = Command::IdcPut(IdcPut {
            payload: Payload::new(&data).unwrap(),
            ..IdcPut::default()
        });
        assert_eq!(c.encoded_len(), size);
    }
}

#[test]
fn golden_idc_msg() {
    // §2.1: IDC/SMALL_MESSAGE, 32 B header + data, min 64 B, length = 32 + n.
    let t: Vec<S> = IDC_MSG_HDR
        .iter()
        .filter(|s| s.name != "command" && s.name != "length")
        .copied()
        .collect();
    for (n, size, size_code) in [
        (0, 64, 1u64),
        (32, 64, 1),
        (33, 128, 2),
        (96, 128, 2),
        (97, 256, 3),
        (192, 256, 3),
    ] {
        let mut tt = t.clone();
        tt.push(k("cmd_type", 0, 2, 0));
        tt.push(k("cmd_size", 2, 2, size_code));
        tt.push(k("opcode", 4, 4, 7));
        tt.push(k("length", 8, 8, 32 + n as u64));
        let data = payload_bytes(n, 9);
        golden_with(
            "IDC msg",
            &tt,
            size,
            |v| {
                Command::IdcMsg(IdcMsg {
                    dfa: v.u32("dfa"),
                    match_bits: v.u64("match_bits"),
                    header_data: v.u64("header_data"),
                    user_ptr: v.u64("user_ptr"),
                    payload: Payload::new(&data).unwrap(),
                })
            },
            |_, want| want[32..32 + n].copy_from_slice(&data),
            cmd_enc,
            cmd_dec,
        );
    }
}

#[test]
fn golden_idc_eth() {
    let t: Vec<S> = IDC_ETH_HDR
        .iter()
        .filter(|s| s.name != "command" && s.name != "length")
        .copied()
        .collect();
    for (n, size, size_code) in [(0, 32, 0u64), (60, 128, 2), (239, 256, 3)] {
        let mut tt = t.clone();
        tt.push(k("cmd_type", 0, 2, 0));
        tt.push(k("cmd_size", 2, 2, size_code));
        tt.push(k("opcode", 4, 4, 6));
        tt.push(k("length", 8, 8, 16 + n as u64));
        let data = payload_bytes(n, 1);
        golden_with(
            "IDC eth",
            &tt,
            size,
            |v| {
                Command::IdcEth(IdcEth {
                    flow_hash: v.u8("flow_hash"),
                    checksum_ctrl: v.en("checksum_ctrl"),
                    fmt: v.u8("fmt"),
                    checksum_start: v.u16("checksum_start"),
                    checksum_offset: v.u8("checksum_offset"),
                    payload: Payload::new(&data).unwrap(),
                })
            },
            |_, want| want[16..16 + n].copy_from_slice(&data),
            cmd_enc,
            cmd_dec,
        );
    }
}

#[test]
fn golden_idc_amo() {
    golden(IDC_AMO, build_idc_amo);
    golden_with(
        "IDC AMO cmd",
        IDC_AMO,
        64,
        |v| Command::IdcAmo(build_idc_amo(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
    golden(SMALL_AMO_PAYLOAD, |v| SmallAmoPayload {
        amo_op: v.en("amo_op"),
        amo_type: v.en("amo_type"),
        op1_word1: v.u64("op1_word1"),
    });
    let t = idc_small_amo_table();
    golden(&t, build_idc_small_amo);
    golden_with(
        "IDC small AMO cmd",
        &t,
        32,
        |v| Command::IdcSmallAmo(build_idc_small_amo(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
}

#[test]
fn golden_dma() {
    let t = full_dma_table();
    golden(&t, build_full_dma);
    golden_with(
        "DMA cmd",
        &t,
        64,
        |v| Command::Dma(build_full_dma(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
    let t = nomatch_table();
    golden(&t, build_nomatch);
    golden_with(
        "nomatch cmd",
        &t,
        32,
        |v| Command::NomatchDma(build_nomatch(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
    // A 96 B DMA AMO occupies a 128 B command; bytes 96..127 are zero.
    let t = dma_amo_table();
    golden(&t, build_dma_amo);
    golden_with(
        "DMA AMO cmd",
        &t,
        128,
        |v| Command::DmaAmo(build_dma_amo(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
    let t = dma_eth_table();
    golden(&t, build_dma_eth);
    golden_with(
        "DMA eth cmd",
        &t,
        128,
        |v| Command::DmaEth(build_dma_eth(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
}

#[test]
fn golden_cq_cmd() {
    let b = |v: &Vals| CqCmd {
        opcode: v.en("opcode"),
        lcid: v.u8("lcid"),
    };
    golden(CQ_CMD, b);
    golden_with(
        "CQ cmd",
        CQ_CMD,
        64,
        |v| Command::Cq(b(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
}

#[test]
fn golden_ct_cmd() {
    golden(CT_CMD, build_ct);
    // Emitted as 64 B; bytes 24..63 zero.
    golden_with(
        "CT cmd",
        CT_CMD,
        64,
        |v| Command::Ct(build_ct(v)),
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
}

#[test]
fn golden_trig_dma() {
    // §5: 128 B CT header (opcode CT_TRIG_DMA) with the DMA command embedded at byte 24.
    let ct = trig_ct_table();
    let build_ct_trig = |v: &Vals| CtCmd {
        opcode: CtOp::CtTrigDma,
        ..build_ct_no_op(v)
    };
    let full = table(&[&ct, &embedded(&full_dma_table(), 192, "dma.")]);
    golden_with(
        "trig full DMA",
        &full,
        128,
        |v| {
            Command::TrigDma(TrigDma {
                ct: build_ct_trig(v),
                dma: EmbeddedDma::Full(v.under("dma.", build_full_dma)),
            })
        },
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
    let nomatch = table(&[&ct, &embedded(&nomatch_table(), 192, "dma.")]);
    golden_with(
        "trig nomatch DMA",
        &nomatch,
        128,
        |v| {
            Command::TrigDma(TrigDma {
                ct: build_ct_trig(v),
                dma: EmbeddedDma::Nomatch(v.under("dma.", build_nomatch)),
            })
        },
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
    let amo = table(&[&ct, &embedded(&dma_amo_table(), 192, "dma.")]);
    golden_with(
        "trig DMA AMO",
        &amo,
        128,
        |v| {
            Command::TrigDma(TrigDma {
                ct: build_ct_trig(v),
                dma: EmbeddedDma::Amo(v.under("dma.", build_dma_amo)),
            })
        },
        |_, _| {},
        cmd_enc,
        cmd_dec,
    );
}

/// CT fields of a CT_TRIG_DMA (the opcode is a constant of that table).
fn build_ct_no_op(v: &Vals) -> CtCmd {
    CtCmd {
        opcode: CtOp::CtTrigDma,
        ct: v.u16("ct"),
        trig_ct: v.u16("trig_ct"),
        eq: v.u16("eq"),
        ct_success: v.u64("ct_success"),
        ct_failure: v.u8("ct_failure"),
        set_ct_success: v.b("set_ct_success"),
        set_ct_failure: v.b("set_ct_failure"),
        threshold: v.u64("threshold"),
    }
}

#[test]
fn golden_target_cmds() {
    let t = target_table();
    golden(&t, build_target);
    golden_with(
        "target cmd",
        &t,
        64,
        |v| TargetCommand::List(build_target(v)),
        |_, _| {},
        |c| c.encode().unwrap().to_vec(),
        |b| TargetCommand::decode(b).unwrap(),
    );
    golden(SET_STATE, build_set_state);
    golden_with(
        "setstate cmd",
        SET_STATE,
        64,
        |v| TargetCommand::SetState(build_set_state(v)),
        |_, _| {},
        |c| c.encode().unwrap().to_vec(),
        |b| TargetCommand::decode(b).unwrap(),
    );
}

#[test]
fn idc_noop_padding_is_zero_bytes() {
    // cxi_cq_update_wp(): a 32 B NOOP whose first 8 bytes are zero.
    let b = Command::IdcNoop(CmdSize::B32).encode().unwrap();
    assert_eq!(b, vec![0u8; 32]);
    assert_eq!(
        Command::decode(&[0u8; 64]).unwrap(),
        Command::IdcNoop(CmdSize::B32)
    );
    // Trigger-CQ padding: a 64 B CT NOOP.
    let b = Command::Ct(CtCmd::noop()).encode().unwrap();
    assert_eq!(b.len(), 64);
    assert_eq!(b[0], 2 | 1 << 2);
    assert!(b[1..].iter().all(|&x| x == 0));
}

// ---------------------------------------------------------------------------------------
// Event tables (cassini.md §3.1, §3.2, §5)
// ---------------------------------------------------------------------------------------

const INIT_SHORT: &[S] = &[
    f("user_ptr", 0, 64),
    f("mlength", 64, 32),
    e("ptl_list", 96, 2, LISTS),
    f("rendezvous", 100, 1),
    f("retry", 101, 1),
    f("tgt_error", 102, 1),
    k("event_size", 112, 2, 1),
    e("event_type", 114, 5, INIT_TYPES),
    e("return_code", 120, 6, RCS),
];

const INIT_LONG: &[S] = &[
    f("user_ptr", 0, 64),
    f("mlength", 64, 32),
    e("ptl_list", 96, 2, LISTS),
    f("rendezvous", 100, 1),
    f("retry", 101, 1),
    f("tgt_error", 102, 1),
    k("event_size", 112, 2, 2),
    e("event_type", 114, 5, INIT_TYPES),
    f("timestamp_ns", 128, 30),
    f("timestamp_sec", 192, 48),
    e("return_code", 248, 6, RCS),
];

const TGT_SHORT: &[S] = &[
    f("header_data", 0, 64),
    f("initiator", 64, 32),
    f("ptlte_index", 96, 11),
    k("event_size", 112, 2, 2),
    e("event_type", 114, 5, TGT_TYPES),
    e("ptl_list", 120, 2, LISTS),
    f("auto_unlinked", 124, 1),
    f("match_bits", 128, 64),
    f("buffer_id", 192, 16),
    f("vni", 208, 16),
    f("length", 224, 20),
    e("return_code", 248, 6, RCS),
];

const TGT_LONG: &[S] = &[
    f("header_data", 0, 64),
    f("initiator", 64, 32),
    f("ptlte_index", 96, 11),
    k("event_size", 112, 2, 3),
    e("event_type", 114, 5, TGT_TYPES),
    e("ptl_list", 120, 2, LISTS),
    f("rendezvous", 122, 1),
    f("get_issued", 123, 1),
    f("auto_unlinked", 124, 1),
    f("match_bits", 128, 64),
    f("buffer_id", 192, 16),
    f("vni", 208, 16),
    f("timestamp_ns", 224, 30),
    f("timestamp_sec_low", 254, 2),
    f("mlength", 256, 32),
    f("rlength", 288, 32),
    f("remote_offset", 320, 56),
    f("start", 384, 57),
    f("lpe_stat_1", 448, 16),
    f("lpe_stat_2", 464, 16),
    e("atomic_type", 480, 4, AMO_TYPES),
    e("atomic_op", 484, 4, AMO_OPS),
    e("cswap_op", 488, 3, CSWAP_OPS),
    f("rendezvous_id", 496, 8),
    e("return_code", 504, 6, RCS),
];

/// `c_state_chg_fields` in the initiator word (cassini.md §3.2: ptlte_state@64:3,
/// sc_reason@72:4, sc_nic_auto@80:1, relative to the word).
const STATE_CHG: &[S] = &[
    e("ptlte_state", 0, 3, PTLTE_STATES),
    e("sc_reason", 8, 4, SC_REASONS),
    f("sc_nic_auto", 16, 1),
];

const CMD_FAIL: &[S] = &[
    f("cq_id", 0, 10),
    f("is_target", 10, 1),
    f("fail_loc", 16, 16),
    f("fail_command", 32, 8),
    k("event_size", 112, 2, 1),
    k("event_type", 114, 5, 17),
    e("return_code", 120, 6, RCS),
];

const TRIG_SHORT: &[S] = &[
    f("threshold", 0, 48),
    f("ct_handle", 64, 11),
    k("event_size", 112, 2, 1),
    k("event_type", 114, 5, 18),
    e("return_code", 120, 6, RCS),
];

/// From the `cassini_user_defs.h` bit-field order (not spelled out in the notes).
const TRIG_LONG: &[S] = &[
    f("threshold", 0, 48),
    f("ct_handle", 64, 11),
    k("event_size", 112, 2, 2),
    k("event_type", 114, 5, 18),
    f("timestamp_ns", 128, 30),
    f("timestamp_sec", 192, 48),
    e("return_code", 248, 6, RCS),
];

/// From the `cassini_user_defs.h` bit-field order.
const ENET: &[S] = &[
    f("checksum", 0, 16),
    f("pkt_cnt", 16, 46),
    f("seg_cnt", 62, 2),
    f("rss_hash_value", 64, 32),
    f("ptlte_index", 96, 11),
    k("event_size", 112, 2, 2),
    k("event_type", 114, 5, 16),
    e("ptl_list", 120, 2, LISTS),
    f("auto_unlinked", 124, 1),
    f("start", 128, 57),
    f("buffer_id", 192, 16),
    f("rss_hash_type", 208, 5),
    f("more_frags", 216, 1),
    f("is_roce", 218, 1),
    f("roce_icrc_ok", 219, 1),
    f("timestamp", 220, 1),
    f("fmt", 221, 1),
    f("parser_err", 222, 1),
    f("length", 224, 16),
    e("return_code", 248, 6, RCS),
];

/// From the `cassini_user_defs.h` bit-field order.
const FGFC: &[S] = &[
    f("identifier", 0, 32),
    f("fgfc_type", 64, 2),
    f("xoff", 72, 1),
    f("srcip_tag", 80, 2),
    f("credits", 96, 16),
    k("event_size", 112, 2, 1),
    k("event_type", 114, 5, 19),
    e("return_code", 120, 6, RCS),
];

/// From the `cassini_user_defs.h` bit-field order.
const PCT: &[S] = &[
    f("dfa", 0, 32),
    f("seq_num", 32, 12),
    e("pct_event_type", 64, 3, &[0, 1, 2, 3, 4, 5]),
    f("spt_idx", 80, 11),
    f("conn_idx", 96, 13),
    k("event_size", 112, 2, 1),
    k("event_type", 114, 5, 20),
    e("return_code", 120, 6, RCS),
];

/// From the `cassini_user_defs.h` bit-field order.
const TIMESTAMP: &[S] = &[
    f("timestamp_ns", 0, 30),
    f("timestamp_sec", 64, 48),
    k("event_size", 112, 2, 1),
    k("event_type", 114, 5, 29),
    e("return_code", 120, 6, RCS),
];

const EQ_SWITCH: &[S] = &[
    k("event_size", 112, 2, 1),
    k("event_type", 114, 5, 30),
    e("return_code", 120, 6, RCS),
];

// ---------------------------------------------------------------------------------------
// Event builders and golden tests
// ---------------------------------------------------------------------------------------

fn build_init_short(v: &Vals) -> InitiatorShort {
    InitiatorShort {
        user_ptr: v.u64("user_ptr"),
        mlength: v.u32("mlength"),
        ptl_list: v.en("ptl_list"),
        rendezvous: v.b("rendezvous"),
        retry: v.b("retry"),
        tgt_error: v.b("tgt_error"),
        event_type: v.en("event_type"),
        return_code: v.en("return_code"),
    }
}

fn build_init_long(v: &Vals) -> InitiatorLong {
    InitiatorLong {
        user_ptr: v.u64("user_ptr"),
        mlength: v.u32("mlength"),
        ptl_list: v.en("ptl_list"),
        rendezvous: v.b("rendezvous"),
        retry: v.b("retry"),
        tgt_error: v.b("tgt_error"),
        event_type: v.en("event_type"),
        timestamp_ns: v.u32("timestamp_ns"),
        timestamp_sec: v.u64("timestamp_sec"),
        return_code: v.en("return_code"),
    }
}

fn build_tgt_short(v: &Vals) -> TargetShort {
    TargetShort {
        header_data: v.u64("header_data"),
        initiator: v.u32("initiator"),
        ptlte_index: v.u16("ptlte_index"),
        event_type: v.en("event_type"),
        ptl_list: v.en("ptl_list"),
        auto_unlinked: v.b("auto_unlinked"),
        match_bits: v.u64("match_bits"),
        buffer_id: v.u16("buffer_id"),
        vni: v.u16("vni"),
        length: v.u32("length"),
        return_code: v.en("return_code"),
    }
}

fn build_tgt_long(v: &Vals) -> TargetLong {
    TargetLong {
        header_data: v.u64("header_data"),
        initiator: v.u32("initiator"),
        ptlte_index: v.u16("ptlte_index"),
        event_type: v.en("event_type"),
        ptl_list: v.en("ptl_list"),
        rendezvous: v.b("rendezvous"),
        get_issued: v.b("get_issued"),
        auto_unlinked: v.b("auto_unlinked"),
        match_bits: v.u64("match_bits"),
        buffer_id: v.u16("buffer_id"),
        vni: v.u16("vni"),
        timestamp_ns: v.u32("timestamp_ns"),
        timestamp_sec_low: v.u8("timestamp_sec_low"),
        mlength: v.u32("mlength"),
        rlength: v.u32("rlength"),
        remote_offset: v.u64("remote_offset"),
        start: v.u64("start"),
        lpe_stat_1: v.u16("lpe_stat_1"),
        lpe_stat_2: v.u16("lpe_stat_2"),
        atomic_type: v.en("atomic_type"),
        atomic_op: v.en("atomic_op"),
        cswap_op: v.en("cswap_op"),
        rendezvous_id: v.u8("rendezvous_id"),
        return_code: v.en("return_code"),
    }
}

fn ev_enc(e: &Event) -> Vec<u8> {
    e.encode().unwrap()
}
fn ev_dec(b: &[u8]) -> Event {
    Event::decode(b).unwrap()
}

#[test]
fn golden_initiator_events() {
    golden(INIT_SHORT, build_init_short);
    golden_with(
        "init short ev",
        INIT_SHORT,
        16,
        |v| Event::InitiatorShort(build_init_short(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );
    golden(INIT_LONG, build_init_long);
    golden_with(
        "init long ev",
        INIT_LONG,
        32,
        |v| Event::InitiatorLong(build_init_long(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );
}

#[test]
fn golden_target_events() {
    golden(TGT_SHORT, build_tgt_short);
    golden_with(
        "tgt short ev",
        TGT_SHORT,
        32,
        |v| Event::TargetShort(build_tgt_short(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );
    golden(TGT_LONG, build_tgt_long);
    golden_with(
        "tgt long ev",
        TGT_LONG,
        64,
        |v| Event::TargetLong(build_tgt_long(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );
}

#[test]
fn golden_state_change_event() {
    let sc = |v: &Vals| StateChangeFields {
        ptlte_state: v.en("ptlte_state"),
        sc_reason: v.en("sc_reason"),
        sc_nic_auto: v.b("sc_nic_auto"),
    };
    golden(STATE_CHG, sc);
    // The state-change variant of a long target event: the fields sit at 64.. of the event.
    let t: Vec<S> = TGT_LONG
        .iter()
        .filter(|s| s.name != "initiator" && s.name != "event_type")
        .copied()
        .chain([k("event_type", 114, 5, 13)])
        .chain(shifted(STATE_CHG, 64))
        .collect();
    golden_with(
        "state change ev",
        &t,
        64,
        |v| {
            let fields = sc(v);
            let ev = TargetLong {
                initiator: fields.to_initiator(),
                event_type: EventType::StateChange,
                ..build_tgt_long_without_initiator(v)
            };
            assert_eq!(ev.state_change(), Some(Ok(fields)));
            Event::TargetLong(ev)
        },
        |_, _| {},
        ev_enc,
        ev_dec,
    );
}

fn build_tgt_long_without_initiator(v: &Vals) -> TargetLong {
    TargetLong {
        header_data: v.u64("header_data"),
        ptlte_index: v.u16("ptlte_index"),
        ptl_list: v.en("ptl_list"),
        rendezvous: v.b("rendezvous"),
        get_issued: v.b("get_issued"),
        auto_unlinked: v.b("auto_unlinked"),
        match_bits: v.u64("match_bits"),
        buffer_id: v.u16("buffer_id"),
        vni: v.u16("vni"),
        timestamp_ns: v.u32("timestamp_ns"),
        timestamp_sec_low: v.u8("timestamp_sec_low"),
        mlength: v.u32("mlength"),
        rlength: v.u32("rlength"),
        remote_offset: v.u64("remote_offset"),
        start: v.u64("start"),
        lpe_stat_1: v.u16("lpe_stat_1"),
        lpe_stat_2: v.u16("lpe_stat_2"),
        atomic_type: v.en("atomic_type"),
        atomic_op: v.en("atomic_op"),
        cswap_op: v.en("cswap_op"),
        rendezvous_id: v.u8("rendezvous_id"),
        return_code: v.en("return_code"),
        ..TargetLong::default()
    }
}

#[test]
fn golden_other_events() {
    let cf = |v: &Vals| CommandFailure {
        cq_id: v.u16("cq_id"),
        is_target: v.b("is_target"),
        fail_loc: v.u16("fail_loc"),
        fail_command: CmdHeader::from_byte(v.u8("fail_command")),
        return_code: v.en("return_code"),
    };
    golden(CMD_FAIL, cf);
    golden_with(
        "cmd fail ev",
        CMD_FAIL,
        16,
        |v| Event::CommandFailure(cf(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );

    let ts = |v: &Vals| TrigOpShort {
        threshold: v.u64("threshold"),
        ct_handle: v.u16("ct_handle"),
        return_code: v.en("return_code"),
    };
    golden(TRIG_SHORT, ts);
    golden_with(
        "trig short ev",
        TRIG_SHORT,
        16,
        |v| Event::TrigOpShort(ts(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );
    let tl = |v: &Vals| TrigOpLong {
        threshold: v.u64("threshold"),
        ct_handle: v.u16("ct_handle"),
        timestamp_ns: v.u32("timestamp_ns"),
        timestamp_sec: v.u64("timestamp_sec"),
        return_code: v.en("return_code"),
    };
    golden(TRIG_LONG, tl);
    golden_with(
        "trig long ev",
        TRIG_LONG,
        32,
        |v| Event::TrigOpLong(tl(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );

    let en = |v: &Vals| EnetEvent {
        checksum: v.u16("checksum"),
        pkt_cnt: v.u64("pkt_cnt"),
        seg_cnt: v.u8("seg_cnt"),
        rss_hash_value: v.u32("rss_hash_value"),
        ptlte_index: v.u16("ptlte_index"),
        ptl_list: v.en("ptl_list"),
        auto_unlinked: v.b("auto_unlinked"),
        start: v.u64("start"),
        buffer_id: v.u16("buffer_id"),
        rss_hash_type: v.u8("rss_hash_type"),
        more_frags: v.b("more_frags"),
        is_roce: v.b("is_roce"),
        roce_icrc_ok: v.b("roce_icrc_ok"),
        timestamp: v.b("timestamp"),
        fmt: v.b("fmt"),
        parser_err: v.b("parser_err"),
        length: v.u16("length"),
        return_code: v.en("return_code"),
    };
    golden(ENET, en);
    golden_with(
        "enet ev",
        ENET,
        32,
        |v| Event::Ethernet(en(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );

    let fg = |v: &Vals| EnetFgfc {
        identifier: v.u32("identifier"),
        fgfc_type: v.u8("fgfc_type"),
        xoff: v.b("xoff"),
        srcip_tag: v.u8("srcip_tag"),
        credits: v.u16("credits"),
        return_code: v.en("return_code"),
    };
    golden(FGFC, fg);
    golden_with(
        "fgfc ev",
        FGFC,
        16,
        |v| Event::EthernetFgfc(fg(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );

    let pc = |v: &Vals| PctEvent {
        dfa: v.u32("dfa"),
        seq_num: v.u16("seq_num"),
        pct_event_type: v.en("pct_event_type"),
        spt_idx: v.u16("spt_idx"),
        conn_idx: v.u16("conn_idx"),
        return_code: v.en("return_code"),
    };
    golden(PCT, pc);
    golden_with(
        "pct ev",
        PCT,
        16,
        |v| Event::Pct(pc(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );

    let tse = |v: &Vals| TimestampEvent {
        timestamp_ns: v.u32("timestamp_ns"),
        timestamp_sec: v.u64("timestamp_sec"),
        return_code: v.en("return_code"),
    };
    golden(TIMESTAMP, tse);
    golden_with(
        "timestamp ev",
        TIMESTAMP,
        16,
        |v| Event::Timestamp(tse(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );

    let sw = |v: &Vals| EqSwitchEvent {
        return_code: v.en("return_code"),
    };
    golden(EQ_SWITCH, sw);
    golden_with(
        "eq switch ev",
        EQ_SWITCH,
        16,
        |v| Event::EqSwitch(sw(v)),
        |_, _| {},
        ev_enc,
        ev_dec,
    );
}

#[test]
fn golden_header_only_events() {
    // NULL_EVENT padding and ERROR: header + return code in the low 6 bits of the last byte.
    for (size_code, size) in [(1u64, 16usize), (2, 32), (3, 64)] {
        for (ty, make) in [
            (31u64, Event::Null as fn(EventHeader) -> Event),
            (28, Event::Error as fn(EventHeader) -> Event),
        ] {
            let t = [
                k("event_size", 112, 2, size_code),
                k("event_type", 114, 5, ty),
                e("return_code", size * 8 - 8, 6, RCS),
            ];
            golden_with(
                "header-only ev",
                &t,
                size,
                |v| {
                    make(EventHeader {
                        size: EventSize::try_from(size_code as u8).unwrap(),
                        event_type: EventType::try_from(ty as u8).unwrap(),
                        return_code: v.en("return_code"),
                    })
                },
                |_, _| {},
                ev_enc,
                ev_dec,
            );
        }
    }
}

#[test]
fn event_header_valid_bit_rules() {
    let ev = Event::TargetLong(TargetLong {
        event_type: EventType::Link,
        return_code: ReturnCode::NoSpace,
        ..TargetLong::default()
    });
    let mut b = ev.encode().unwrap();
    assert_eq!(b.len(), 64);
    assert_eq!(
        event_header(&b),
        Some((EventSize::B64, EventType::Link, ReturnCode::NoSpace))
    );
    // The return code is the low 6 bits of the last byte.
    assert_eq!(b[63] & 0x3F, ReturnCode::NoSpace as u8);
    // A partial write (everything but the last byte) is not an event yet.
    b[63] = 0;
    assert_eq!(event_header(&b), None);
    assert_eq!(Event::decode(&b), Err(FormatError::NoEvent));
    // Zeroed (acknowledged) slot.
    assert_eq!(event_header(&[0u8; 64]), None);
    assert_eq!(peek_event(&[0u8; 16]), Ok(None));
    // Short initiator event: rc in byte 15.
    let ev = Event::InitiatorShort(InitiatorShort {
        event_type: EventType::Ack,
        return_code: ReturnCode::PtDisabled,
        ..InitiatorShort::default()
    });
    let b = ev.encode().unwrap();
    assert_eq!(b.len(), 16);
    assert_eq!(b[15] & 0x3F, 3);
    assert_eq!(b[14], 1 | (9 << 2));
}

// ---------------------------------------------------------------------------------------
// Status blocks and words (cassini.md §1.4, §3.1, §5, §6, §2.1)
// ---------------------------------------------------------------------------------------

const CQ_STATUS: &[S] = &[
    f("rd_ptr", 0, 16),
    f("num_write_cmds_rejected", 16, 16),
    f("fail_command", 32, 8),
    e("return_code", 48, 6, RCS),
    f("fail_loc_32", 61, 1),
    f("fail_ll", 62, 1),
    f("ll_disabled", 63, 1),
];

const EQ_STATUS: &[S] = &[
    f("timestamp_ns_cpy", 0, 30),
    f("timestamp_sec_cpy", 64, 48),
    f("thld_sts", 112, 1),
    f("thld_id", 116, 2),
    f("unackd_dropped_event", 120, 1),
    f("event_drop_seq_no", 124, 1),
    f("event_slots_free", 128, 26),
    f("event_slots_rsrvd", 160, 26),
    f("wr_ptr", 192, 26),
    f("using_buffer_b", 224, 1),
    f("timestamp_ns", 416, 30),
    f("timestamp_sec", 448, 48),
];

const EQ_SW_STATE: &[S] = &[
    f("rd_ptr", 0, 26),
    f("reading_buffer_b", 31, 1),
    f("event_int_disable", 32, 1),
    f("eq_sts_int_disable", 33, 1),
    f("event_drop_seq_no", 40, 1),
];

const CT_WB: &[S] = &[
    f("ct_success", 0, 48),
    f("ct_failure", 48, 7),
    f("ct_writeback", 63, 1),
];

const UNICAST: &[S] = &[f("endpoint_defined", 0, 12), f("nid", 12, 20)];
const MCAST: &[S] = &[
    f("action", 0, 3),
    f("multicast_id", 3, 13),
    f("reduction_id", 18, 3),
    f("format", 23, 9),
];
const RDZV_MB: &[S] = &[
    f("rendezvous_id", 0, 8),
    f("transaction_type", 8, 4),
    f("match_bits", 48, 16),
];
const RDZV_UP: &[S] = &[
    f("src_nid", 0, 20),
    f("src_pid", 20, 9),
    f("ptlte_index", 29, 11),
    f("rendezvous_id", 40, 8),
    f("buffer_id", 48, 16),
];
const PTE_MAP_OFF: &[S] = &[f("mcast_id", 0, 13), f("mcast_pte_index", 13, 5)];

#[test]
fn golden_status_blocks() {
    golden(CQ_STATUS, |v| CqStatus {
        rd_ptr: v.u16("rd_ptr"),
        num_write_cmds_rejected: v.u16("num_write_cmds_rejected"),
        fail_command: CmdHeader::from_byte(v.u8("fail_command")),
        return_code: v.en("return_code"),
        fail_loc_32: v.b("fail_loc_32"),
        fail_ll: v.b("fail_ll"),
        ll_disabled: v.b("ll_disabled"),
    });
    golden(EQ_STATUS, |v| EqStatus {
        timestamp_ns_cpy: v.u32("timestamp_ns_cpy"),
        timestamp_sec_cpy: v.u64("timestamp_sec_cpy"),
        thld_sts: v.b("thld_sts"),
        thld_id: v.u8("thld_id"),
        unackd_dropped_event: v.b("unackd_dropped_event"),
        event_drop_seq_no: v.b("event_drop_seq_no"),
        event_slots_free: v.u32("event_slots_free"),
        event_slots_rsrvd: v.u32("event_slots_rsrvd"),
        wr_ptr: v.u32("wr_ptr"),
        using_buffer_b: v.b("using_buffer_b"),
        timestamp_ns: v.u32("timestamp_ns"),
        timestamp_sec: v.u64("timestamp_sec"),
    });
    golden(EQ_SW_STATE, |v| EqSwState {
        rd_ptr: v.u32("rd_ptr"),
        reading_buffer_b: v.b("reading_buffer_b"),
        event_int_disable: v.b("event_int_disable"),
        eq_sts_int_disable: v.b("eq_sts_int_disable"),
        event_drop_seq_no: v.b("event_drop_seq_no"),
    });
    golden(CT_WB, |v| CtWriteback {
        ct_success: v.u64("ct_success"),
        ct_failure: v.u8("ct_failure"),
        ct_writeback: v.b("ct_writeback"),
    });
}

#[test]
fn golden_address_words() {
    golden(UNICAST, |v| UnicastDfa {
        endpoint_defined: v.u16("endpoint_defined"),
        nid: v.u32("nid"),
    });
    golden(MCAST, |v| MulticastDfa {
        action: v.u8("action"),
        multicast_id: v.u16("multicast_id"),
        reduction_id: v.u8("reduction_id"),
        format: v.u16("format"),
    });
    golden(RDZV_MB, |v| RdzvMatchBits {
        rendezvous_id: v.u8("rendezvous_id"),
        transaction_type: v.u8("transaction_type"),
        match_bits: v.u16("match_bits"),
    });
    golden(RDZV_UP, |v| RdzvUserPtr {
        src_nid: v.u32("src_nid"),
        src_pid: v.u16("src_pid"),
        ptlte_index: v.u16("ptlte_index"),
        rendezvous_id: v.u8("rendezvous_id"),
        buffer_id: v.u16("buffer_id"),
    });
    golden(PTE_MAP_OFF, |v| PteMapOffset {
        mcast_id: v.u16("mcast_id"),
        mcast_pte_index: v.u8("mcast_pte_index"),
    });
}

// ---------------------------------------------------------------------------------------
// Malformed input
// ---------------------------------------------------------------------------------------

fn hdr(t: CmdType, s: CmdSize, op: u8) -> u8 {
    CmdHeader::new(t, s, op).to_byte()
}

#[test]
fn malformed_commands_are_errors() {
    use FormatError as E;
    let mut b = [0u8; 256];
    assert!(matches!(Command::decode(&[]), Err(E::Truncated { .. })));
    // Unknown or unsupported opcodes.
    for (t, op) in [
        (CmdType::Idc, DmaOp::Get as u8),
        (CmdType::Idc, DmaOp::NomatchPut as u8),
        (CmdType::Idc, 14),
        (CmdType::Dma, DmaOp::Noop as u8),
        (CmdType::Dma, DmaOp::Close as u8),
        (CmdType::Dma, 15),
        (CmdType::Ct, 9),
        (CmdType::Cq, 3),
        (CmdType::Cq, TgtOp::Append as u8),
    ] {
        b[0] = hdr(t, CmdSize::B64, op);
        assert!(
            matches!(
                Command::decode(&b),
                Err(E::UnsupportedCommand {
                    queue: "transmit",
                    ..
                })
            ),
            "{t:?} {op}"
        );
    }
    // Wrong size for the format.
    b.fill(0);
    b[0] = hdr(CmdType::Dma, CmdSize::B32, DmaOp::Put as u8);
    assert!(matches!(
        Command::decode(&b),
        Err(E::Mismatch {
            field: "cmd_size",
            ..
        })
    ));
    b[0] = hdr(CmdType::Ct, CmdSize::B128, CtOp::CtInc as u8);
    assert!(matches!(
        Command::decode(&b),
        Err(E::Mismatch {
            field: "cmd_size",
            ..
        })
    ));
    b[0] = hdr(CmdType::Ct, CmdSize::B64, CtOp::CtTrigDma as u8);
    assert!(matches!(
        Command::decode(&b),
        Err(E::Mismatch {
            field: "cmd_size",
            ..
        })
    ));
    // Too few bytes for the size the header claims.
    let full = Command::Dma(FullDma {
        opcode: DmaOp::Put,
        ..Default::default()
    })
    .encode()
    .unwrap();
    assert!(matches!(
        Command::decode(&full[..63]),
        Err(E::Truncated {
            need: 64,
            got: 63,
            ..
        })
    ));
    assert!(matches!(
        FullDma::decode(&full[..32]),
        Err(E::Truncated { .. })
    ));
    // IDC put whose length does not fit its size, or is below the header.
    let put = Command::IdcPut(IdcPut {
        payload: Payload::new(&[7; 40]).unwrap(),
        ..Default::default()
    });
    let mut pb = put.encode().unwrap();
    assert_eq!(pb.len(), 64);
    pb[1] = 100; // needs 128 B
    assert!(matches!(
        Command::decode(&pb),
        Err(E::Mismatch {
            field: "cmd_size",
            ..
        })
    ));
    pb[1] = 8;
    assert!(matches!(Command::decode(&pb), Err(E::BadLength { .. })));
    pb[1] = 250; // over C_MAX_IDC_PAYLOAD_RES
    assert!(matches!(Command::decode(&pb), Err(E::BadLength { .. })));
    // IDC message over C_MAX_IDC_PAYLOAD_UNR.
    let mut mb = [0u8; 256];
    mb[0] = hdr(CmdType::Idc, CmdSize::B256, DmaOp::SmallMessage as u8);
    mb[1] = 32 + 193;
    assert!(matches!(Command::decode(&mb), Err(E::BadLength { .. })));
    // Fixed length fields.
    let mut cs = Command::CState(CState::default()).encode().unwrap();
    cs[1] = 31;
    assert!(matches!(
        Command::decode(&cs),
        Err(E::Mismatch {
            field: "length",
            ..
        })
    ));
    // Unknown enumeration values.
    let mut amo = Command::IdcAmo(IdcAmo {
        opcode: DmaOp::Atomic,
        ..Default::default()
    })
    .encode()
    .unwrap();
    amo[24] = 3; // atomic_op 3 is unused
    assert!(matches!(Command::decode(&amo), Err(E::Unknown(_))));
    // Embedded command of the wrong type.
    let mut trig = Command::TrigDma(TrigDma::new(
        5,
        10,
        EmbeddedDma::Full(FullDma {
            opcode: DmaOp::Get,
            ..Default::default()
        }),
    ))
    .encode()
    .unwrap();
    trig[24] = hdr(CmdType::Idc, CmdSize::B64, DmaOp::Put as u8);
    assert!(matches!(
        Command::decode(&trig),
        Err(E::UnsupportedCommand {
            queue: "embedded",
            ..
        })
    ));
}

#[test]
fn malformed_target_commands_are_errors() {
    use FormatError as E;
    let mut b = [0u8; 64];
    assert!(TargetCommand::decode(&[]).is_err());
    b[0] = hdr(CmdType::Dma, CmdSize::B64, DmaOp::Put as u8);
    assert!(matches!(
        TargetCommand::decode(&b),
        Err(E::UnsupportedCommand {
            queue: "target",
            ..
        })
    ));
    for op in [0u8, 7, 13, 15] {
        b[0] = hdr(CmdType::Cq, CmdSize::B64, op);
        assert!(
            matches!(TargetCommand::decode(&b), Err(E::UnsupportedCommand { .. })),
            "{op}"
        );
    }
    b[0] = hdr(CmdType::Cq, CmdSize::B32, TgtOp::Append as u8);
    assert!(matches!(
        TargetCommand::decode(&b),
        Err(E::Mismatch {
            field: "cmd_size",
            ..
        })
    ));
    b[0] = hdr(CmdType::Cq, CmdSize::B64, TgtOp::Setstate as u8);
    b[1] = 5; // ptlte_state 5 is unused
    assert!(matches!(TargetCommand::decode(&b), Err(E::Unknown(_))));
    b[1] = 2;
    assert!(TargetCommand::decode(&b).is_ok());
    assert!(matches!(
        TargetCommand::decode(&b[..63]),
        Err(E::Truncated { .. })
    ));
}

#[test]
fn malformed_events_are_errors() {
    use FormatError as E;
    assert!(matches!(Event::decode(&[]), Err(E::Truncated { .. })));
    assert_eq!(Event::decode(&[0u8; 64]), Err(E::NoEvent));
    // A 64 B initiator event does not exist.
    let mut b = [0u8; 64];
    set_bits(&mut b, 112, 2, 3);
    set_bits(&mut b, 114, 5, EventType::Ack as u64);
    b[63] = 1;
    assert!(matches!(
        Event::decode(&b),
        Err(E::UnsupportedEvent {
            event_size: 3,
            event_type: 9
        })
    ));
    // Unused event types and return codes.
    set_bits(&mut b, 114, 5, 23);
    assert!(matches!(Event::decode(&b), Err(E::Unknown(_))));
    set_bits(&mut b, 114, 5, EventType::Put as u64);
    b[63] = 7;
    assert!(matches!(Event::decode(&b), Err(E::Unknown(_))));
    // The slice must hold the whole event.
    b[63] = 1;
    assert!(Event::decode(&b).is_ok());
    assert!(matches!(Event::decode(&b[..48]), Err(E::Truncated { .. })));
}

#[test]
fn invalid_values_do_not_encode() {
    use FormatError as E;
    let wrong_op = Command::Dma(FullDma {
        opcode: DmaOp::Atomic,
        ..Default::default()
    });
    assert!(matches!(
        wrong_op.encode(),
        Err(E::UnsupportedCommand { .. })
    ));
    assert!(
        Command::NomatchDma(NomatchDma {
            opcode: DmaOp::Put,
            ..Default::default()
        })
        .encode()
        .is_err()
    );
    assert!(
        Command::DmaAmo(DmaAmo {
            opcode: DmaOp::Get,
            ..Default::default()
        })
        .encode()
        .is_err()
    );
    assert!(
        Command::IdcAmo(IdcAmo {
            opcode: DmaOp::Put,
            ..Default::default()
        })
        .encode()
        .is_err()
    );
    assert!(
        Command::Ct(CtCmd {
            opcode: CtOp::CtTrigDma,
            ..Default::default()
        })
        .encode()
        .is_err()
    );
    let mut t = TrigDma::new(
        1,
        1,
        EmbeddedDma::Nomatch(NomatchDma {
            opcode: DmaOp::NomatchPut,
            ..Default::default()
        }),
    );
    assert!(Command::TrigDma(t).encode().is_ok());
    t.ct.opcode = CtOp::CtInc;
    assert!(Command::TrigDma(t).encode().is_err());
    let big = Command::IdcPut(IdcPut {
        payload: Payload::new(&[0; 225]).unwrap(),
        ..Default::default()
    });
    assert!(matches!(big.encode(), Err(E::BadLength { .. })));
    let big = Command::IdcMsg(IdcMsg {
        payload: Payload::new(&[0; 193]).unwrap(),
        ..Default::default()
    });
    assert!(big.encode().is_err());
    assert!(Payload::new(&[0; 241]).is_err());
    let ok = Command::Cq(CqCmd {
        opcode: CqOp::CqFence,
        lcid: 0,
    });
    assert!(matches!(
        ok.encode_into(&mut [0u8; 63]),
        Err(E::BufferTooSmall { .. })
    ));
    assert!(
        TargetCommand::List(TargetCmd {
            opcode: TgtOp::Setstate,
            ..Default::default()
        })
        .encode()
        .is_err()
    );
    let ev = Event::InitiatorShort(InitiatorShort {
        event_type: EventType::Put,
        return_code: ReturnCode::Ok,
        ..Default::default()
    });
    assert!(ev.encode().is_err());
    let ev = Event::TargetShort(TargetShort {
        event_type: EventType::Put,
        ..Default::default()
    });
    assert_eq!(ev.encode(), Err(E::NoEvent)); // return code NO_EVENT would never be read
}

#[test]
fn ring_sizes() {
    let put = |n: usize| {
        Command::IdcPut(IdcPut {
            payload: Payload::new(&vec![1; n]).unwrap(),
            ..Default::default()
        })
    };
    let msg = |n: usize| {
        Command::IdcMsg(IdcMsg {
            payload: Payload::new(&vec![1; n]).unwrap(),
            ..Default::default()
        })
    };
    for n in 0..=224 {
        let want = [32, 64, 128, 256]
            .into_iter()
            .find(|s| *s >= 16 + n)
            .unwrap();
        assert_eq!(put(n).encoded_len(), want, "put {n}");
        assert_eq!(put(n).encode().unwrap().len(), want);
    }
    for n in 0..=192 {
        let want = [64, 128, 256].into_iter().find(|s| *s >= 32 + n).unwrap();
        assert_eq!(msg(n).encoded_len(), want, "msg {n}");
    }
    assert_eq!(Command::CState(CState::default()).encoded_len(), 32);
    assert_eq!(
        Command::IdcSmallAmo(IdcSmallAmo::default()).encoded_len(),
        32
    );
    assert_eq!(Command::NomatchDma(NomatchDma::default()).encoded_len(), 32);
    assert_eq!(Command::IdcAmo(IdcAmo::default()).encoded_len(), 64);
    assert_eq!(Command::Dma(FullDma::default()).encoded_len(), 64);
    assert_eq!(Command::Ct(CtCmd::default()).encoded_len(), 64);
    assert_eq!(Command::Cq(CqCmd::default()).encoded_len(), 64);
    assert_eq!(Command::DmaAmo(DmaAmo::default()).encoded_len(), 128);
    assert_eq!(Command::DmaEth(DmaEth::default()).encoded_len(), 128);
    let t = TrigDma::new(
        1,
        2,
        EmbeddedDma::Full(FullDma {
            opcode: DmaOp::Put,
            ..Default::default()
        }),
    );
    assert_eq!(Command::TrigDma(t).encoded_len(), 128);
    assert_eq!(
        TargetCommand::SetState(SetStateCmd::default()).encoded_len(),
        64
    );
}

// ---------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------

/// An image of `T` built from the crate's own field table: constants set, enumerations from
/// their valid values, other fields random, derived fields made consistent.
fn arb_image<T: Layout>() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u64>(), T::FIELDS.len()).prop_map(|seeds| {
        let mut b = vec![0u8; T::SIZE];
        for (fd, s) in T::FIELDS.iter().zip(seeds) {
            let v = match fd.kind {
                FieldKind::Const(c) => c,
                FieldKind::Derived => 0,
                FieldKind::Value(None) => s & mask(fd.width as u32),
                FieldKind::Value(Some(l)) => l[(s % l.len() as u64) as usize],
            };
            set_bits(&mut b, fd.offset, fd.width, v);
        }
        for fd in T::FIELDS.iter().filter(|fd| fd.kind == FieldKind::Derived) {
            for v in 0..(1u64 << fd.width) {
                set_bits(&mut b, fd.offset, fd.width, v);
                if T::read_from(&b).is_ok() {
                    break;
                }
            }
        }
        b
    })
}

fn arb<T: Layout + Debug>() -> impl Strategy<Value = T> {
    arb_image::<T>().prop_map(|b| T::read_from(&b).unwrap())
}

fn layout_roundtrip<T: Layout + PartialEq + Debug>(img: &[u8]) -> Result<(), TestCaseError> {
    let x = T::read_from(img).map_err(|e| TestCaseError::fail(format!("{}: {e}", T::NAME)))?;
    let enc = x.to_vec();
    prop_assert_eq!(&enc[..], img, "{}", T::NAME);
    prop_assert_eq!(T::read_from(&enc).unwrap(), x);
    Ok(())
}

macro_rules! layout_roundtrips {
    ($($name:ident: $t:ty),* $(,)?) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            $(
                #[test]
                fn $name(img in arb_image::<$t>()) {
                    layout_roundtrip::<$t>(&img)?;
                }
            )*
        }
    };
}

layout_roundtrips! {
    rt_cstate: CState,
    rt_idc_hdr: IdcHdr,
    rt_idc_msg_hdr: IdcMsgHdr,
    rt_idc_eth_hdr: IdcEthHdr,
    rt_idc_amo: IdcAmo,
    rt_idc_small_amo: IdcSmallAmo,
    rt_small_amo_payload: SmallAmoPayload,
    rt_full_dma: FullDma,
    rt_nomatch: NomatchDma,
    rt_dma_amo: DmaAmo,
    rt_dma_eth: DmaEth,
    rt_cq_cmd: CqCmd,
    rt_ct_cmd: CtCmd,
    rt_target_cmd: TargetCmd,
    rt_set_state: SetStateCmd,
    rt_init_short: InitiatorShort,
    rt_init_long: InitiatorLong,
    rt_tgt_short: TargetShort,
    rt_tgt_long: TargetLong,
    rt_state_chg: StateChangeFields,
    rt_cmd_fail: CommandFailure,
    rt_trig_short: TrigOpShort,
    rt_trig_long: TrigOpLong,
    rt_enet: EnetEvent,
    rt_fgfc: EnetFgfc,
    rt_pct: PctEvent,
    rt_timestamp: TimestampEvent,
    rt_eq_switch: EqSwitchEvent,
    rt_cq_status: CqStatus,
    rt_eq_status: EqStatus,
    rt_eq_sw_state: EqSwState,
    rt_ct_wb: CtWriteback,
    rt_unicast: UnicastDfa,
    rt_mcast: MulticastDfa,
    rt_rdzv_mb: RdzvMatchBits,
    rt_rdzv_up: RdzvUserPtr,
    rt_pte_map_off: PteMapOffset,
}

fn arb_payload(max: usize) -> impl Strategy<Value = Payload> {
    proptest::collection::vec(any::<u8>(), 0..=max).prop_map(|v| Payload::new(&v).unwrap())
}

fn arb_embedded() -> impl Strategy<Value = EmbeddedDma> {
    prop_oneof![
        (
            arb::<FullDma>(),
            prop::sample::select(vec![DmaOp::Put, DmaOp::Get, DmaOp::RendezvousPut])
        )
            .prop_map(|(mut d, op)| {
                d.opcode = op;
                EmbeddedDma::Full(d)
            }),
        (
            arb::<NomatchDma>(),
            prop::sample::select(vec![DmaOp::NomatchPut, DmaOp::NomatchGet])
        )
            .prop_map(|(mut d, op)| {
                d.opcode = op;
                EmbeddedDma::Nomatch(d)
            }),
        (
            arb::<DmaAmo>(),
            prop::sample::select(vec![DmaOp::Atomic, DmaOp::FetchingAtomic])
        )
            .prop_map(|(mut d, op)| {
                d.opcode = op;
                EmbeddedDma::Amo(d)
            }),
    ]
}

fn arb_command() -> impl Strategy<Value = Command> {
    let amo_ops = vec![DmaOp::Atomic, DmaOp::FetchingAtomic];
    prop_oneof![
        prop::sample::select(CmdSize::ALL.to_vec()).prop_map(Command::IdcNoop),
        arb::<CState>().prop_map(Command::CState),
        (any::<u32>(), 0..(1u64 << 56), arb_payload(224)).prop_map(
            |(dfa, remote_offset, payload)| {
                Command::IdcPut(IdcPut {
                    dfa,
                    remote_offset,
                    payload,
                })
            }
        ),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            arb_payload(192)
        )
            .prop_map(|(dfa, match_bits, header_data, user_ptr, payload)| {
                Command::IdcMsg(IdcMsg {
                    dfa,
                    match_bits,
                    header_data,
                    user_ptr,
                    payload,
                })
            }),
        (arb::<IdcAmo>(), prop::sample::select(amo_ops.clone())).prop_map(|(mut c, op)| {
            c.opcode = op;
            Command::IdcAmo(c)
        }),
        arb::<IdcSmallAmo>().prop_map(Command::IdcSmallAmo),
        (arb::<IdcEthHdr>(), arb_payload(239)).prop_map(|(h, payload)| {
            Command::IdcEth(IdcEth {
                flow_hash: h.flow_hash,
                checksum_ctrl: h.checksum_ctrl,
                fmt: h.fmt,
                checksum_start: h.checksum_start,
                checksum_offset: h.checksum_offset,
                payload,
            })
        }),
        arb_embedded().prop_map(|d| match d {
            EmbeddedDma::Full(d) => Command::Dma(d),
            EmbeddedDma::Nomatch(d) => Command::NomatchDma(d),
            EmbeddedDma::Amo(d) => Command::DmaAmo(d),
        }),
        arb::<DmaEth>().prop_map(Command::DmaEth),
        arb::<CtCmd>()
            .prop_filter("not TRIG_DMA", |c| c.opcode != CtOp::CtTrigDma)
            .prop_map(Command::Ct),
        (arb::<CtCmd>(), arb_embedded()).prop_map(|(mut ct, dma)| {
            ct.opcode = CtOp::CtTrigDma;
            Command::TrigDma(TrigDma { ct, dma })
        }),
        arb::<CqCmd>().prop_map(Command::Cq),
    ]
}

fn arb_target_command() -> impl Strategy<Value = TargetCommand> {
    prop_oneof![
        arb::<TargetCmd>()
            .prop_filter("list op", |c| c.opcode != TgtOp::Setstate)
            .prop_map(TargetCommand::List),
        arb::<SetStateCmd>().prop_map(TargetCommand::SetState),
    ]
}

fn ok_rc(rc: ReturnCode) -> ReturnCode {
    if rc == ReturnCode::NoEvent {
        ReturnCode::Ok
    } else {
        rc
    }
}

fn arb_event() -> impl Strategy<Value = Event> {
    let hdr_only = (
        prop::sample::select(vec![EventSize::B16, EventSize::B32, EventSize::B64]),
        arb::<EqSwitchEvent>(),
    );
    prop_oneof![
        arb::<InitiatorShort>()
            .prop_filter("init", |e| e.event_type.is_initiator())
            .prop_map(|mut e| {
                e.return_code = ok_rc(e.return_code);
                Event::InitiatorShort(e)
            }),
        arb::<InitiatorLong>()
            .prop_filter("init", |e| e.event_type.is_initiator())
            .prop_map(|mut e| {
                e.return_code = ok_rc(e.return_code);
                Event::InitiatorLong(e)
            }),
        arb::<TargetShort>()
            .prop_filter("tgt", |e| e.event_type.is_target())
            .prop_map(|mut e| {
                e.return_code = ok_rc(e.return_code);
                Event::TargetShort(e)
            }),
        arb::<TargetLong>()
            .prop_filter("tgt", |e| e.event_type.is_target())
            .prop_map(|mut e| {
                e.return_code = ok_rc(e.return_code);
                Event::TargetLong(e)
            }),
        arb::<EnetEvent>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::Ethernet(e)
        }),
        arb::<CommandFailure>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::CommandFailure(e)
        }),
        arb::<TrigOpShort>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::TrigOpShort(e)
        }),
        arb::<TrigOpLong>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::TrigOpLong(e)
        }),
        arb::<EnetFgfc>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::EthernetFgfc(e)
        }),
        arb::<PctEvent>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::Pct(e)
        }),
        arb::<TimestampEvent>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::Timestamp(e)
        }),
        arb::<EqSwitchEvent>().prop_map(|mut e| {
            e.return_code = ok_rc(e.return_code);
            Event::EqSwitch(e)
        }),
        (hdr_only, any::<bool>()).prop_map(|((size, e), null)| {
            let h = EventHeader {
                size,
                event_type: if null {
                    EventType::NullEvent
                } else {
                    EventType::Error
                },
                return_code: ok_rc(e.return_code),
            };
            if null {
                Event::Null(h)
            } else {
                Event::Error(h)
            }
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn command_roundtrip(c in arb_command(), tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut b = c.encode().unwrap();
        prop_assert_eq!(b.len(), c.encoded_len());
        prop_assert_eq!(b[0], c.header().to_byte());
        prop_assert_eq!(Command::decode(&b).unwrap(), c);
        // Bytes after the command (the next command in the ring) are ignored.
        b.extend_from_slice(&tail);
        prop_assert_eq!(Command::decode(&b).unwrap(), c);
    }

    #[test]
    fn target_command_roundtrip(c in arb_target_command()) {
        let b = c.encode().unwrap();
        prop_assert_eq!(TargetCommand::decode(&b).unwrap(), c);
    }

    #[test]
    fn event_roundtrip(e in arb_event()) {
        let b = e.encode().unwrap();
        prop_assert_eq!(b.len(), e.encoded_len());
        let h = e.header();
        prop_assert_eq!(event_header(&b), Some((h.size, h.event_type, h.return_code)));
        prop_assert_eq!(Event::decode(&b).unwrap(), e);
        // Any prefix shorter than the event is rejected, never misread.
        prop_assert!(Event::decode(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(c) = Command::decode(&b) {
            // Whatever decodes re-encodes to a command that decodes the same.
            let re = c.encode().unwrap();
            prop_assert_eq!(Command::decode(&re).unwrap(), c);
            prop_assert!(re.len() <= b.len());
        }
        if let Ok(c) = TargetCommand::decode(&b) {
            prop_assert_eq!(TargetCommand::decode(&c.encode().unwrap()).unwrap(), c);
        }
        if let Ok(e) = Event::decode(&b) {
            prop_assert_eq!(Event::decode(&e.encode().unwrap()).unwrap(), e);
        }
        let _ = event_header(&b);
    }
}

#[test]
fn src_tables_are_well_formed() {
    fn check<T: Layout>() {
        let mut used = vec![false; T::SIZE * 8];
        for fd in T::FIELDS {
            assert!(
                (1..=64).contains(&fd.width) && fd.offset + fd.width <= T::SIZE * 8,
                "{}",
                T::NAME
            );
            for (b, u) in used.iter_mut().enumerate().skip(fd.offset).take(fd.width) {
                assert!(!*u, "{}.{} overlaps at {b}", T::NAME, fd.name);
                *u = true;
            }
        }
    }
    check::<CState>();
    check::<IdcAmo>();
    check::<IdcSmallAmo>();
    check::<FullDma>();
    check::<NomatchDma>();
    check::<DmaAmo>();
    check::<DmaEth>();
    check::<CtCmd>();
    check::<CqCmd>();
    check::<TargetCmd>();
    check::<SetStateCmd>();
    check::<InitiatorShort>();
    check::<InitiatorLong>();
    check::<TargetShort>();
    check::<TargetLong>();
    check::<CommandFailure>();
    check::<EnetEvent>();
    check::<PctEvent>();
    check::<EqStatus>();
    check::<CqStatus>();
}

#[test]
fn typed_enums_reject_unknown_values() {
    assert!(PtlList::try_from(4).is_err());
    assert!(PtlteState::try_from(5).is_err());
    assert!(ScReason::try_from(7).is_err());
    assert!(AmoOp::try_from(3).is_err());
    assert!(AmoType::try_from(13).is_err());
    assert!(CswapOp::try_from(6).is_err());
    assert!(EventSize::try_from(4).is_err());
    assert!(CmdSize::try_from(4).is_err());
    let err = DmaOp::try_from(14).unwrap_err();
    assert_eq!((err.kind, err.value), ("c_dma_op", 14));
}

/// Commands written the way `cxi_cq_emit_*` writes them (naturally aligned, 32 B NOOP
/// padding, starting at slot `C_CQ_FIRST_WR_PTR`) read back in order.
#[test]
fn ring_walk() {
    use firmware_spec::cassini::status::{C_CQ_FIRST_WR_PTR_32, C_CQ_HALF_SLOT, pad_slots32};
    let cmds = vec![
        Command::CState(CState {
            initiator: 7,
            ..Default::default()
        }),
        Command::NomatchDma(NomatchDma {
            opcode: DmaOp::NomatchPut,
            request_len: 8,
            ..Default::default()
        }),
        Command::Dma(FullDma {
            opcode: DmaOp::Get,
            user_ptr: 1,
            ..Default::default()
        }),
        Command::IdcSmallAmo(IdcSmallAmo {
            op1_word1: 5,
            ..Default::default()
        }),
        Command::IdcPut(IdcPut {
            payload: Payload::new(&[9; 100]).unwrap(),
            ..Default::default()
        }),
        Command::IdcSmallAmo(IdcSmallAmo {
            op1_word1: 6,
            ..Default::default()
        }),
        Command::DmaAmo(DmaAmo {
            opcode: DmaOp::FetchingAtomic,
            ..Default::default()
        }),
        Command::IdcMsg(IdcMsg {
            payload: Payload::new(&[3; 192]).unwrap(),
            ..Default::default()
        }),
        Command::Cq(CqCmd {
            opcode: CqOp::CqFence,
            lcid: 0,
        }),
    ];
    let mut ring = vec![0xAAu8; 64 * 64];
    let mut wp32 = C_CQ_FIRST_WR_PTR_32;
    for c in &cmds {
        for _ in 0..pad_slots32(wp32, c.cmd_size()) {
            let at = wp32 as usize * C_CQ_HALF_SLOT;
            ring[at..at + 8].fill(0); // "Command opcode and DFA must be cleared"
            wp32 += 1;
        }
        let at = wp32 as usize * C_CQ_HALF_SLOT;
        assert_eq!(at % c.encoded_len(), 0, "{c:?} not naturally aligned");
        assert_eq!(c.encode_into(&mut ring[at..]).unwrap(), c.encoded_len());
        wp32 += c.cmd_size().slots32() as u64;
    }
    let mut rp = C_CQ_FIRST_WR_PTR_32 as usize * C_CQ_HALF_SLOT;
    let mut read = vec![];
    let mut pads = 0;
    while rp < wp32 as usize * C_CQ_HALF_SLOT {
        let c = Command::decode(&ring[rp..]).unwrap();
        rp += c.encoded_len();
        match c {
            Command::IdcNoop(CmdSize::B32) => pads += 1,
            c => read.push(c),
        }
    }
    assert_eq!(read, cmds);
    // 3 before the 128 B Put, 3 before the DMA AMO, 4 before the 256 B message.
    assert_eq!(pads, 3 + 3 + 4);
}
