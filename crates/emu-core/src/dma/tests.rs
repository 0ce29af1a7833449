use super::*;
use crate::memory::{GuestAddress, HostMemory, MemoryError};
use std::sync::atomic::Ordering;

fn mem() -> HostMemory {
    HostMemory::new(1 << 20).unwrap()
}

/// A scatter list copies into a gather list of other boundaries byte for byte; lists of
/// different lengths are refused before anything is copied.
#[test]
fn copy_segments_to_follows_both_lists() {
    let (a, b) = (mem(), mem());
    let src = DmaPort::passthrough(a.clone());
    let dst = DmaPort::passthrough(b.clone());
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    a.write(GuestAddress(0x1000), &data[..100]).unwrap();
    a.write(GuestAddress(0x5000), &data[100..]).unwrap();
    let from = [
        Segment {
            addr: 0x1000,
            len: 100,
        },
        Segment {
            addr: 0x5000,
            len: 200,
        },
    ];
    let to = [
        Segment {
            addr: 0x9000,
            len: 50,
        },
        Segment {
            addr: 0xA000,
            len: 250,
        },
    ];
    let short = [Segment {
        addr: 0x9000,
        len: 299,
    }];
    assert!(matches!(
        src.copy_segments_to(&from, &dst, &short),
        Err(DmaError::LengthMismatch { .. })
    ));
    let mut got = vec![0u8; 50];
    b.read(GuestAddress(0x9000), &mut got).unwrap();
    assert_eq!(got, vec![0u8; 50], "nothing copied by a refused copy");
    src.copy_segments_to(&from, &dst, &to).unwrap();
    b.read(GuestAddress(0x9000), &mut got).unwrap();
    let mut rest = vec![0u8; 250];
    b.read(GuestAddress(0xA000), &mut rest).unwrap();
    got.extend_from_slice(&rest);
    assert_eq!(got, data);
}

#[test]
fn perm_basics() {
    assert!(Perm::RW.contains(Perm::READ));
    assert!(!Perm::READ.contains(Perm::WRITE));
    assert_eq!(Perm::READ | Perm::WRITE, Perm::RW);
    assert_eq!(Perm::new(true, false), Perm::READ);
    assert_eq!(Perm::WRITE.to_string(), "-W");
    assert!(Perm::NONE.is_empty());
}

#[test]
fn map_rejects_overlap_zero_and_overflow() {
    let mut t = TranslationTable::new();
    t.map(0x1000, 0x10_000, 0x1000, Perm::RW).unwrap();
    assert_eq!(
        t.map(0x1fff, 0, 1, Perm::RW),
        Err(MapError::Overlap {
            iova: 0x1fff,
            len: 1
        })
    );
    assert!(t.map(0x800, 0, 0x801, Perm::RW).is_err());
    assert!(t.map(0x0, 0, 0x10_000, Perm::RW).is_err());
    t.map(0x800, 0, 0x800, Perm::RW).unwrap(); // adjacent below is fine
    t.map(0x2000, 0, 0x800, Perm::RW).unwrap(); // adjacent above is fine
    assert_eq!(t.map(0x9000, 0, 0, Perm::RW), Err(MapError::ZeroLength));
    assert!(matches!(
        t.map(u64::MAX, 0, 2, Perm::RW),
        Err(MapError::Overflow { .. })
    ));
    assert!(matches!(
        t.map(0x9000, u64::MAX, 2, Perm::RW),
        Err(MapError::Overflow { .. })
    ));
    assert_eq!(t.len(), 3);
}

#[test]
fn unmap_splits_and_validates() {
    let mut t = TranslationTable::new();
    t.map(0x1000, 0x8000, 0x3000, Perm::READ).unwrap();
    assert!(t.unmap(0x3000, 0x2000).is_err());
    assert_eq!(t.len(), 1);
    t.unmap(0x2000, 0x1000).unwrap();
    assert_eq!(
        t.mappings().collect::<Vec<_>>(),
        vec![
            Mapping {
                iova: 0x1000,
                len: 0x1000,
                target: 0x8000,
                perm: Perm::READ
            },
            Mapping {
                iova: 0x3000,
                len: 0x1000,
                target: 0xa000,
                perm: Perm::READ
            },
        ]
    );
    assert!(t.unmap(0x1000, 0x3000).is_err());
    assert!(t.unmap(0x1000, 0).is_err());
    t.unmap(0x1000, 0x1000).unwrap();
    t.unmap(0x3000, 0x1000).unwrap();
    assert!(t.is_empty());
}

#[test]
fn translate_merges_contiguous_and_reports_first_fault() {
    let mut t = TranslationTable::new();
    t.map(0x0, 0x5000, 0x1000, Perm::RW).unwrap();
    t.map(0x1000, 0x6000, 0x1000, Perm::RW).unwrap(); // contiguous with the first
    t.map(0x2000, 0x9000, 0x1000, Perm::READ).unwrap();
    let segs: Vec<_> = t.translate(0x800, 0x2000, Perm::READ).unwrap().collect();
    assert_eq!(
        segs,
        vec![
            Segment {
                addr: 0x5800,
                len: 0x1800
            },
            Segment {
                addr: 0x9000,
                len: 0x800
            }
        ]
    );
    assert_eq!(
        t.check(0x800, 0x2000, Perm::WRITE).unwrap_err(),
        DmaError::PermissionDenied {
            iova: 0x2000,
            needed: Perm::WRITE
        }
    );
    assert_eq!(
        t.check(0x2800, 0x1000, Perm::READ).unwrap_err(),
        DmaError::NoTranslation { iova: 0x3000 }
    );
    assert_eq!(t.translate(0x10, 0, Perm::RW).unwrap().count(), 0);
    assert_eq!(
        t.check(u64::MAX, 2, Perm::READ).unwrap_err(),
        DmaError::OutOfBounds {
            iova: u64::MAX,
            len: 2
        }
    );
}

