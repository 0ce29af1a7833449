//! Register-level model of the Cray Gemini NIC (XE6/XK7). Placeholder: being written.
#![forbid(unsafe_code)]
