//! Atomic memory operation unit. Placeholder: being written.
