//! The bus: a set of functions and the drivers bound to them. Binding follows the kernel's
//! driver model: a driver lists the vendor/device ids it handles; each unbound function is
//! offered to the matching drivers in order, and the first whose `probe` succeeds owns it. A
//! failed probe is recorded on the function, never a panic.

use std::any::Any;
use std::error::Error as StdError;
use std::sync::Arc;

use thiserror::Error;

use super::address::{PciAddress, PciId};
use super::function::{PciError, PciFunction};

/// What a driver keeps per bound function (the kernel's drvdata), retrieved with
/// [`PciBus::drvdata`].
pub type DriverData = Arc<dyn Any + Send + Sync>;

/// Why a driver's probe failed.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// The driver matched the id but cannot drive this function (revision, platform, BAR size).
    #[error("unsupported device: {0}")]
    Unsupported(String),
    /// Talking to the function failed.
    #[error(transparent)]
    Pci(#[from] PciError),
    /// Any other driver-specific failure.
    #[error(transparent)]
    Other(Box<dyn StdError + Send + Sync>),
}

/// A driver for PCI functions.
pub trait PciDriver {
    /// The driver's name, recorded in the binding (`cxi_ss1`, `kgni`).
    fn name(&self) -> &str;

    /// The vendor/device ids the driver handles.
    fn id_table(&self) -> &[PciId];

    /// Take over `function`: check it, set it up, and return the per-function state to keep.
    fn probe(&self, function: &Arc<PciFunction>) -> Result<DriverData, ProbeError>;
}

/// A failed probe: which driver, and why.
#[derive(Debug, Clone)]
pub struct ProbeFailure {
    /// The driver that failed.
    pub driver: String,
    /// Its error.
    pub error: Arc<ProbeError>,
}

/// The binding state of one function.
#[derive(Debug, Clone, Default)]
pub enum BindState {
    /// No driver has taken the function (none matched, or none probed yet).
    #[default]
    Unbound,
    /// Bound to `driver`.
    Bound {
        /// The driver's name.
        driver: String,
        /// Matching drivers whose probe failed before this one succeeded.
        failures: Vec<ProbeFailure>,
    },
    /// Every matching driver's probe failed.
    Failed {
        /// One entry per matching driver, in order.
        failures: Vec<ProbeFailure>,
    },
}

impl BindState {
    /// The bound driver's name.
    pub fn driver(&self) -> Option<&str> {
        match self {
            BindState::Bound { driver, .. } => Some(driver),
            _ => None,
        }
    }

    /// True when a driver owns the function.
    pub fn is_bound(&self) -> bool {
        matches!(self, BindState::Bound { .. })
    }
}

struct Slot {
    function: Arc<PciFunction>,
    state: BindState,
    data: Option<DriverData>,
}

/// A PCI bus: functions in insertion order, each with its binding.
#[derive(Default)]
pub struct PciBus {
    slots: Vec<Slot>,
}

impl PciBus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    /// Put a function on the bus, unbound. Refused if its address is taken.
    pub fn add(&mut self, function: PciFunction) -> Result<Arc<PciFunction>, PciError> {
        let address = function.address();
        if self.slot(address).is_some() {
            return Err(PciError::DuplicateAddress(address));
        }
        let function = Arc::new(function);
        self.slots.push(Slot {
            function: Arc::clone(&function),
            state: BindState::Unbound,
            data: None,
        });
        Ok(function)
    }

    fn slot(&self, address: PciAddress) -> Option<&Slot> {
        self.slots.iter().find(|s| s.function.address() == address)
    }

    /// Every function, in insertion order.
    pub fn functions(&self) -> impl Iterator<Item = &Arc<PciFunction>> {
        self.slots.iter().map(|s| &s.function)
    }

    /// The function at `address`.
    pub fn function(&self, address: PciAddress) -> Option<&Arc<PciFunction>> {
        self.slot(address).map(|s| &s.function)
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the bus has no functions.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Offer every function that no driver owns yet to `drivers`, in order: the first matching
    /// driver whose probe succeeds binds it. Returns each offered function's new state.
    pub fn probe_all(&mut self, drivers: &[&dyn PciDriver]) -> Vec<(PciAddress, BindState)> {
        let mut report = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| !s.state.is_bound()) {
            let id = slot.function.id();
            let mut failures = Vec::new();
            let mut state = None;
            for drv in drivers.iter().filter(|d| d.id_table().contains(&id)) {
                match drv.probe(&slot.function) {
                    Ok(data) => {
                        tracing::debug!(address = %slot.function.address(), driver = drv.name(), "bound");
                        slot.data = Some(data);
                        state = Some(BindState::Bound {
                            driver: drv.name().to_string(),
                            failures: std::mem::take(&mut failures),
                        });
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(address = %slot.function.address(), driver = drv.name(), error = %e, "probe failed");
                        failures.push(ProbeFailure {
                            driver: drv.name().to_string(),
                            error: Arc::new(e),
                        });
                    }
                }
            }
            slot.state = state.unwrap_or(if failures.is_empty() {
                BindState::Unbound
            } else {
                BindState::Failed { failures }
            });
            report.push((slot.function.address(), slot.state.clone()));
        }
        report
    }

    /// The binding of the function at `address`.
    pub fn binding(&self, address: PciAddress) -> Option<&BindState> {
        self.slot(address).map(|s| &s.state)
    }

    /// The state the bound driver keeps for the function at `address`, if it is a `T`.
    pub fn drvdata<T: Any + Send + Sync>(&self, address: PciAddress) -> Option<Arc<T>> {
        let data = self.slot(address)?.data.clone()?;
        data.downcast::<T>().ok()
    }

    /// Release the function at `address` from its driver (dropping the driver's state).
    /// Returns the state it was in.
    pub fn unbind(&mut self, address: PciAddress) -> Option<BindState> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.function.address() == address)?;
        slot.data = None;
        Some(std::mem::take(&mut slot.state))
    }
}
