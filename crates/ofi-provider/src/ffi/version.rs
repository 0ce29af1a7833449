//! Which libfabric API version the provider declares (`fi_provider.fi_version`).
//!
//! **How libfabric uses it** (libfabric `src/fabric.c`, v1.17.0 and v2.5.1 alike):
//! `ofi_register_provider` ignores a provider declaring less than 1.3 and checks nothing
//! else about it; `fi_getinfo(version, …)` skips every provider whose `fi_version` is below
//! the `version` the application asks for (logging `Provider nicemu fi_version 1.17 <
//! requested 2.5`), calls the others' `getinfo` with that `version`, and stores `version`
//! in each returned `fabric_attr->api_version`; `fi_fabric` copies `attr->api_version` into
//! the new `fid_fabric` of a provider declaring 1.5 or more. So a provider declaring 1.17
//! cannot serve MPICH 5's ch4:ofi, which asks for 2.5 (`FI_VERSION(FI_MAJOR_VERSION,
//! FI_MINOR_VERSION)` of the 2.5.1 headers it was built with).
//!
//! **What is declared**: the version of the libfabric that loads the provider (its
//! exported `fi_version()`), within [`OLDEST`]..=[`NEWEST`], the range whose structure
//! layouts and semantics the provider has been checked against (`super::layout`). Declaring
//! the loader's own version is the most any application of that loader can ask for
//! (`fi_getinfo` refuses a `version` above `fi_version()` with `-FI_ENOSYS`). When the
//! loader cannot be asked (its `fi_version` is not in the global symbol scope), [`NEWEST`]
//! is declared: a 1.x library checks only the 1.3 floor, and layouts are handled for both
//! series (`super::layout`).

#![allow(unsafe_code)]

use super::types::fi_version;

/// The oldest API the bindings follow: Debian's libfabric-dev 1.17 headers (`types`).
pub const OLDEST: u32 = fi_version(1, 17);
/// The newest API checked: libfabric v2.5.1's headers and man pages (`super::layout`).
pub const NEWEST: u32 = fi_version(2, 5);
/// The first API of the 2.x series, whose semantics differ (`progress`,
/// `FI_PROGRESS_CONTROL_UNIFIED`; fi_domain(3) of v2.5.1).
pub const V2: u32 = fi_version(2, 0);

/// `FI_MAJOR` / `FI_MINOR` of a version, for messages.
pub fn split(v: u32) -> (u32, u32) {
    (v >> 16, v & 0xFFFF)
}

/// The API version to declare when the loading libfabric reports `loader` (`None`: not
/// known).
pub fn declared(loader: Option<u32>) -> u32 {
    match loader {
        Some(v) => v.clamp(OLDEST, NEWEST),
        None => NEWEST,
    }
}

/// The version of the libfabric in this process: its `fi_version()` looked up in the
/// global symbol scope (the executable and the libraries loaded with it, where MPICH's
/// `libmpi.so.12` brings its libfabric; the exported symbol of every libfabric release).
/// `None` when no libfabric is found there (e.g. one loaded with `RTLD_LOCAL`).
pub fn loader() -> Option<u32> {
    // SAFETY: `dlsym` with `RTLD_DEFAULT` and a C string name only looks the symbol up.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"fi_version".as_ptr()) };
    if sym.is_null() {
        return None;
    }
    // SAFETY: the symbol is libfabric's `uint32_t fi_version(void)` (fabric.h), which
    // takes no arguments and only returns a constant.
    let f = unsafe { std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> u32>(sym) };
    let v = f();
    // A version of major 0 is no libfabric's: ignore a foreign symbol of that name.
    (v >> 16 != 0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loaders_version_is_declared_within_the_checked_range() {
        assert_eq!(declared(Some(fi_version(1, 17))), fi_version(1, 17));
        assert_eq!(declared(Some(fi_version(1, 22))), fi_version(1, 22));
        assert_eq!(declared(Some(fi_version(2, 0))), fi_version(2, 0));
        assert_eq!(declared(Some(fi_version(2, 5))), fi_version(2, 5));
        // Newer than checked: the newest checked; older: the bindings' own.
        assert_eq!(declared(Some(fi_version(2, 9))), NEWEST);
        assert_eq!(declared(Some(fi_version(3, 0))), NEWEST);
        assert_eq!(declared(Some(fi_version(1, 11))), OLDEST);
        assert_eq!(declared(None), NEWEST);
        assert_eq!(split(fi_version(2, 5)), (2, 5));
    }

    #[test]
    fn no_libfabric_in_a_test_process() {
        // The test binary does not link libfabric (the provider never does).
        assert_eq!(loader(), None);
    }
}
