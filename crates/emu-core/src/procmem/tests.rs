//! Process memory: pins, accesses, the monitor and the fault recovery, on real mappings of
//! the test process. The tests run in parallel with the rest of the crate's: each uses its
//! own mappings and its own [`ProcessMemory`].

#![allow(unsafe_code)]

use super::*;

/// An anonymous private mapping of `pages` pages filled with `byte`.
fn map(pages: u64, byte: u8) -> u64 {
    let len = (pages * PAGE) as usize;
    // SAFETY: a fresh anonymous mapping; checked for failure.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: the mapping is ours, `len` bytes, writable.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), byte, len) };
    p as u64
}

/// `munmap` through the C library (what the monitor sees).
fn unmap(addr: u64, pages: u64) {
    // SAFETY: unmapping a mapping these tests made; nothing holds a reference into it.
    let r = unsafe { libc::munmap(addr as *mut libc::c_void, (pages * PAGE) as usize) };
    assert_eq!(r, 0);
}

/// `munmap` as a raw system call: the monitor does not see it.
fn unmap_behind_the_monitors_back(addr: u64, pages: u64) {
    // SAFETY: as in `unmap`.
    let r = unsafe { libc::syscall(libc::SYS_munmap, addr, (pages * PAGE) as usize) };
    assert_eq!(r, 0);
}

/// A mapping at exactly `addr` (which must be free), filled with `byte`.
fn map_at(addr: u64, pages: u64, byte: u8) {
    let len = (pages * PAGE) as usize;
    // SAFETY: MAP_FIXED_NOREPLACE maps only where nothing is mapped.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(p as u64, addr, "the address could be mapped again");
    // SAFETY: the mapping is ours.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), byte, len) };
}

/// The bytes at `addr` as the program sees them.
fn bytes(addr: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: callers pass mapped, readable memory of theirs.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, v.as_mut_ptr(), len) };
    v
}

fn hooked() -> bool {
    monitor() == Monitor::Hooks
}

#[test]
fn pinned_memory_round_trips_through_the_device_accesses() {
    let pm = ProcessMemory::new();
    let a = map(3, 0);
    let pin = pm.pin(a + 100, 2 * PAGE, PinAccess::RW).unwrap();
    assert_eq!((pin.addr(), pin.len()), (a, 3 * PAGE));
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    pm.write(a + 10, &data).unwrap();
    assert_eq!(
        bytes(a + 10, data.len()),
        data,
        "the program sees the device's write"
    );
    let mut back = vec![0u8; 5000];
    pm.read(a + 10, &mut back).unwrap();
    assert_eq!(back, data);
    pm.fill(a + PAGE, 3, 0xEE).unwrap();
    assert_eq!(
        bytes(a + PAGE, 4),
        [0xEE, 0xEE, 0xEE, data[PAGE as usize - 10 + 3]]
    );
    pm.store_u64_release(a + 2 * PAGE, 0x1122_3344_5566_7788)
        .unwrap();
    assert_eq!(
        pm.load_u64_acquire(a + 2 * PAGE).unwrap(),
        0x1122_3344_5566_7788
    );
    pm.store_u32_release(a + 2 * PAGE + 12, 9).unwrap();
    assert_eq!(pm.load_u32_acquire(a + 2 * PAGE + 12).unwrap(), 9);
    let old = pm
        .with_atomic_u64(a + 2 * PAGE, |w| w.fetch_add(1, Ordering::Relaxed))
        .unwrap();
    assert_eq!(old, 0x1122_3344_5566_7788);
    assert_eq!(bytes(a + 2 * PAGE, 1), [0x89]);
    assert_eq!(
        pm.load_u64_acquire(a + 4),
        Err(ProcError::Misaligned {
            addr: a + 4,
            align: 8
        })
    );
    drop(pin);
    assert_eq!(
        pm.read(a, &mut [0u8; 1]),
        Err(ProcError::NotPinned { addr: a }),
        "an unpinned range is out of reach"
    );
    unmap(a, 3);
}

