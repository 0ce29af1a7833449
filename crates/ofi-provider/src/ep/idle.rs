//! Whether an endpoint has operations in flight (`fi_trywait` must not let a reader sleep
//! on a wait object while only its own progress can complete them).

use super::Ep;

impl Ep {
    /// No operation of this endpoint is in flight (posted receives count as in flight).
    pub fn idle(&self) -> bool {
        self.lock().ops.is_empty()
    }
}
