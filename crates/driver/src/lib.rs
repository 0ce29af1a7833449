//! Kernel-style driver model for the emulated (and real) Cassini and Gemini NICs: a PCI bus with
//! probe by id, per-device resource allocators, a uAPI of opcodes and mmap tokens, memory
//! registration, interrupts. Backends: emulated (in-process device) and vfio (real device).

pub mod pci;
