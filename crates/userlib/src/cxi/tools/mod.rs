//! Tools (being written).
