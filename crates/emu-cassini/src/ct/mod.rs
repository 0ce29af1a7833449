//! Counting events and triggered operations. Placeholder: being written.
