//! Generates the Cassini CSR table from the vendored `data/cassini/csr_defs.json`
//! (provenance and licence: `data/cassini/LICENSE-cassini-csr.md`).
//!
//! Output: `$OUT_DIR/cassini_csr.rs`, included by `src/cassini/csr.rs`. It holds static arrays
//! only (no large `match`), so it compiles quickly:
//! - one `static F_nnnn: [Field; k]` per CSR (fields sorted by bit offset),
//! - `static CSRS: [Csr; N]`, sorted by (offset, name),
//! - `static BY_NAME: [u16; N]`, indices into `CSRS` sorted by name (for binary search),
//! - `static REGS_C1` / `REGS_C2`: per-generation, offset-sorted, non-overlapping register
//!   indices (the decode table behind `CsrMap::at_offset`),
//! - one `pub const <NAME>: &Csr` per CSR and one `pub mod fields::<name>` per CSR with one
//!   `pub const <FIELD>: &Field` per field.
//!
//! The JSON format (documented in the upstream repository and `docs/cassini-csr.md`):
//! `{ "<csr>": { "__offset": n, "__size": n, "__entries": n, ["__struct_size": n,]
//!   "<field>": [bit, width, "<SW> <HW>", reset] | [bit, width, "<description>"] | [bit, width] } }`.
//! Fields with three or two elements carry no access class: they describe a *view* (counter
//! names over a block's event-counter array, or an alternative layout of a table entry).
//!
//! Any inconsistency in the data (bad types, a field outside its entry, a reset value wider
//! than its field, overlapping registers) fails the build with a message naming the CSR.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

const JSON: &str = "data/cassini/csr_defs.json";

/// One parsed field.
struct FieldDef {
    name: String,
    bit: u64,
    width: u64,
    sw: &'static str,
    hw: &'static str,
    reset: u64,
}

/// One parsed CSR.
struct CsrDef {
    name: String,
    offset: u64,
    size: u64,
    struct_size: u64,
    entries: u64,
    fields: Vec<FieldDef>,
}

impl CsrDef {
    fn end(&self) -> u64 {
        self.offset + self.size * self.entries
    }
    /// A register has at least one field with an access class; a view has none.
    fn is_register(&self) -> bool {
        self.fields.iter().any(|f| f.sw != "Unspecified")
    }
    /// `None` for CSRs present on every revision, else 1 or 2.
    fn generation(&self) -> Option<u8> {
        if self.name.starts_with("c1_") {
            Some(1)
        } else if self.name.starts_with("c2_") || self.name.starts_with("ss2_") {
            Some(2)
        } else {
            None
        }
    }
    fn same_layout(&self, o: &CsrDef) -> bool {
        self.offset == o.offset
            && self.size == o.size
            && self.entries == o.entries
            && self.fields.len() == o.fields.len()
            && self.fields.iter().zip(&o.fields).all(|(a, b)| {
                a.name == b.name
                    && a.bit == b.bit
                    && a.width == b.width
                    && a.sw == b.sw
                    && a.hw == b.hw
                    && a.reset == b.reset
            })
    }
}

fn sw_variant(tok: &str) -> Option<&'static str> {
    Some(match tok {
        "SRW" => "Srw",
        "SRO" => "Sro",
        "SWO" => "Swo",
        "SRW1" => "Srw1",
        "SRW1C" => "Srw1c",
        "SWS" => "Sws",
        "SRWS" => "Srws",
        "SRDW" => "Srdw",
        "SDWS" => "Sdws",
        _ => return None,
    })
}

fn hw_variant(tok: &str) -> Option<&'static str> {
    Some(match tok {
        "HRO" => "Hro",
        "HRW" => "Hrw",
        "HWO" => "Hwo",
        "HDWO" => "Hdwo",
        "HNA" => "Hna",
        _ => return None,
    })
}

fn num(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{JSON}: {what}: expected an unsigned integer, got {v}"))
}

