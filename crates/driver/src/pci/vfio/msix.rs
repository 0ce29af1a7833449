//! MSI-X delivery for a real device: the kernel signals one eventfd per vector; a thread waits on
//! all of them (epoll) and moves each eventfd's count into the vector's wait object.

use std::io;
use std::os::fd::AsRawFd;
use std::thread::JoinHandle;

use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EFD_NONBLOCK, EventFd};

use super::VfioError;
use crate::pci::wait::{InterruptSink, Interrupts};

/// epoll data of the stop eventfd (vector numbers are below 2^32).
const STOP: u64 = u64::MAX;

/// Running delivery of `interrupts`; stops (and joins its thread) when dropped.
pub(crate) struct MsixDelivery {
    interrupts: Interrupts,
    stop: EventFd,
    thread: Option<JoinHandle<()>>,
}

impl MsixDelivery {
    /// Create `count` eventfds, start the delivery thread, then hand the eventfds to `install`
    /// (which programs the device). If `install` fails, the thread is stopped again.
    pub(crate) fn start(
        count: u32,
        name: String,
        install: impl FnOnce(&[&EventFd]) -> io::Result<()>,
    ) -> Result<Self, VfioError> {
        let fds = (0..count)
            .map(|_| EventFd::new(EFD_NONBLOCK))
            .collect::<io::Result<Vec<_>>>()
            .map_err(VfioError::Irq)?;
        let stop = EventFd::new(EFD_NONBLOCK).map_err(VfioError::Irq)?;
        let epoll = Epoll::new().map_err(VfioError::Irq)?;
        for (i, fd) in fds.iter().enumerate() {
            epoll
                .ctl(
                    ControlOperation::Add,
                    fd.as_raw_fd(),
                    EpollEvent::new(EventSet::IN, i as u64),
                )
                .map_err(VfioError::Irq)?;
        }
        epoll
            .ctl(
                ControlOperation::Add,
                stop.as_raw_fd(),
                EpollEvent::new(EventSet::IN, STOP),
            )
            .map_err(VfioError::Irq)?;
        let interrupts = Interrupts::new(count);
        let thread_fds = fds
            .iter()
            .map(EventFd::try_clone)
            .collect::<io::Result<Vec<_>>>()
            .map_err(VfioError::Irq)?;
        let sink = interrupts.sink();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || deliver(&epoll, &thread_fds, &sink))
            .map_err(VfioError::Irq)?;
        let delivery = MsixDelivery {
            interrupts,
            stop,
            thread: Some(thread),
        };
        let refs: Vec<&EventFd> = fds.iter().collect();
        install(&refs).map_err(VfioError::Irq)?;
        Ok(delivery)
    }

    /// The wait objects the vectors land in.
    pub(crate) fn interrupts(&self) -> &Interrupts {
        &self.interrupts
    }
}

impl Drop for MsixDelivery {
    fn drop(&mut self) {
        if let Err(e) = self.stop.write(1) {
            // Without the stop signal the thread would never end; leave it detached.
            tracing::error!(error = %e, "cannot stop the MSI-X delivery thread");
            return;
        }
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the MSI-X delivery thread panicked");
        }
    }
}

fn deliver(epoll: &Epoll, fds: &[EventFd], sink: &InterruptSink) {
    let mut events = vec![EpollEvent::default(); fds.len() + 1];
    loop {
        let n = match epoll.wait(-1, &mut events) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::error!(error = %e, "MSI-X delivery stopped: epoll failed");
                return;
            }
        };
        for ev in events.iter().take(n) {
            let data = ev.data();
            if data == STOP {
                return;
            }
            let Some(fd) = usize::try_from(data).ok().and_then(|i| fds.get(i)) else {
                continue;
            };
            match fd.read() {
                Ok(count) => {
                    // `data` indexes `fds`, whose length came from a u32.
                    sink.fire_n(u32::try_from(data).unwrap_or(u32::MAX), count);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => tracing::warn!(vector = data, error = %e, "MSI-X eventfd read failed"),
            }
        }
    }
}
