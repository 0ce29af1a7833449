//! libcxi-like user library for Cassini. Placeholder: being written.
