//! PCI layer. Placeholder: being written.
