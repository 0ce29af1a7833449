//! HPE Slingshot-11 "Cassini" (CXI): the user ABI, exact to the public headers
//! (shs-cassini-headers `cassini_user_defs.h`, `cxi_prov_hw.h`, `csr_defs.json`;
//! shs-cxi-driver `cxi-abi.h`).

pub mod pci;
pub mod csr;
pub mod cmd;
pub mod event;
pub mod rc;
pub mod amo;
pub mod status;
pub mod le;
pub mod dfa;
pub mod limits;
pub mod layout;
pub mod idc;
pub mod dma;
pub mod ct;
pub mod tgt;
