use super::*;
use std::sync::atomic::Ordering;

fn mem() -> HostMemory {
    HostMemory::new(1 << 20).unwrap()
}

fn contents(m: &HostMemory) -> Vec<u8> {
    let mut b = vec![0u8; m.size() as usize];
    m.read(GuestAddress(0), &mut b).unwrap();
    b
}

#[test]
fn restore_undoes_every_kind_of_store_and_the_allocations() {
    let m = HostMemory::new(64 * PAGE_SIZE + 0x1000).unwrap();
    m.write(GuestAddress(0x3000), &[7u8; 5000]).unwrap();
    let kept = m.alloc(2 * PAGE_SIZE, PAGE_SIZE).unwrap();
    let before = contents(&m);
    let free = m.free_bytes();
    let snap = m.snapshot();
    // Plain, atomic, fill, copy and pointer stores, across chunk boundaries.
    m.write(GuestAddress(0x2FFE), &[1, 2, 3, 4]).unwrap();
    m.store_u64_release(GuestAddress(0x8000), u64::MAX).unwrap();
    m.with_atomic_u32(GuestAddress(0x9004), |a| a.fetch_add(9, Ordering::SeqCst))
        .unwrap();
    m.fill(GuestAddress(0x10_000), 3 * PAGE_SIZE, 0xEE).unwrap();
    m.fill(GuestAddress(0x3000), 100, 0).unwrap();
    m.copy_within(GuestAddress(0x3000), GuestAddress(0x20_000), 5000)
        .unwrap();
    let p = m.host_ptr(GuestAddress(0x30_000), 16).unwrap();
    m.alloc(4 * PAGE_SIZE, PAGE_SIZE).unwrap();
    m.free(kept).unwrap();
    unsafe_store(p);
    assert_ne!(contents(&m), before);
    let copied = m.restore(&snap).unwrap();
    assert_eq!(contents(&m), before);
    assert_eq!(m.free_bytes(), free);
    assert!(
        (1..=16).contains(&copied),
        "only written chunks are copied back, {copied} were"
    );
    // Nothing written since: nothing but the exposed range to copy; the pointer's
    // range is copied back every time.
    unsafe_store(p);
    assert_eq!(m.restore(&snap).unwrap(), 1);
    assert_eq!(contents(&m), before);
    // The last chunk is shorter than a chunk.
    m.write(GuestAddress(m.size() - 8), &[9; 8]).unwrap();
    m.restore(&snap).unwrap();
    assert_eq!(contents(&m), before);
}

#[allow(unsafe_code)]
fn unsafe_store(p: *mut u8) {
    // SAFETY: callers pass a pointer from `host_ptr` of at least one byte whose RAM is
    // alive.
    unsafe { p.write_volatile(0xAA) };
}

#[test]
fn restore_refuses_stale_or_foreign_snapshots() {
    let m = mem();
    let other = mem();
    let old = m.snapshot();
    let new = m.snapshot();
    assert!(matches!(m.restore(&old), Err(MemoryError::Snapshot(_))));
    assert!(matches!(other.restore(&new), Err(MemoryError::Snapshot(_))));
    m.write_u32(GuestAddress(0x1000), 5).unwrap();
    assert_eq!(m.restore(&new).unwrap(), 1);
    assert_eq!(m.read_u32(GuestAddress(0x1000)).unwrap(), 0);
    // A clone of the handle is the same RAM.
    assert_eq!(m.clone().restore(&new).unwrap(), 0);
}

#[test]
fn read_write_round_trip_and_bounds() {
    let m = mem();
    m.write(GuestAddress(0x1000), b"hello").unwrap();
    let mut b = [0u8; 5];
    m.read(GuestAddress(0x1000), &mut b).unwrap();
    assert_eq!(&b, b"hello");
    m.write_u64(GuestAddress(0x2003), 0x0102_0304_0506_0708)
        .unwrap();
    assert_eq!(
        m.read_u64(GuestAddress(0x2003)).unwrap(),
        0x0102_0304_0506_0708
    );
    assert_eq!(m.read_u32(GuestAddress(0x2003)).unwrap(), 0x0506_0708);
    let end = m.size();
    assert_eq!(
        m.write(GuestAddress(end - 4), &[0u8; 8]),
        Err(MemoryError::OutOfRange {
            addr: end - 4,
            len: 8
        })
    );
    assert!(m.read(GuestAddress(u64::MAX), &mut [0u8; 2]).is_err());
    // Zero-length accesses at the end are fine, past it are not.
    assert!(m.read(GuestAddress(end), &mut []).is_ok());
    assert!(m.write(GuestAddress(end + 1), &[]).is_err());
}

