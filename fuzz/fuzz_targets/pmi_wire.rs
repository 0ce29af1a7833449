//! Arbitrary lines of the PMI-1 wire protocol, as the launcher's server reads requests and
//! the MPI library's client reads replies (both parse with `pmi::wire::Message`), and
//! the values the client interprets (`PMI_process_mapping`, hex business cards).
//!
//! Input: text, one message per line (at most 64 lines). The first line's first 8 bytes,
//! if any, also give the rank and size a mapping is evaluated for.
//!
//! Parsing must never panic or hang. A line that parses must format back (unless a value
//! holds characters that cannot travel) to a line that parses to the same message; a
//! process mapping that places the rank must give a local index below a local size of at
//! most the job's size; a hex value must decode and encode back; a squeezed text must be
//! sendable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pmi::local_of;
use pmi::wire::{Message, WireError, hex_decode, hex_encode, squeeze};

fuzz_target!(|data: &[u8]| {
    let mut b = nicemu_fuzz::Bytes(data);
    let rank = b.u32();
    let size = b.u32();
    for line in data.split(|&c| c == b'\n').take(64) {
        let Ok(msg) = Message::parse(line) else {
            continue;
        };
        let _ = msg.rc();
        match msg.format() {
            Ok(text) => {
                assert!(text.ends_with('\n') && text.matches('\n').count() == 1);
                assert_eq!(
                    Message::parse(text.as_bytes()).as_ref(),
                    Ok(&msg),
                    "{text:?} parses back to the message it came from"
                );
            }
            Err(e) => assert!(
                matches!(e, WireError::Unsendable { .. }),
                "a parsed line fails to format only for a field that cannot travel: {e}"
            ),
        }
        for (_, v) in msg.fields() {
            if let Some((local_size, local_index)) = local_of(v, rank, size) {
                assert!(
                    local_index < local_size && local_size <= size && rank < size,
                    "{v:?} for rank {rank} of {size}: local {local_index} of {local_size}"
                );
            }
            if let Some(bytes) = hex_decode(v) {
                assert_eq!(hex_encode(&bytes), v.to_ascii_lowercase());
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let s = squeeze(text);
        assert!(
            Message::new("abort").with("msg", &s).format().is_ok(),
            "{s:?} can be sent"
        );
    }
});
