//! The C API on ranks the caller started: runs `f` as one rank of an in-process job (the
//! runtime's `Job::run`, each rank a thread with its own MPI state), so the bindings' paths
//! that need several ranks (non-root sides of rooted collectives, rings, remote windows)
//! are tested before a multi-process launch exists.

#![forbid(unsafe_code)]

use mpi::Universe;
use runtime::Nic;

use crate::consts::MPI_THREAD_FUNNELED;
use crate::init::World;
use crate::state::{self, State};

/// Run `f` with this thread's MPI state built on `universe` (node `node` of a `nic`
/// machine), as if `MPI_Init` had run; finalize the universe afterwards. `f` calls the
/// exported `MPI_*` functions.
pub fn with_rank<R>(universe: Universe, nic: Nic, node: u32, f: impl FnOnce() -> R) -> R {
    state::install(State::new(
        World::hosted(universe, nic, node),
        MPI_THREAD_FUNNELED,
    ));
    let r = f();
    if let Some(s) = state::take()
        && let Err(e) = s.finalize()
    {
        panic!("finalizing a rank: {}", e.msg);
    }
    r
}
