//! The shared library's SONAME is the one Cray's uGNI has, so programs and libraries linked
//! against `-lugni` load it as `libugni.so.0`.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libugni.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
