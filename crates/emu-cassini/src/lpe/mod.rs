//! List processing engine. Placeholder: being written.
