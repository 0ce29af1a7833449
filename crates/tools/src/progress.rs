//! Progress of a long-running bandwidth tool on stderr. Shown only when the caller says
//! stderr is a terminal, so output captured by scripts and tests stays clean; the line is
//! redrawn in place (`\r`) and cleared when the tool is done.

use std::io::Write;
use std::time::Duration;

/// How long each size of a bandwidth tool runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Plan {
    /// This many measured iterations.
    Iterations(u64),
    /// For this long.
    Duration(Duration),
}

/// Progress reporting of one tool run.
#[derive(Clone, Debug)]
pub struct Progress {
    tool: &'static str,
    enabled: bool,
}

impl Progress {
    /// Progress of `tool`, shown only when `enabled` (stderr is a terminal).
    pub fn new(tool: &'static str, enabled: bool) -> Self {
        Progress { tool, enabled }
    }

    /// The line after `iters` measured iterations of `list` operations of `size` bytes,
    /// `elapsed` into the size's run; `None` when progress is not shown.
    pub fn line(
        &self,
        size: u64,
        iters: u64,
        list: u32,
        plan: Plan,
        elapsed: Duration,
    ) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let ops = iters.saturating_mul(u64::from(list));
        let of = match plan {
            Plan::Iterations(n) => {
                let pct = (iters.min(n) * 100).checked_div(n).unwrap_or(100);
                format!("iteration {iters}/{n} ({pct} %)")
            }
            Plan::Duration(d) => format!(
                "{:.1}/{:.1} s",
                elapsed.as_secs_f64().min(d.as_secs_f64()),
                d.as_secs_f64()
            ),
        };
        Some(format!(
            "\r{}: {size} B: {of}, {ops} operations ",
            self.tool
        ))
    }

    /// Draws the line of [`Progress::line`], if shown.
    pub fn show(&self, size: u64, iters: u64, list: u32, plan: Plan, elapsed: Duration) {
        if let Some(l) = self.line(size, iters, list, plan, elapsed) {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(l.as_bytes());
            let _ = err.flush();
        }
    }

    /// Clears the progress line (the results table follows on stdout).
    pub fn finish(&self) {
        if self.enabled {
            // Carriage return, then erase to the end of the line (ANSI EL).
            let _ = std::io::stderr().lock().write_all(b"\r\x1b[K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_shown_when_stderr_is_not_a_terminal() {
        let p = Progress::new("send-bw", false);
        assert_eq!(p.line(8, 3, 64, Plan::Iterations(10), Duration::ZERO), None);
    }

    #[test]
    fn an_iteration_run_shows_its_share_done_and_the_operations() {
        let p = Progress::new("send-bw", true);
        let l = p
            .line(
                65536,
                3,
                100_000,
                Plan::Iterations(10),
                Duration::from_secs(2),
            )
            .unwrap();
        assert_eq!(
            l,
            "\rsend-bw: 65536 B: iteration 3/10 (30 %), 300000 operations "
        );
        let done = p
            .line(8, 10, 64, Plan::Iterations(10), Duration::ZERO)
            .unwrap();
        assert!(done.contains("10/10 (100 %)"), "{done}");
    }

    #[test]
    fn a_timed_run_shows_its_time_never_past_the_end() {
        let p = Progress::new("gni-write-bw", true);
        let l = p
            .line(
                4096,
                7,
                256,
                Plan::Duration(Duration::from_secs(5)),
                Duration::from_millis(5200),
            )
            .unwrap();
        assert_eq!(l, "\rgni-write-bw: 4096 B: 5.0/5.0 s, 1792 operations ");
    }
}
