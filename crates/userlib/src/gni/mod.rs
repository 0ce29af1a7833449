//! uGNI-like user library for Gemini. Placeholder: being written.