#[test]
fn accesses_need_a_pin_of_their_owner_with_the_access() {
    let pm = ProcessMemory::new();
    let other = ProcessMemory::new();
    let a = map(4, 0x11);
    assert_eq!(
        pm.write(a, &[1]),
        Err(ProcError::NotPinned { addr: a }),
        "never registered"
    );
    let ro = pm.pin(a, PAGE, PinAccess::READ).unwrap();
    assert_eq!(pm.write(a, &[1]), Err(ProcError::Permission { addr: a }));
    let mut b = [0u8; 4];
    pm.read(a, &mut b).unwrap();
    assert_eq!(b, [0x11; 4]);
    assert_eq!(
        other.read(a, &mut b),
        Err(ProcError::NotPinned { addr: a }),
        "another node's pin does not count"
    );
    // An access across two pins is covered by both; a gap is not.
    let _p2 = pm.pin(a + PAGE, PAGE, PinAccess::READ).unwrap();
    pm.read(a + PAGE - 2, &mut b).unwrap();
    assert_eq!(
        pm.read(a + 2 * PAGE - 2, &mut b),
        Err(ProcError::NotPinned { addr: a + 2 * PAGE })
    );
    assert_eq!(bytes(a, 1), [0x11], "nothing written by a refused access");
    drop(ro);
    unmap(a, 4);
}

#[test]
fn pinning_unmapped_memory_is_efault() {
    let pm = ProcessMemory::new();
    let a = map(2, 0);
    unmap(a + PAGE, 1);
    assert_eq!(
        pm.pin(a, 2 * PAGE, PinAccess::RW).unwrap_err(),
        ProcError::Unmapped {
            addr: a + PAGE,
            len: PAGE
        }
    );
    assert!(matches!(
        pm.pin(a, 0, PinAccess::RW),
        Err(ProcError::BadRange { .. })
    ));
    assert!(matches!(
        pm.pin(u64::MAX - 10, 100, PinAccess::RW),
        Err(ProcError::BadRange { .. })
    ));
    // A protected page cannot be pinned either.
    // SAFETY: changing the protection of our own page.
    let r = unsafe { libc::mprotect(a as *mut _, PAGE as usize, libc::PROT_NONE) };
    assert_eq!(r, 0);
    assert!(matches!(
        pm.pin(a, PAGE, PinAccess::READ),
        Err(ProcError::Unmapped { .. })
    ));
    unmap(a, 1);
}

#[test]
fn memory_unmapped_under_a_pin_is_an_error_not_a_crash() {
    let pm = ProcessMemory::new();
    let a = map(2, 0);
    let pin = pm.pin(a, 2 * PAGE, PinAccess::RW).unwrap();
    unmap(a, 2);
    if hooked() {
        assert!(!pin.is_valid(), "the monitor saw the munmap");
        assert_eq!(pm.write(a, &[1; 64]), Err(ProcError::NotPinned { addr: a }));
    } else {
        assert!(matches!(
            pm.write(a, &[1; 64]),
            Err(ProcError::Fault { .. })
        ));
    }
    assert!(pm.read(a + PAGE, &mut [0u8; 8]).is_err());
    assert!(pm.load_u64_acquire(a).is_err());
}