#[test]
fn small_and_unaligned_accesses_up_to_the_end() {
    let m = mem();
    let end = m.size();
    for n in 0..=20usize {
        for at in [0x1000 + n as u64, end - n as u64] {
            let data: Vec<u8> = (0..n).map(|i| (i as u8) ^ 0xc3).collect();
            m.write(GuestAddress(at), &data).unwrap();
            let mut back = vec![0u8; n];
            m.read(GuestAddress(at), &mut back).unwrap();
            assert_eq!(back, data, "len {n} at {at:#x}");
        }
        if n > 0 {
            // One byte past the end is refused and nothing is written.
            let at = end - n as u64 + 1;
            let before = m.read_u64(GuestAddress(end - 8)).unwrap();
            assert_eq!(
                m.write(GuestAddress(at), &vec![0xEE; n]),
                Err(MemoryError::OutOfRange {
                    addr: at,
                    len: n as u64
                })
            );
            assert_eq!(m.read_u64(GuestAddress(end - 8)).unwrap(), before);
            assert!(m.read(GuestAddress(at), &mut vec![0; n]).is_err());
        }
    }
    assert!(m.load_u32_acquire(GuestAddress(end - 4)).is_ok());
    assert!(m.load_u32_acquire(GuestAddress(end)).is_err());
    assert!(m.store_u64_release(GuestAddress(end - 8), 1).is_ok());
}

#[test]
fn atomics_need_alignment() {
    let m = mem();
    m.store_u64_release(GuestAddress(0x3000), 7).unwrap();
    assert_eq!(m.load_u64_acquire(GuestAddress(0x3000)).unwrap(), 7);
    assert_eq!(
        m.load_u64_acquire(GuestAddress(0x3004)),
        Err(MemoryError::Misaligned {
            addr: 0x3004,
            align: 8
        })
    );
    m.store_u32_release(GuestAddress(0x300c), 9).unwrap();
    assert_eq!(m.load_u32_acquire(GuestAddress(0x300c)).unwrap(), 9);
    let old = m
        .with_atomic_u64(GuestAddress(0x3000), |a| a.fetch_add(5, Ordering::AcqRel))
        .unwrap();
    assert_eq!(old, 7);
    assert_eq!(m.read_u32(GuestAddress(0x3000)).unwrap(), 12);
    assert!(m.load_u64_acquire(GuestAddress(m.size())).is_err());
}

/// The hand-over the rings rely on: one thread fills a buffer with plain copies (both
/// the volatile small path and the `memcpy` path) and publishes it with a release store;
/// another waits for it with acquire loads and reads the bytes. Under Miri this checks
/// the raw accesses for data races and undefined behaviour (docs/testing.md).
#[test]
fn release_acquire_hands_a_buffer_between_threads() {
    let m = HostMemory::new(64 * 1024).unwrap();
    let flag = GuestAddress(0x1000);
    let small = GuestAddress(0x2000);
    let big = GuestAddress(0x3000);
    let writer = {
        let m = m.clone();
        std::thread::spawn(move || {
            m.write(small, &[1, 2, 3, 4, 5]).unwrap();
            m.write(big, &[0x5A; 100]).unwrap();
            m.store_u64_release(flag, 7).unwrap();
            m.store_u32_release(GuestAddress(0x1008), 9).unwrap();
        })
    };
    while m.load_u32_acquire(GuestAddress(0x1008)).unwrap() != 9 {
        std::thread::yield_now();
    }
    assert_eq!(m.load_u64_acquire(flag).unwrap(), 7);
    let mut s = [0u8; 5];
    m.read(small, &mut s).unwrap();
    assert_eq!(s, [1, 2, 3, 4, 5]);
    let mut b = [0u8; 100];
    m.read(big, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0x5A));
    writer.join().unwrap();
}

