//! Wait objects, where interrupts land: a counter of pending signals that a thread can block on
//! (like the libcxi wait object a process polls for its EQ/CT interrupts), and the per-function
//! set of MSI-X vectors, one wait object each.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use thiserror::Error;

#[derive(Debug, Default)]
struct Counts {
    /// Signals not yet consumed by `wait`/`poll`.
    pending: u64,
    /// Signals ever delivered.
    total: u64,
}

/// Called on every signal of a wait object (see [`WaitObject::set_notify`]).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

/// A signal counter that threads can block on. Signals accumulate; `wait` and `poll` consume
/// all pending ones at once (read-to-clear, like an interrupt status).
#[derive(Default)]
pub struct WaitObject {
    counts: Mutex<Counts>,
    cv: Condvar,
    notify: Mutex<Option<Notify>>,
}

impl std::fmt::Debug for WaitObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitObject")
            .field("counts", &*self.lock())
            .finish_non_exhaustive()
    }
}

impl WaitObject {
    /// A wait object with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        // Nothing panics while holding this lock; a poisoned lock still holds valid counts.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Deliver one signal and wake every waiter.
    pub fn signal(&self) {
        self.signal_n(1);
    }

    /// Deliver `n` signals at once (an eventfd read returns a count). `n == 0` does nothing.
    pub fn signal_n(&self, n: u64) {
        if n == 0 {
            return;
        }
        let mut c = self.lock();
        c.pending = c.pending.saturating_add(n);
        c.total = c.total.saturating_add(n);
        drop(c);
        self.cv.notify_all();
        let f = self
            .notify
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(f) = f {
            f();
        }
    }

    /// Call `f` on every signal from now on (`None`: stop): how a wait object becomes
    /// readiness of a file descriptor that `poll`/`epoll` watch, as the kernel driver's
    /// interrupt handler calls `sysfs_notify` on the wait object's `intr` file. `f` runs in
    /// the signalling thread (the device's interrupt path): it must not block.
    pub fn set_notify(&self, f: Option<Notify>) {
        *self.notify.lock().unwrap_or_else(PoisonError::into_inner) = f;
    }

    /// Take every pending signal without blocking; returns how many there were (0 if none).
    pub fn poll(&self) -> u64 {
        std::mem::take(&mut self.lock().pending)
    }