/// Memory that goes away without the monitor seeing it (a raw system call): the pin stays
/// valid, and every kind of access faults and is recovered into an error.
#[test]
fn a_fault_under_a_live_pin_is_recovered() {
    let pm = ProcessMemory::new();
    let a = map(2, 0);
    let pin = pm.pin(a, 2 * PAGE, PinAccess::RW).unwrap();
    let before = stats().faults;
    unmap_behind_the_monitors_back(a + PAGE, 1);
    assert!(pin.is_valid());
    let fault =
        |r: Result<(), ProcError>| assert!(matches!(r, Err(ProcError::Fault { .. })), "{r:?}");
    fault(pm.write(a + PAGE, &[1; 100]));
    fault(pm.write(a + PAGE - 8, &[2; 16]));
    fault(pm.read(a + PAGE, &mut [0u8; 3]));
    fault(pm.fill(a + PAGE + 8, 9, 0));
    fault(pm.store_u64_release(a + PAGE, 1));
    fault(pm.load_u64_acquire(a + PAGE).map(|_| ()));
    fault(pm.store_u32_release(a + PAGE, 1));
    fault(pm.load_u32_acquire(a + PAGE).map(|_| ()));
    fault(
        pm.with_atomic_u64(a + PAGE, |w| w.fetch_add(1, Ordering::Relaxed))
            .map(|_| ()),
    );
    assert!(stats().faults >= before + 9);
    // The page before is still fine (and the bytes of the partial write before the fault
    // landed there, as a device's packets before a fault would have).
    assert_eq!(bytes(a + PAGE - 8, 8), [2; 8]);
    drop(pin);
    unmap(a, 1);
}

/// The promise that matters most: a range unmapped and mapped again never receives a write
/// through its old pin.
#[test]
fn memory_mapped_again_is_never_written_through_an_old_pin() {
    if !hooked() {
        return;
    }
    let pm = ProcessMemory::new();
    let a = map(4, 0);
    let pin = pm.pin(a, 4 * PAGE, PinAccess::RW).unwrap();
    unmap(a, 4);
    map_at(a, 4, 0x5A);
    assert!(!pin.is_valid());
    assert_eq!(
        pm.write(a, &[0xFF; 64]),
        Err(ProcError::NotPinned { addr: a })
    );
    assert!(pm.fill(a + PAGE, PAGE, 0).is_err());
    assert!(pm.store_u64_release(a + 2 * PAGE, 1).is_err());
    assert!(bytes(a, (4 * PAGE) as usize).iter().all(|&b| b == 0x5A));
    // A new pin of the new mapping works.
    let again = pm.pin(a, PAGE, PinAccess::RW).unwrap();
    pm.write(a, &[7]).unwrap();
    assert_eq!(bytes(a, 2), [7, 0x5A]);
    drop((pin, again));
    unmap(a, 4);
}

#[test]
fn the_monitor_sees_the_c_library_release_memory() {
    if !hooked() {
        return;
    }
    let pm = ProcessMemory::new();
    // free() of a chunk above the mmap threshold unmaps it inside the C library.
    // SAFETY: a plain malloc, freed once below.
    let m = unsafe { libc::malloc(4 << 20) } as u64;
    assert_ne!(m, 0);
    let big = pm.pin(m, 4 << 20, PinAccess::RW).unwrap();
    // SAFETY: freeing the chunk just allocated.
    unsafe { libc::free(m as *mut _) };
    assert!(!big.is_valid(), "free of an mmapped chunk calls munmap");

    let a = map(3, 1);
    let d = pm.pin(a, PAGE, PinAccess::RW).unwrap();
    let r = pm.pin(a + PAGE, PAGE, PinAccess::READ).unwrap();
    let w = pm.pin(a + 2 * PAGE, PAGE, PinAccess::RW).unwrap();
    // SAFETY: advice and protection changes on our own mapping.
    unsafe {
        assert_eq!(
            libc::madvise(a as *mut _, PAGE as usize, libc::MADV_DONTNEED),
            0
        );
        assert_eq!(
            libc::mprotect((a + PAGE) as *mut _, 2 * PAGE as usize, libc::PROT_READ),
            0
        );
    }
    assert!(!d.is_valid(), "MADV_DONTNEED discards the contents");
    assert!(
        r.is_valid(),
        "a read-only pin survives a read-only protection"
    );
    assert!(!w.is_valid(), "a writable pin does not");
    let m2 = map(2, 0);
    let moved = pm.pin(m2, 2 * PAGE, PinAccess::RW).unwrap();
    // SAFETY: growing our own mapping, wherever the kernel puts it.
    let n = unsafe {
        libc::mremap(
            m2 as *mut _,
            2 * PAGE as usize,
            64 * PAGE as usize,
            libc::MREMAP_MAYMOVE,
        )
    };
    assert_ne!(n, libc::MAP_FAILED);
    assert!(!moved.is_valid(), "mremap invalidates the old range");
    drop((d, r, w, moved));
    unmap(a, 3);
    unmap(n as u64, 64);
}

