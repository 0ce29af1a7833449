//! The bodies of the `nicemu gni-*` tools (being written).
