//! A rank's output, forwarded to the launcher's stdout or stderr a line at a time (so the
//! lines of different ranks do not mix), each line prefixed with the rank's label when the
//! job is labelled (`-l`). A line is held back only up to [`MAX_LINE`] bytes: a rank that
//! writes a longer line (or megabytes without a newline) has it forwarded in pieces of that
//! size as they come, so the launcher's memory stays bounded whatever the ranks print. With a
//! label each piece is a labelled line of its own; without one the pieces are passed through
//! unchanged.

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::sync::{Arc, Mutex, PoisonError};

/// Where forwarded output goes (the launcher's stdout or stderr, or a buffer in tests).
pub type Sink = Arc<Mutex<dyn Write + Send>>;

/// The longest line held back before it is forwarded in pieces.
pub const MAX_LINE: usize = 64 << 10;

/// Forward `stream` to `sink` until it ends. `label` (e.g. `[3] `) starts every line, or
/// nothing. Once `sink` fails (the launcher's own output was closed), the rest of the stream
/// is still read and dropped, so that the rank does not block on a full pipe.
pub fn forward(stream: impl Read, sink: &Sink, label: &str) {
    let mut reader = BufReader::with_capacity(MAX_LINE, stream);
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut open = true;
    loop {
        let buf = match reader.fill_buf() {
            Ok([]) => break,
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let room = MAX_LINE - line.len();
        let (take, whole) = match buf.iter().take(room).position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len().min(room), false),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if whole || line.len() == MAX_LINE {
            if open {
                open = emit(sink, label, &line, whole || !label.is_empty());
            }
            line.clear();
        }
    }
    // The last line, also without its newline.
    if !line.is_empty() && open {
        emit(sink, label, &line, true);
    }
}

/// Write `label`, `bytes` and, when `end_line` asks for it, a newline if `bytes` lack one;
/// `false` once the sink fails.
fn emit(sink: &Sink, label: &str, bytes: &[u8], end_line: bool) -> bool {
    let mut w = sink.lock().unwrap_or_else(PoisonError::into_inner);
    let newline = end_line && bytes.last() != Some(&b'\n');
    w.write_all(label.as_bytes())
        .and_then(|()| w.write_all(bytes))
        .and_then(|()| if newline { w.write_all(b"\n") } else { Ok(()) })
        .and_then(|()| w.flush())
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A sink that records every write.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// `n` bytes of `x` with no newline, produced as they are read (never held whole).
    struct NoNewline(usize);

    impl Read for NoNewline {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.0);
            buf[..n].fill(b'x');
            self.0 -= n;
            Ok(n)
        }
    }

    fn run(input: impl Read, label: &str) -> (Vec<Vec<u8>>, Vec<u8>) {
        let w = Writes::default();
        let sink: Sink = Arc::new(Mutex::new(w.clone()));
        forward(input, &sink, label);
        let writes = w.0.lock().unwrap().clone();
        let all = writes.concat();
        (writes, all)
    }

    #[test]
    fn lines_are_forwarded_whole_and_labelled() {
        let (_, all) = run(&b"one\ntwo\nlast"[..], "[1] ");
        assert_eq!(all, b"[1] one\n[1] two\n[1] last\n");
        let (_, all) = run(&b"a\n\nb\n"[..], "");
        assert_eq!(all, b"a\n\nb\n");
    }

    #[test]
    fn a_line_without_end_goes_in_bounded_pieces() {
        // 4 MiB and a bit without a newline: never more than MAX_LINE held or written at once.
        let len = (4 << 20) + 5;
        let (writes, all) = run(NoNewline(len), "");
        assert!(
            writes.iter().all(|w| w.len() <= MAX_LINE),
            "a write above the limit"
        );
        assert_eq!(
            all.len(),
            len + 1,
            "the bytes, and the newline ending the output"
        );
        assert!(all[..len].iter().all(|&b| b == b'x'));
        // Labelled: every piece is a labelled line of its own.
        let (_, all) = run(NoNewline(3 * MAX_LINE + 1), "[0] ");
        let text = String::from_utf8(all).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines.iter().all(|l| l.starts_with("[0] x")));
        assert_eq!(lines[3], "[0] x");
    }
}
