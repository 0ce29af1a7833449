//! The initiator's timeout scan: requests that heard nothing for [`REQUEST_TIMEOUT`] complete
//! UNDELIVERABLE, target messages whose last packets never came are dropped.

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::rc::ReturnCode;

use super::complete::IxeComplete;
use super::ctx::IxeCtx;
use super::requests::{REQUEST_TIMEOUT, Req, SCAN_PERIOD, TOKEN_SCAN};

/// The timeout scan, on anything that provides an [`IxeCtx`].
pub(crate) trait IxeTimeout: IxeCtx {
    /// A sign of life from the fabric (the PCT saw packets acknowledged): requests whose
    /// frames are still streaming or waiting for their acknowledgement are not lost.
    fn note_progress(&mut self, io: &mut DeviceIo<'_>) {
        self.ixe().last_progress = io.now().as_ps();
    }

    /// The timeout scan: requests that waited [`REQUEST_TIMEOUT`] since their launch and since
    /// the last response this initiator received complete with UNDELIVERABLE, target messages
    /// whose last packets never came are dropped; re-armed while anything is left.
    fn scan_timeouts(&mut self, io: &mut DeviceIo<'_>) {
        self.ixe().scan_armed = false;
        let now = io.now().as_ps();
        let limit = REQUEST_TIMEOUT.as_ps();
        let progress = self.ixe().last_progress;
        let ixe = self.ixe();
        let expired: Vec<(u32, Req)> = ixe
            .reqs
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.active && now.saturating_sub(r.at.max(progress)) >= limit.saturating_add(r.grace)
            })
            .map(|(i, r)| (ixe.handle_of(i), *r))
            .collect();
        for (h, r) in expired {
            tracing::debug!(
                target: "emu_cassini::ixe",
                handle = h,
                launched_ps = r.at,
                last_progress_ps = progress,
                now_ps = now,
                "request timed out: UNDELIVERABLE"
            );
            self.fail_request(io, &r, ReturnCode::Undeliverable);
            self.finish(io, h, r.cq);
        }
        self.expire_target_messages(now, limit);
        let busy = self.ixe().reqs.len() > self.ixe().free.len() || self.target_busy();
        if busy {
            self.ensure_scan(io);
        }
    }

    /// Whether the timeout scan is armed.
    fn ixe_scan_armed(&mut self) -> bool {
        self.ixe().scan_armed
    }

    /// Arm the timeout scan.
    fn arm_scan(&mut self, io: &mut DeviceIo<'_>) {
        self.ixe().scan_armed = true;
        io.timer(SCAN_PERIOD, TOKEN_SCAN);
    }

    /// Arm the timeout scan unless it is armed.
    fn ensure_scan(&mut self, io: &mut DeviceIo<'_>) {
        if !self.ixe().scan_armed {
            self.arm_scan(io);
        }
    }
}

impl<T: IxeCtx + ?Sized> IxeTimeout for T {}
