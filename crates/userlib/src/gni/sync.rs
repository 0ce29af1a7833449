//! Locking the library's shared state.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock a mutex, ignoring poisoning (every critical section leaves its state consistent).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
