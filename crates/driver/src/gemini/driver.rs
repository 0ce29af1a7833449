//! The PCI driver: binds Gemini functions (`17db:0201`) and brings each up as a [`Kgni`].

use std::sync::{Arc, Mutex, PoisonError};

use crate::mem::HostMem;
use crate::pci::{DriverData, PciDriver, PciFunction, PciId, ProbeError, ids};

use super::kgni::{Kgni, KgniConfig, KgniProbeError};

/// The kgni PCI driver of one node: probes every Gemini on the node's bus. Device minors are
/// handed out in probe order, starting at `config.device_id`.
pub struct KgniDriver {
    mem: Arc<dyn HostMem>,
    config: KgniConfig,
    probed: Mutex<Vec<Arc<Kgni>>>,
}

impl std::fmt::Debug for KgniDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KgniDriver")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl KgniDriver {
    /// A driver for a node whose host memory is `mem`.
    pub fn new(mem: Arc<dyn HostMem>, config: KgniConfig) -> Self {
        KgniDriver {
            mem,
            config,
            probed: Mutex::new(Vec::new()),
        }
    }

    /// The devices this driver brought up, in probe order.
    pub fn devices(&self) -> Vec<Arc<Kgni>> {
        self.probed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl PciDriver for KgniDriver {
    fn name(&self) -> &str {
        "kgni"
    }

    fn id_table(&self) -> &[PciId] {
        ids::GEMINI_IDS
    }

    fn probe(&self, function: &Arc<PciFunction>) -> Result<DriverData, ProbeError> {
        let mut probed = self.probed.lock().unwrap_or_else(PoisonError::into_inner);
        let config = KgniConfig {
            device_id: self.config.device_id + probed.len() as u32,
            ..self.config.clone()
        };
        let dev = Kgni::probe(function, Arc::clone(&self.mem), config).map_err(|e| match e {
            KgniProbeError::Unsupported(s) => ProbeError::Unsupported(s),
            KgniProbeError::Pci(p) => ProbeError::Pci(p),
            other => ProbeError::Other(Box::new(other)),
        })?;
        probed.push(Arc::clone(&dev));
        Ok(dev)
    }
}
