//! HPE Slingshot-11 "Cassini" (CXI): the user ABI, exact to the public headers
//! (shs-cassini-headers `cassini_user_defs.h`, `cxi_prov_hw.h`, `csr_defs.json`;
//! shs-cxi-driver `cxi-abi.h`).

pub mod amo;
pub mod cmd;
pub mod cmd_header;
pub mod csr;
pub mod ct;
pub mod dfa;
pub mod dma;
pub mod event;
pub mod idc;
pub mod layout;
pub mod le;
pub mod limits;
pub mod pci;
pub mod rc;
pub mod status;
pub mod tgt;
