//! How the processes of a job find each other's NICs: [`pmi::rendezvous`]'s exchange through
//! files, with this provider's variables (`NICEMU_OFI_RANK`, `NICEMU_OFI_SIZE`,
//! `NICEMU_OFI_JOB`, `NICEMU_OFI_RENDEZVOUS`, `NICEMU_OFI_BOOTSTRAP_TIMEOUT_MS`) and
//! directory (`nicemu-ofi-<job>`), read from the provider's [`Env`].

#![forbid(unsafe_code)]

pub use pmi::rendezvous::{DEFAULT_TIMEOUT, Job as Launch, Rendezvous};
use transport::Env;

use crate::error::{Error, Result};

/// The variable prefix of this provider's rendezvous.
pub const PREFIX: &str = "NICEMU_OFI";

/// The job this process belongs to ([`pmi::rendezvous::Job::from_lookup`]), or `None` alone.
pub fn launch_from_env(env: &Env) -> Result<Option<Launch>> {
    Launch::from_lookup(PREFIX, |v| env.get(v).map(str::to_string))
        .map_err(|e| Error::Nic(e.to_string()))
}

/// Start the exchange of `launch`.
pub fn start(launch: Launch) -> Result<Rendezvous> {
    Rendezvous::new(launch).map_err(|e| Error::Nic(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_providers_variables_and_open_mpis_describe_the_job() {
        let mut env = Env::new();
        assert_eq!(launch_from_env(&env).unwrap(), None);
        env.set("OMPI_COMM_WORLD_RANK", "2");
        env.set("OMPI_COMM_WORLD_SIZE", "4");
        env.set("PMIX_NAMESPACE", "1304690689");
        env.set("PMIX_SERVER_TMPDIR", "/tmp/ompi.vm.0/pid.8506");
        let l = launch_from_env(&env).unwrap().unwrap();
        assert_eq!((l.rank, l.size), (2, 4));
        assert_eq!(
            l.dir,
            std::path::Path::new("/tmp/ompi.vm.0/pid.8506/nicemu-ofi-1304690689")
        );
        env.set("NICEMU_OFI_JOB", "../x");
        assert!(launch_from_env(&env).is_err());
    }
}
