//! The deterministic engine. PLACEHOLDER.