#[test]
fn zero_fill_clears_written_bytes_among_zero_chunks() {
    let m = mem();
    // One byte set in the middle of the third chunk of a 5-chunk range, one in the last.
    m.write(GuestAddress(0x3000 + 2 * 4096 + 100), &[7])
        .unwrap();
    m.write(GuestAddress(0x3000 + 5 * 4096 - 1), &[9]).unwrap();
    m.fill(GuestAddress(0x3000), 5 * 4096, 0).unwrap();
    let mut b = vec![1u8; 5 * 4096];
    m.read(GuestAddress(0x3000), &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0));
}

#[test]
fn fill_and_copy_within() {
    let m = mem();
    m.fill(GuestAddress(0x1000), 10_000, 0xab).unwrap();
    let mut b = vec![0u8; 10_002];
    m.read(GuestAddress(0xfff), &mut b).unwrap();
    assert_eq!(b[0], 0);
    assert!(b[1..10_001].iter().all(|&x| x == 0xab));
    assert_eq!(b[10_001], 0);
    // Overlapping move forward.
    m.write(
        GuestAddress(0x8000),
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
    )
    .unwrap();
    m.copy_within(GuestAddress(0x8000), GuestAddress(0x8002), 10)
        .unwrap();
    let mut c = [0u8; 12];
    m.read(GuestAddress(0x8000), &mut c).unwrap();
    assert_eq!(c, [1, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert!(
        m.copy_within(GuestAddress(0), GuestAddress(m.size() - 4), 8)
            .is_err()
    );
    assert!(m.fill(GuestAddress(m.size() - 1), 2, 0).is_err());
    // Zero-length operations at the very end are valid no-ops.
    m.fill(GuestAddress(m.size()), 0, 1).unwrap();
    m.copy_within(GuestAddress(m.size()), GuestAddress(0), 0)
        .unwrap();
    assert!(m.fill(GuestAddress(m.size() + 1), 0, 1).is_err());
}

#[test]
fn bad_sizes_are_rejected() {
    assert!(HostMemory::new(0).is_err());
    assert!(HostMemory::new(4097).is_err());
    assert!(HostMemory::new(PAGE_SIZE).is_err());
}

#[test]
fn large_memory_is_lazy() {
    let m = HostMemory::new(1 << 30).unwrap();
    m.write_u64(GuestAddress((1 << 30) - 8), 42).unwrap();
    assert_eq!(m.read_u64(GuestAddress((1 << 30) - 8)).unwrap(), 42);
    assert_eq!(m.clone().size(), 1 << 30);
    assert!(m.same_as(&m.clone()));
}

#[test]
fn allocator_first_fit_alignment_and_coalescing() {
    let mut a = PageAllocator::new(0x1000, 0x10_000).unwrap();
    let r1 = a.alloc(1, 1).unwrap();
    assert_eq!(r1, GuestRange::new(GuestAddress(0x1000), 0x1000));
    let r2 = a.alloc(0x2000, 0x4000).unwrap();
    assert_eq!(r2.start, GuestAddress(0x4000));
    assert_eq!(r2.len, 0x2000);
    // The gap [0x2000, 0x4000) is used by first fit.
    let r3 = a.alloc(0x2000, 0x1000).unwrap();
    assert_eq!(r3.start, GuestAddress(0x2000));
    assert_eq!(a.alloc(0, 1), Err(AllocError::ZeroLength));
    assert_eq!(
        a.alloc(0x1000, 3),
        Err(AllocError::BadAlignment { align: 3 })
    );
    assert!(matches!(
        a.alloc(0x100_000, 1),
        Err(AllocError::Exhausted { .. })
    ));
    // Double free and wrong length are rejected.
    assert!(a.free(GuestRange::new(r1.start, 0x2000)).is_err());
    a.free(r1).unwrap();
    assert!(a.free(r1).is_err());
    a.free(r2).unwrap();
    a.free(r3).unwrap();
    assert_eq!(a.free_ranges(), 1);
    assert_eq!(a.free_bytes(), 0x10_000);
    assert_eq!(a.allocations(), 0);
}

#[test]
fn host_alloc_skips_page_zero() {
    let m = mem();
    let r = m.alloc(100, 8).unwrap();
    assert_eq!(r.start, GuestAddress(PAGE_SIZE));
    assert_eq!(m.free_bytes(), m.size() - 2 * PAGE_SIZE);
    m.free(r).unwrap();
    assert_eq!(m.free_bytes(), m.size() - PAGE_SIZE);
}
