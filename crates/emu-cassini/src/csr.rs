//! The CSR file: every register of the generated map (`firmware_spec::cassini::csr`), stored
//! sparsely (only entries software or hardware has written), with reset values from the map
//! and the access classes applied on software writes:
//!
//! * `SRO` fields (and bits no field covers) ignore software writes;
//! * `SRW1` / `SRW1C` fields clear the bits written as 1 (write-1-to-clear);
//! * `SWS` / `SDWS` strobe fields act on the write (the block's write hook sees the value) but
//!   store nothing: they read back as their reset value;
//! * everything else stores what software wrote.
//!
//! Hardware-owned fields are changed by the blocks through [`CsrFile::hw_set`]; fields that
//! change on every command (read and write pointers, PtlTE state) are instead patched into
//! the read result by the device (see `device::Cassini::csr_read`), so the data path never
//! touches this file.

use std::collections::HashMap;

use firmware_spec::cassini::csr::{self, Csr, CsrHit, Field, Generation, SwAccess};

/// Per-register write masks (computed once per register, on its first write).
#[derive(Clone, Debug)]
struct Masks {
    /// Bits a software write stores.
    write: Box<[u8]>,
    /// Bits a software write of 1 clears.
    w1c: Box<[u8]>,
}

fn masks_of(c: &Csr) -> Masks {
    let n = c.size as usize;
    let mut write = vec![0u8; n];
    let mut w1c = vec![0u8; n];
    for f in c.fields.iter().filter(|f| f.is_register_field()) {
        match f.sw {
            SwAccess::Sro | SwAccess::Unspecified => {}
            SwAccess::Srw1 | SwAccess::Srw1c => f.set(&mut w1c, u64::MAX),
            SwAccess::Sws | SwAccess::Sdws => {}
            _ => f.set(&mut write, u64::MAX),
        }
    }
    Masks {
        write: write.into_boxed_slice(),
        w1c: w1c.into_boxed_slice(),
    }
}

/// The register file.
#[derive(Clone, Debug)]
pub(crate) struct CsrFile {
    generation: Generation,
    /// Entry images by CSR-region offset of the entry.
    store: HashMap<u64, Box<[u8]>>,
    masks: HashMap<u64, Masks>,
    /// Software accesses to offsets no register covers.
    pub(crate) unmapped_accesses: u64,
}

/// One piece of a CSR access: `len` bytes at byte `byte` of entry `entry` of `csr`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece {
    pub(crate) csr: &'static Csr,
    pub(crate) entry: u32,
    pub(crate) byte: usize,
    pub(crate) len: usize,
}

impl CsrFile {
    pub(crate) fn new(generation: Generation) -> Self {
        CsrFile {
            generation,
            store: HashMap::new(),
            masks: HashMap::new(),
            unmapped_accesses: 0,
        }
    }