#[test]
fn translate_within_fast_path() {
    let mut t = TranslationTable::new();
    t.map(0x1000, 0x8000, 0x1000, Perm::READ).unwrap();
    t.map(0x2000, 0x4000, 0x1000, Perm::RW).unwrap();
    assert_eq!(
        t.translate_within(0x1100, 0x100, Perm::READ),
        Ok(Some(Segment {
            addr: 0x8100,
            len: 0x100
        }))
    );
    // Crosses into the next mapping: caller must use translate().
    assert_eq!(t.translate_within(0x1f00, 0x200, Perm::READ), Ok(None));
    assert_eq!(
        t.translate_within(0x1f00, 0x8, Perm::WRITE),
        Err(DmaError::PermissionDenied {
            iova: 0x1f00,
            needed: Perm::WRITE
        })
    );
    assert_eq!(
        t.translate_within(0x3000, 1, Perm::READ),
        Err(DmaError::NoTranslation { iova: 0x3000 })
    );
    assert_eq!(t.translate_within(0x1000, 0, Perm::READ), Ok(None));
}

#[test]
fn passthrough_port_bounds() {
    let m = mem();
    let p = DmaPort::passthrough(m.clone());
    p.write(0x100, b"abc").unwrap();
    assert_eq!(
        m.read_u32(GuestAddress(0x100)).unwrap() & 0xff_ffff,
        0x63_6261
    );
    let size = m.size();
    assert_eq!(
        p.write(size - 1, b"ab"),
        Err(DmaError::OutOfBounds {
            iova: size - 1,
            len: 2
        })
    );
    assert_eq!(m.read_u32(GuestAddress(size - 4)).unwrap(), 0);
    assert!(matches!(
        p.iommu().map(0, GuestAddress(0), 1, Perm::RW),
        Err(MapError::Passthrough)
    ));
}

#[test]
fn passthrough_fast_path_matches_the_table_rules() {
    let m = mem();
    let p = DmaPort::passthrough(m.clone());
    let size = m.size();
    // Zero-length accesses up to the end are fine, past it they are not.
    p.read(size, &mut []).unwrap();
    p.write(size, &[]).unwrap();
    p.check(size, 0, Perm::RW).unwrap();
    assert!(p.write(size + 1, &[]).is_err());
    assert_eq!(
        p.read(u64::MAX, &mut [0u8; 2]),
        Err(DmaError::OutOfBounds {
            iova: u64::MAX,
            len: 2
        })
    );
    assert_eq!(
        p.fill(size - 4, 8, 1),
        Err(DmaError::OutOfBounds {
            iova: size - 4,
            len: 8
        })
    );
    assert_eq!(
        p.store_u64_release(size, 1),
        Err(DmaError::OutOfBounds { iova: size, len: 8 })
    );
    assert_eq!(
        p.load_u64_acquire(0x1004),
        Err(DmaError::Misaligned {
            iova: 0x1004,
            align: 8
        })
    );
    // Every small width at odd addresses, and a large copy, round trip.
    for n in 1..=17usize {
        let at = 0x2001 + 64 * n as u64;
        let data: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        p.write(at, &data).unwrap();
        let mut back = vec![0u8; n];
        p.read(at, &mut back).unwrap();
        assert_eq!(back, data);
        let mut direct = vec![0u8; n];
        m.read(GuestAddress(at), &mut direct).unwrap();
        assert_eq!(direct, data);
    }
    let big: Vec<u8> = (0..9000u32).map(|i| i as u8).collect();
    p.write(size - 9000, &big).unwrap();
    let mut back = vec![0u8; 9000];
    p.read(size - 9000, &mut back).unwrap();
    assert_eq!(back, big);
    p.store_u64_release(size - 8, 0x0102_0304_0506_0708)
        .unwrap();
    assert_eq!(p.read_u64(size - 8).unwrap(), 0x0102_0304_0506_0708);
    assert_eq!(
        p.with_atomic_u64(size - 8, Perm::RW, |a| a.fetch_add(1, Ordering::AcqRel))
            .unwrap(),
        0x0102_0304_0506_0708
    );
    assert_eq!(p.load_u64_acquire(size - 8).unwrap(), 0x0102_0304_0506_0709);
}

#[test]
fn atomic_access_through_port() {
    let m = mem();
    let iommu = Iommu::translating();
    iommu
        .map(0x1_0000, GuestAddress(0x2000), 16, Perm::RW)
        .unwrap();
    iommu
        .map(0x1_0010, GuestAddress(0x3004), 16, Perm::RW)
        .unwrap();
    let p = DmaPort::new(m.clone(), iommu);
    p.store_u64_release(0x1_0008, 0xfeed).unwrap();
    assert_eq!(m.read_u64(GuestAddress(0x2008)).unwrap(), 0xfeed);
    assert_eq!(p.load_u64_acquire(0x1_0008).unwrap(), 0xfeed);
    assert_eq!(
        p.load_u64_acquire(0x1_0004),
        Err(DmaError::Misaligned {
            iova: 0x1_0004,
            align: 8
        })
    );
    // Aligned IOVA but misaligned host address.
    assert!(matches!(
        p.load_u64_acquire(0x1_0010),
        Err(DmaError::Memory(MemoryError::Misaligned { .. }))
    ));
}