/// An invalidation that arrives while this thread holds the table (an allocation inside the
/// table's update released memory) is applied before the table is let go.
#[test]
fn a_nested_invalidation_is_not_lost() {
    let pm = ProcessMemory::new();
    let a = map(1, 0);
    let pin = pm.pin(a, PAGE, PinAccess::RW).unwrap();
    write_table(|_| notify(a, PAGE, Change::Gone));
    assert!(!pin.is_valid());
    let many: Vec<_> = (0..3).map(|_| map(1, 0)).collect();
    let pins: Vec<_> = many
        .iter()
        .map(|&m| pm.pin(m, PAGE, PinAccess::RW).unwrap())
        .collect();
    write_table(|_| {
        for _ in 0..20 {
            notify(1, 1, Change::Gone);
        }
    });
    assert!(
        pins.iter().all(|p| !p.is_valid()),
        "an overflow invalidates everything"
    );
    drop(pins);
    for m in many {
        unmap(m, 1);
    }
    drop(pin);
    unmap(a, 1);
}

/// Device accesses race the program's munmap: every access either completes on the memory
/// as it was or fails; none crashes, none lands after the unmapping.
#[test]
fn accesses_racing_an_unmap_complete_or_fail() {
    let pm = ProcessMemory::new();
    for _ in 0..20 {
        let a = map(8, 0);
        let pin = pm.pin(a, 8 * PAGE, PinAccess::RW).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let t = {
            let (pm, stop) = (pm.clone(), std::sync::Arc::clone(&stop));
            std::thread::spawn(move || {
                let buf = [0xA5u8; 4096];
                let mut failed = false;
                while !stop.load(Ordering::Acquire) {
                    if pm.write(a + 2 * PAGE, &buf).is_err() {
                        failed = true;
                        break;
                    }
                }
                failed
            })
        };
        std::thread::yield_now();
        unmap(a, 8);
        if hooked() {
            // Once munmap returned, the pin is gone: what the writer does now fails.
            assert!(pm.write(a + 2 * PAGE, &[1]).is_err());
        }
        stop.store(true, Ordering::Release);
        let _ = t.join().unwrap();
        drop(pin);
    }
}

/// On x86-64 glibc both layers are there: an unnoticed monitor or fault handler would make
/// the tests above pass vacuously.
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
#[test]
fn this_platform_has_the_monitor_and_the_guarded_accesses() {
    let _pm = ProcessMemory::new();
    assert_eq!(monitor(), Monitor::Hooks);
    if std::env::var("NICEMU_PROCMEM_ACCESS").is_err() {
        assert_eq!(access_mode(), AccessMode::Guarded);
    }
}

/// The system-call path (other platforms, `NICEMU_PROCMEM_ACCESS=syscall`): same results.
#[test]
fn the_system_call_path_moves_bytes_and_reports_unmapped_memory() {
    let a = map(2, 3);
    let mut b = [0u8; 5];
    raw::syscall_read(a + PAGE - 2, &mut b).unwrap();
    assert_eq!(b, [3; 5]);
    raw::syscall_write(a + 1, &[9, 8, 7]).unwrap();
    assert_eq!(bytes(a, 5), [3, 9, 8, 7, 3]);
    assert_eq!(raw::syscall_probe(a, 2), Ok(()));
    unmap_behind_the_monitors_back(a + PAGE, 1);
    assert!(raw::syscall_read(a + PAGE - 2, &mut b).is_err());
    assert!(raw::syscall_write(a + PAGE, &[1]).is_err());
    assert_eq!(raw::syscall_probe(a, 2), Err(a + PAGE));
    unmap(a, 1);
}