fn parse_field(csr: &str, name: &str, v: &Value) -> FieldDef {
    let arr = v
        .as_array()
        .unwrap_or_else(|| panic!("{JSON}: {csr}.{name}: expected an array"));
    assert!(
        (2..=4).contains(&arr.len()),
        "{JSON}: {csr}.{name}: expected 2 to 4 elements"
    );
    let bit = num(&arr[0], &format!("{csr}.{name} bit"));
    let width = num(&arr[1], &format!("{csr}.{name} width"));
    assert!(width >= 1, "{JSON}: {csr}.{name}: zero width");
    let (mut sw, mut hw, mut reset) = ("Unspecified", "Unspecified", 0);
    if arr.len() == 4 {
        let acc = arr[2]
            .as_str()
            .unwrap_or_else(|| panic!("{JSON}: {csr}.{name}: access is not a string"))
            .to_ascii_uppercase();
        let mut toks = acc.split_whitespace();
        let s = toks.next().unwrap_or("");
        sw = sw_variant(s)
            .unwrap_or_else(|| panic!("{JSON}: {csr}.{name}: unknown SW access {s:?}"));
        if let Some(h) = toks.next() {
            hw = hw_variant(h)
                .unwrap_or_else(|| panic!("{JSON}: {csr}.{name}: unknown HW access {h:?}"));
        }
        assert!(
            toks.next().is_none(),
            "{JSON}: {csr}.{name}: bad access {acc:?}"
        );
        // Every reset value in the file fits in a u64 (fields with an access class are at most
        // 64 bits wide); `as_u64` rejects anything larger, which would fail the build here.
        reset = num(&arr[3], &format!("{csr}.{name} reset"));
        assert!(
            width <= 64,
            "{JSON}: {csr}.{name}: register field wider than 64 bits"
        );
        assert!(
            width == 64 || reset >> width == 0,
            "{JSON}: {csr}.{name}: reset {reset:#x} wider than {width} bits"
        );
    }
    FieldDef {
        name: name.to_owned(),
        bit,
        width,
        sw,
        hw,
        reset,
    }
}

fn parse(text: &str) -> Vec<CsrDef> {
    let root: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{JSON}: {e}"));
    let obj = root
        .as_object()
        .unwrap_or_else(|| panic!("{JSON}: top level is not an object"));
    let mut out = Vec::with_capacity(obj.len());
    for (name, body) in obj {
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && name.as_bytes()[0].is_ascii_lowercase(),
            "{JSON}: CSR name {name:?} is not a lower-case identifier"
        );
        let body = body
            .as_object()
            .unwrap_or_else(|| panic!("{JSON}: {name}: not an object"));
        let get = |k: &str| num(body.get(k).unwrap_or(&Value::Null), &format!("{name}.{k}"));
        let size = get("__size");
        let mut csr = CsrDef {
            name: name.clone(),
            offset: get("__offset"),
            size,
            struct_size: body.get("__struct_size").map_or(size, |v| num(v, name)),
            entries: get("__entries"),
            fields: Vec::new(),
        };
        assert!(csr.size > 0 && csr.entries > 0, "{JSON}: {name}: empty CSR");
        assert!(
            csr.struct_size <= csr.size,
            "{JSON}: {name}: struct larger than entry"
        );
        assert!(
            csr.offset.is_multiple_of(8),
            "{JSON}: {name}: offset not 8-byte aligned"
        );
        for (fname, fv) in body {
            if fname.starts_with("__") {
                continue;
            }
            assert!(
                fname
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                    && !fname.as_bytes()[0].is_ascii_digit(),
                "{JSON}: {name}.{fname}: not a lower-case identifier"
            );
            let f = parse_field(name, fname, fv);
            assert!(
                f.bit + f.width <= csr.size * 8,
                "{JSON}: {name}.{fname}: field outside its {}-byte entry",
                csr.size
            );
            csr.fields.push(f);
        }
        csr.fields.sort_by(|a, b| {
            (a.bit, std::cmp::Reverse(a.width), &a.name).cmp(&(
                b.bit,
                std::cmp::Reverse(b.width),
                &b.name,
            ))
        });
        out.push(csr);
    }
    out.sort_by(|a, b| (a.offset, &a.name).cmp(&(b.offset, &b.name)));
    out
}

