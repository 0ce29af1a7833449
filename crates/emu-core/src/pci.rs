//! PCI function model: type-0 configuration space, BAR sizing, MSI-X. PLACEHOLDER.
