//! Host memory of an emulated node (vm-memory). PLACEHOLDER: being implemented.
