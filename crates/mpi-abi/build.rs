//! The shared library's SONAME is the one the MPI 5.0 standard ABI fixes, so programs linked
//! against it run with any library of that ABI.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