/// Registers (not views) decoded for generation `g`, sorted by offset, with revision-specific
/// duplicates of a common register (same layout at the same offset) dropped in favour of the
/// common one. Panics if two remaining registers overlap.
fn decode_table(csrs: &[CsrDef], g: u8) -> Vec<usize> {
    let mut regs: Vec<usize> = (0..csrs.len())
        .filter(|&i| csrs[i].is_register() && csrs[i].generation().is_none_or(|x| x == g))
        .collect();
    let common: Vec<usize> = regs
        .iter()
        .copied()
        .filter(|&j| csrs[j].generation().is_none())
        .collect();
    regs.retain(|&i| {
        let c = &csrs[i];
        !(c.generation().is_some() && common.iter().any(|&j| csrs[j].same_layout(c)))
    });
    regs.sort_by_key(|&i| (csrs[i].offset, i));
    for w in regs.windows(2) {
        let (a, b) = (&csrs[w[0]], &csrs[w[1]]);
        assert!(
            a.end() <= b.offset,
            "{JSON}: registers {} and {} overlap on Cassini {g}",
            a.name,
            b.name
        );
    }
    regs
}

fn main() {
    println!("cargo::rerun-if-changed={JSON}");
    println!("cargo::rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(JSON).unwrap_or_else(|e| panic!("{JSON}: {e}"));
    let csrs = parse(&text);
    assert!(csrs.len() < u16::MAX as usize);

    let mut o = String::with_capacity(4 << 20);
    o.push_str(
        "// @generated by crates/firmware-spec/build.rs from data/cassini/csr_defs.json.\n\n",
    );

    for (i, c) in csrs.iter().enumerate() {
        let _ = writeln!(o, "static F_{i:04}: [Field; {}] = [", c.fields.len());
        for f in &c.fields {
            let _ = writeln!(
                o,
                "    Field {{ name: {:?}, bit: {}, width: {}, sw: SwAccess::{}, hw: HwAccess::{}, reset: {:#x} }},",
                f.name, f.bit, f.width, f.sw, f.hw, f.reset
            );
        }
        o.push_str("];\n");
    }

    let _ = writeln!(
        o,
        "\n/// Every CSR of the map, sorted by offset (then name)."
    );
    let _ = writeln!(o, "pub static CSRS: [Csr; {}] = [", csrs.len());
    for (i, c) in csrs.iter().enumerate() {
        let _ = writeln!(
            o,
            "    Csr {{ name: {:?}, offset: {:#x}, size: {}, struct_size: {}, entries: {}, fields: &F_{i:04} }},",
            c.name, c.offset, c.size, c.struct_size, c.entries
        );
    }
    o.push_str("];\n");

    let mut by_name: Vec<usize> = (0..csrs.len()).collect();
    by_name.sort_by(|&a, &b| csrs[a].name.cmp(&csrs[b].name));
    for w in by_name.windows(2) {
        assert!(csrs[w[0]].name != csrs[w[1]].name, "duplicate CSR name");
    }
    let list = |v: &[usize]| {
        v.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let _ = writeln!(
        o,
        "\nstatic BY_NAME: [u16; {}] = [{}];",
        by_name.len(),
        list(&by_name)
    );
    for g in [1u8, 2] {
        let t = decode_table(&csrs, g);
        let _ = writeln!(
            o,
            "\nstatic REGS_C{g}: [u16; {}] = [{}];",
            t.len(),
            list(&t)
        );
    }

    o.push('\n');
    for (i, c) in csrs.iter().enumerate() {
        let _ = writeln!(
            o,
            "/// `{}`: CSR offset {:#x}, {} × {} B.\npub const {}: &Csr = &CSRS[{i}];",
            c.name,
            c.offset,
            c.entries,
            c.size,
            c.name.to_ascii_uppercase()
        );
    }

    o.push_str(
        "\n/// One module per CSR (same name, lower case) with one constant per field.\npub mod fields {\n",
    );
    // Group field constants by CSR name for stable output.
    let by: BTreeMap<&str, usize> = csrs
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    for (name, i) in by {
        let c = &csrs[i];
        let _ = writeln!(o, "    /// Fields of `{name}`.\n    pub mod {name} {{");
        let _ = writeln!(o, "        use crate::cassini::csr::Field;");
        for (k, f) in c.fields.iter().enumerate() {
            let _ = writeln!(
                o,
                "        /// `{}` bits {}..{}.\n        pub const {}: &Field = &super::super::F_{i:04}[{k}];",
                f.name,
                f.bit,
                f.bit + f.width,
                f.name.to_ascii_uppercase()
            );
        }
        o.push_str("    }\n");
    }
    o.push_str("}\n");

    let out =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("cassini_csr.rs");
    std::fs::write(&out, o).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