    /// Decode an access at CSR-region offset `off` of `len` bytes into pieces, one per entry
    /// it touches; bytes no register covers are skipped (reported as `None`).
    pub(crate) fn decode(&self, off: u64, len: usize) -> impl Iterator<Item = Option<Piece>> + '_ {
        let mut cur = off;
        let end = off + len as u64;
        std::iter::from_fn(move || {
            if cur >= end {
                return None;
            }
            match csr::at_offset(self.generation, cur) {
                Some(CsrHit { csr, entry, byte }) => {
                    let byte = byte as usize;
                    let n = (csr.size as usize - byte).min((end - cur) as usize);
                    cur += n as u64;
                    Some(Some(Piece {
                        csr,
                        entry,
                        byte,
                        len: n,
                    }))
                }
                None => {
                    cur += 1;
                    Some(None)
                }
            }
        })
    }

    /// The current image of one entry (stored, or the reset image).
    pub(crate) fn entry(&self, c: &'static Csr, entry: u32) -> Vec<u8> {
        let off = c.offset + u64::from(entry) * u64::from(c.size);
        match self.store.get(&off) {
            Some(b) => b.to_vec(),
            None => c.reset_bytes(),
        }
    }

    /// Read a field of an entry.
    pub(crate) fn field(&self, c: &'static Csr, entry: u32, f: &Field) -> u64 {
        let off = c.offset + u64::from(entry) * u64::from(c.size);
        match self.store.get(&off) {
            Some(b) => f.get(b),
            None => f.reset,
        }
    }

    /// A qword of an entry (`qw` = index of the 8-byte word), for decoding.
    pub(crate) fn entry_qword(&self, c: &'static Csr, entry: u32, qw: usize) -> u64 {
        let off = c.offset + u64::from(entry) * u64::from(c.size);
        let mut b = [0u8; 8];
        match self.store.get(&off) {
            Some(s) => {
                if let Some(src) = s.get(qw * 8..qw * 8 + 8) {
                    b.copy_from_slice(src);
                }
            }
            None => {
                let r = c.reset_bytes();
                if let Some(src) = r.get(qw * 8..qw * 8 + 8) {
                    b.copy_from_slice(src);
                }
            }
        }
        u64::from_le_bytes(b)
    }

    fn slot(&mut self, c: &'static Csr, entry: u32) -> &mut Box<[u8]> {
        let off = c.offset + u64::from(entry) * u64::from(c.size);
        self.store
            .entry(off)
            .or_insert_with(|| c.reset_bytes().into_boxed_slice())
    }

    /// Copy the bytes of `piece` into `out` (`out.len() == piece.len`).
    #[cfg(test)]
    pub(crate) fn read_piece(&self, p: &Piece, out: &mut [u8]) {
        let off = p.csr.offset + u64::from(p.entry) * u64::from(p.csr.size);
        match self.store.get(&off) {
            Some(b) => out.copy_from_slice(&b[p.byte..p.byte + p.len]),
            None => {
                let r = p.csr.reset_bytes();
                out.copy_from_slice(&r[p.byte..p.byte + p.len]);
            }
        }
    }

    /// Apply a software write of `data` (`data.len() == piece.len`) with the access classes.
    pub(crate) fn write_piece(&mut self, p: &Piece, data: &[u8]) {
        let key = p.csr.offset;
        let masks = self.masks.entry(key).or_insert_with(|| masks_of(p.csr));
        let (wm, cm) = (
            masks.write[p.byte..p.byte + p.len].to_vec(),
            masks.w1c[p.byte..p.byte + p.len].to_vec(),
        );
        let slot = self.slot(p.csr, p.entry);
        for (i, &d) in data.iter().enumerate() {
            let b = &mut slot[p.byte + i];
            *b = (*b & !wm[i]) | (d & wm[i]);
            *b &= !(d & cm[i]);
        }
    }

    /// Hardware sets a field (any access class).
    pub(crate) fn hw_set(&mut self, c: &'static Csr, entry: u32, f: &Field, value: u64) {
        let slot = self.slot(c, entry);
        f.set(slot, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_spec::cassini::csr::fields;

    #[test]
    fn reset_values_and_sro_fields_ignore_writes() {
        let mut f = CsrFile::new(Generation::Cassini1);
        let c = csr::C_MB_STS_REV;
        let pieces: Vec<_> = f.decode(c.offset, 8).collect();
        assert_eq!(pieces.len(), 1);
        let p = pieces[0].unwrap();
        let mut out = [0u8; 8];
        f.read_piece(&p, &mut out);
        let v = u64::from_le_bytes(out);
        assert_eq!((v >> 16) & 0xffff, 0x0501);
        f.write_piece(&p, &[0xff; 8]);
        f.read_piece(&p, &mut out);
        assert_eq!(u64::from_le_bytes(out), v, "SRO fields ignore writes");
    }

    #[test]
    fn srw_fields_store_and_w1c_clears() {
        let mut f = CsrFile::new(Generation::Cassini1);
        let c = csr::C_CQ_CFG_CP_TABLE;
        let off = c.entry_offset(3).unwrap();
        let p = f.decode(off, 8).next().flatten().unwrap();
        f.write_piece(&p, &((1u64 << 36) | 0x1234).to_le_bytes());
        assert_eq!(f.field(c, 3, fields::c_cq_cfg_cp_table::VNI), 0x1234);
        assert_eq!(f.field(c, 3, fields::c_cq_cfg_cp_table::VALID), 1);
        // W1C: the MSI-X PBA is SRW1C; set a bit as hardware, clear it by writing 1.
        let pba = csr::C_PI_IPD_CFG_MSIX_PBA;
        let fld = fields::c_pi_ipd_cfg_msix_pba::PENDING;
        f.hw_set(pba, 0, fld, 0b1010);
        let p = f.decode(pba.offset, 8).next().flatten().unwrap();
        f.write_piece(&p, &0b0010u64.to_le_bytes());
        assert_eq!(f.field(pba, 0, fld), 0b1000);
    }

    #[test]
    fn unmapped_offsets_decode_to_none_and_accesses_split_per_entry() {
        let f = CsrFile::new(Generation::Cassini1);
        assert!(f.decode(0x7ff_fff0, 8).all(|p| p.is_none()));
        let c = csr::C_CQ_CFG_CP_TABLE;
        let off = c.entry_offset(0).unwrap() + 4;
        let v: Vec<_> = f.decode(off, 8).flatten().collect();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].entry, v[0].byte, v[0].len), (0, 4, 4));
        assert_eq!((v[1].entry, v[1].byte, v[1].len), (1, 0, 4));
    }
}
