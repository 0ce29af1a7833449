//! The threaded engine. PLACEHOLDER.