    /// Block until at least one signal is pending, then take them all and return the count.
    /// `None` when `timeout` passes first; `timeout: None` waits for ever.
    pub fn wait(&self, timeout: Option<Duration>) -> Option<u64> {
        let mut c = self.lock();
        match timeout {
            None => {
                while c.pending == 0 {
                    c = self.cv.wait(c).unwrap_or_else(PoisonError::into_inner);
                }
            }
            Some(t) => {
                // A deadline that does not fit an Instant is as good as no deadline.
                let deadline = Instant::now().checked_add(t);
                while c.pending == 0 {
                    let left = match deadline {
                        Some(d) => d.saturating_duration_since(Instant::now()),
                        None => Duration::MAX,
                    };
                    if left.is_zero() {
                        return None;
                    }
                    c = self
                        .cv
                        .wait_timeout(c, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
        Some(std::mem::take(&mut c.pending))
    }

    /// Signals delivered but not yet consumed.
    pub fn pending(&self) -> u64 {
        self.lock().pending
    }

    /// Signals ever delivered (never reset): an interrupt counter.
    pub fn signal_count(&self) -> u64 {
        self.lock().total
    }

    /// The pending and total signal counts, for a machine snapshot
    /// ([`WaitObject::set_counts`] puts them back).
    pub fn counts(&self) -> (u64, u64) {
        let c = self.lock();
        (c.pending, c.total)
    }

    /// Set the pending and total signal counts (restoring what [`WaitObject::counts`]
    /// returned; the device and host memory are put back alongside). Wakes no waiter.
    pub fn set_counts(&self, pending: u64, total: u64) {
        let mut c = self.lock();
        c.pending = pending;
        c.total = total;
    }
}

/// The MSI-X vectors of one function, as the driver sees them: vector `i` lands in wait object
/// `i`. Cloning shares the wait objects.
#[derive(Clone, Debug)]
pub struct Interrupts {
    vectors: Arc<[Arc<WaitObject>]>,
}

impl Interrupts {
    /// `count` fresh vectors.
    pub fn new(count: u32) -> Self {
        Interrupts {
            vectors: (0..count).map(|_| Arc::new(WaitObject::new())).collect(),
        }
    }

    /// Number of vectors.
    pub fn len(&self) -> u32 {
        // Built from a u32 count, so the length fits.
        u32::try_from(self.vectors.len()).unwrap_or(u32::MAX)
    }

    /// True when there are no vectors.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The wait object of vector `index`.
    pub fn vector(&self, index: u32) -> Option<&Arc<WaitObject>> {
        self.vectors.get(usize::try_from(index).ok()?)
    }

    /// All wait objects, in vector order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<WaitObject>> {
        self.vectors.iter()
    }

    /// The device-side handle that raises these vectors.
    pub fn sink(&self) -> InterruptSink {
        InterruptSink {
            vectors: Arc::clone(&self.vectors),
        }
    }
}

/// What a device (or the backend relaying a real device's interrupts) holds to raise MSI-X
/// vectors. Cheap to clone; usable from any thread.
#[derive(Clone, Debug)]
pub struct InterruptSink {
    vectors: Arc<[Arc<WaitObject>]>,
}

impl InterruptSink {
    /// Raise vector `vector` once. False (and nothing happens) if the vector does not exist,
    /// as a message to an unprogrammed MSI-X entry goes nowhere.
    pub fn fire(&self, vector: u32) -> bool {
        self.fire_n(vector, 1)
    }

    /// Raise vector `vector` `n` times.
    pub fn fire_n(&self, vector: u32, n: u64) -> bool {
        match usize::try_from(vector)
            .ok()
            .and_then(|v| self.vectors.get(v))
        {
            Some(w) => {
                w.signal_n(n);
                true
            }
            None => false,
        }
    }

    /// Number of vectors this sink can raise.
    pub fn len(&self) -> u32 {
        u32::try_from(self.vectors.len()).unwrap_or(u32::MAX)
    }

    /// True when the sink raises nothing.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

/// The engines deliver a device's MSI-X messages to an `emu_core::pci::InterruptSink`; this
/// lets the emulated backend hand its sink straight to them.
impl emu_core::pci::InterruptSink for InterruptSink {
    fn interrupt(&self, vector: u16) {
        if !self.fire(u32::from(vector)) {
            tracing::debug!(
                vector,
                "MSI-X message to a vector that is not enabled; dropped"
            );
        }
    }
}

/// Why MSI-X could not be enabled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MsixError {
    /// The function has no MSI-X capability (or the backend exposes no vectors).
    #[error("the function has no MSI-X vectors")]
    Unsupported,
    /// Asked for no vectors, or more than the function has.
    #[error("asked for {requested} MSI-X vectors; the function has {supported}")]
    Count {
        /// Vectors asked for.
        requested: u32,
        /// Vectors the function has.
        supported: u32,
    },
    /// MSI-X is already enabled; disable it first.
    #[error("MSI-X is already enabled")]
    AlreadyEnabled,
}

/// Check a request for `requested` vectors on a function that has `supported`.
pub fn check_msix_request(requested: u32, supported: u32) -> Result<(), MsixError> {
    if supported == 0 {
        return Err(MsixError::Unsupported);
    }
    if requested == 0 || requested > supported {
        return Err(MsixError::Count {
            requested,
            supported,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_accumulate_and_poll_clears() {
        let w = WaitObject::new();
        assert_eq!(w.poll(), 0);
        w.signal();
        w.signal_n(2);
        w.signal_n(0);
        assert_eq!(w.pending(), 3);
        assert_eq!(w.poll(), 3);
        assert_eq!(w.poll(), 0);
        assert_eq!(w.signal_count(), 3);
    }

    #[test]
    fn zero_timeout_does_not_block() {
        let w = WaitObject::new();
        assert_eq!(w.wait(Some(Duration::ZERO)), None);
        w.signal();
        assert_eq!(w.wait(Some(Duration::ZERO)), Some(1));
        w.signal();
        assert_eq!(w.wait(Some(Duration::MAX)), Some(1));
    }

    #[test]
    fn msix_requests_are_bounded() {
        assert_eq!(check_msix_request(1, 0), Err(MsixError::Unsupported));
        assert!(matches!(
            check_msix_request(0, 4),
            Err(MsixError::Count { .. })
        ));
        assert!(matches!(
            check_msix_request(5, 4),
            Err(MsixError::Count { .. })
        ));
        assert_eq!(check_msix_request(4, 4), Ok(()));
    }

    #[test]
    fn sink_raises_only_existing_vectors() {
        let irqs = Interrupts::new(2);
        let sink = irqs.sink();
        assert!(sink.fire(1));
        assert!(!sink.fire(2));
        assert_eq!(irqs.vector(0).unwrap().pending(), 0);
        assert_eq!(irqs.vector(1).unwrap().pending(), 1);
        assert!(irqs.vector(2).is_none());
        assert_eq!((irqs.len(), sink.len()), (2, 2));
        // The engine-side trait reaches the same wait objects.
        let engine_side: &dyn emu_core::pci::InterruptSink = &sink;
        engine_side.interrupt(0);
        engine_side.interrupt(7);
        assert_eq!(irqs.vector(0).unwrap().pending(), 1);
    }
}
