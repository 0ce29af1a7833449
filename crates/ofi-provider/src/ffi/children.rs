//! What is open on a parent object: a fabric's domains, EQs and wait sets, a domain's
//! address vectors, CQs, endpoints, counters and memory regions. Each of those holds a
//! [`Child`] of its parent's [`Children`] until it is closed; while any does, closing the
//! parent fails with `-FI_EBUSY` and leaves it usable (fi_fabric(3), fi_domain(3): "close
//! ... all resources associated with it first"; libfabric's providers count references).

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The open objects of a parent.
#[derive(Default)]
pub(crate) struct Children(Arc<AtomicUsize>);

impl Children {
    /// One more open object; it is counted until the returned [`Child`] is dropped.
    pub(crate) fn open(&self) -> Child {
        self.0.fetch_add(1, Ordering::AcqRel);
        Child(Arc::clone(&self.0))
    }

    /// Whether an object opened on the parent is still open.
    pub(crate) fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }
}

/// An object's place in its parent's [`Children`], for the object's life.
pub(crate) struct Child(Arc<AtomicUsize>);

impl Drop for Child {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_is_busy_while_a_child_lives() {
        let p = Children::default();
        assert!(!p.busy());
        let a = p.open();
        let b = p.open();
        drop(a);
        assert!(p.busy());
        drop(b);
        assert!(!p.busy());
    }
}
