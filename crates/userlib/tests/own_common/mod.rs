//! Memory of the test process itself, as a program has it: anonymous mappings made and
//! removed through the C library (so the memory monitor sees them), read and written with
//! plain loads and stores. For the tests of a node hosted in this process.
#![allow(dead_code, unsafe_code)]

/// An anonymous private read-write mapping of the test process, zero-filled; unmapped when
/// dropped (unless [`Mapping::unmap`] did it).
pub struct Mapping {
    addr: u64,
    len: usize,
    live: bool,
}

impl Mapping {
    /// `len` bytes (whole pages).
    pub fn new(len: usize) -> Mapping {
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
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        Mapping {
            addr: p as u64,
            len,
            live: true,
        }
    }

    /// `len` bytes at exactly `addr` (which must be free: `MAP_FIXED_NOREPLACE`), filled with
    /// `byte`.
    pub fn at(addr: u64, len: usize, byte: u8) -> Mapping {
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
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
        assert_eq!(p as u64, addr, "could not map the address again");
        let m = Mapping {
            addr,
            len,
            live: true,
        };
        m.write(0, &vec![byte; len]);
        m
    }

    /// `munmap` the last page (through the C library); the mapping is a page shorter.
    pub fn unmap_last_page(&mut self) {
        assert!(self.live && self.len > 4096);
        self.len -= 4096;
        // SAFETY: unmapping the last page of our own mapping, once.
        let r = unsafe { libc::munmap((self.addr + self.len as u64) as *mut libc::c_void, 4096) };
        assert_eq!(r, 0);
    }

    /// First byte.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// A plain store of `data` at `off` (the program writing its own memory).
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(self.live && off + data.len() <= self.len);
        // SAFETY: inside our live mapping; no reference into it exists.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (self.addr as *mut u8).add(off),
                data.len(),
            )
        };
    }

    /// A plain load of `len` bytes at `off` (the program reading its own memory).
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(self.live && off + len <= self.len);
        let mut v = vec![0u8; len];
        // SAFETY: inside our live mapping.
        unsafe {
            std::ptr::copy_nonoverlapping((self.addr as *const u8).add(off), v.as_mut_ptr(), len)
        };
        v
    }

    /// The little-endian u64 at `off`.
    pub fn read_u64(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.read(off, 8).try_into().unwrap())
    }

    /// `munmap` through the C library; returns the address, now free.
    pub fn unmap(mut self) -> u64 {
        // SAFETY: unmapping our own mapping, once.
        let r = unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
        assert_eq!(r, 0);
        self.live = false;
        self.addr
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: unmapping our own mapping, once.
            unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
        }
    }
}
