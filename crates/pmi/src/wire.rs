//! The PMI-1 "simple" line protocol, both directions: one message per line,
//! `cmd=<name> key=value key=value…\n`.
//!
//! Facts from MPICH's `simple_pmi.c` and hydra's `pmiserv` (v4.0.2): tokens are separated by
//! spaces and split at their first `=`; values may not contain spaces or newlines; the client's
//! line limit is 1024 bytes ([`MAX_REQUEST_LINE`]); replies are to be read as an unordered set
//! of fields, while hydra 4.0.2 reads `cmd=init`'s fields by position, so a [`Message`] keeps the
//! order it was built in. The multi-line `mcmd=spawn` form is not supported.
//!
//! Parsing never panics: every malformed line is a [`WireError`] saying what is wrong.

use std::fmt;

use thiserror::Error;

/// The longest request line (newline included) a PMI-1 peer is sure to accept:
/// `PMIU_MAXLINE` of MPICH's simple PMI client.
pub const MAX_REQUEST_LINE: usize = 1024;

/// The longest line this implementation reads before calling the peer broken. Replies may be
/// longer than [`MAX_REQUEST_LINE`] (a `get_result` carries a value of up to `vallen_max`
/// bytes plus its fields), so the cap is generous.
pub const MAX_READ_LINE: usize = 64 * 1024;

/// What is wrong with a line.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    /// The line is empty (or only spaces).
    #[error("empty PMI line")]
    Empty,
    /// The line is not valid UTF-8.
    #[error("PMI line is not UTF-8 text")]
    NotText,
    /// The first token is not `cmd=<name>`.
    #[error("PMI line does not start with cmd=<name>: {0:?}")]
    NoCommand(String),
    /// A multi-line `mcmd=` command (spawn), which this implementation does not handle.
    #[error("multi-line PMI commands (mcmd=…) are not supported: {0:?}")]
    MultiLine(String),
    /// A token without `=`, or with an empty key.
    #[error("PMI token {token:?} is not key=value (line {line:?})")]
    BadToken {
        /// The token.
        token: String,
        /// The whole line.
        line: String,
    },
    /// The same key twice in one line.
    #[error("PMI key {key:?} appears twice (line {line:?})")]
    DuplicateKey {
        /// The key.
        key: String,
        /// The whole line.
        line: String,
    },
    /// A key or value that cannot be sent (space, newline, `=` in a key, empty key…).
    #[error("cannot send PMI field {key:?}={value:?}: {reason}")]
    Unsendable {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// The line is longer than the limit.
    #[error("PMI line of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// One PMI-1 message: a command and its fields, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    cmd: String,
    fields: Vec<(String, String)>,
}

impl Message {
    /// `cmd=<cmd>` with no fields.
    pub fn new(cmd: &str) -> Self {
        Message {
            cmd: cmd.to_string(),
            fields: Vec::new(),
        }
    }

    /// This message with `key=value` appended.
    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Self {
        self.fields.push((key.to_string(), value.to_string()));
        self
    }

    /// The command name.
    pub fn cmd(&self) -> &str {
        &self.cmd
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The `rc` field as a number: absent means success (hydra 4.0.2 sends none on some
    /// replies), a value that is not a number is an error.
    pub fn rc(&self) -> std::result::Result<i64, String> {
        match self.get("rc") {
            None => Ok(0),
            Some(v) => v
                .parse()
                .map_err(|_| format!("reply {:?} has a non-numeric rc={v:?}", self.cmd)),
        }
    }

    /// The line, newline included. Fails if a key or value cannot travel (see [`WireError`]).
    pub fn format(&self) -> Result<String, WireError> {
        check_field("cmd", &self.cmd)?;
        if self.cmd.is_empty() {
            return Err(WireError::Unsendable {
                key: "cmd".into(),
                value: String::new(),
                reason: "the command name is empty",
            });
        }
        let mut line = format!("cmd={}", self.cmd);
        for (k, v) in &self.fields {
            check_field(k, v)?;
            line.push(' ');
            line.push_str(k);
            line.push('=');
            line.push_str(v);
        }
        line.push('\n');
        Ok(line)
    }

    /// Parse one line (with or without its trailing newline).
    pub fn parse(raw: &[u8]) -> Result<Message, WireError> {
        if raw.len() > MAX_READ_LINE {
            return Err(WireError::TooLong {
                len: raw.len(),
                max: MAX_READ_LINE,
            });
        }
        let text = std::str::from_utf8(raw).map_err(|_| WireError::NotText)?;
        let line = text.strip_suffix('\n').unwrap_or(text);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let mut tokens = line.split(' ').filter(|t| !t.is_empty());
        let first = tokens.next().ok_or(WireError::Empty)?;
        if first.starts_with("mcmd=") {
            return Err(WireError::MultiLine(line.to_string()));
        }
        let cmd = match first.split_once('=') {
            Some(("cmd", name)) if !name.is_empty() => name,
            _ => return Err(WireError::NoCommand(line.to_string())),
        };
        let mut msg = Message::new(cmd);
        for token in tokens {
            let (k, v) = match token.split_once('=') {
                Some((k, v)) if !k.is_empty() => (k, v),
                _ => {
                    return Err(WireError::BadToken {
                        token: token.to_string(),
                        line: line.to_string(),
                    });
                }
            };
            if k == "cmd" || msg.get(k).is_some() {
                return Err(WireError::DuplicateKey {
                    key: k.to_string(),
                    line: line.to_string(),
                });
            }
            msg.fields.push((k.to_string(), v.to_string()));
        }
        Ok(msg)
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cmd={}", self.cmd)?;
        for (k, v) in &self.fields {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

fn check_field(key: &str, value: &str) -> Result<(), WireError> {
    let bad = |reason| {
        Err(WireError::Unsendable {
            key: key.to_string(),
            value: value.to_string(),
            reason,
        })
    };
    if key.is_empty() {
        return bad("the key is empty");
    }
    if key.contains('=') {
        return bad("a key may not contain '='");
    }
    if key.chars().chain(value.chars()).any(char::is_whitespace) {
        return bad("keys and values may not contain spaces or newlines");
    }
    if key.chars().chain(value.chars()).any(char::is_control) {
        return bad("keys and values may not contain control characters");
    }
    Ok(())
}

/// Lower-case hex of `bytes` (MPICH hex-encodes its binary business cards the same way).
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// The bytes of a hex string (either case), or `None` if it is not hex.
pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect()
}

/// A text that may contain spaces (an abort reason) squeezed into one value: whitespace
/// becomes `_`, control characters are dropped. Lossy, for messages meant for people.
pub fn squeeze(text: &str) -> String {
    let s: String = text
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if s.is_empty() { "-".to_string() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_field_order() {
        let m = Message::new("init")
            .with("pmi_version", 1)
            .with("pmi_subversion", 1);
        let line = m.format().unwrap();
        assert_eq!(line, "cmd=init pmi_version=1 pmi_subversion=1\n");
        assert_eq!(Message::parse(line.as_bytes()).unwrap(), m);
    }

    #[test]
    fn parses_hydra_replies_as_published() {
        // Replies copied from the transcript of a hydra 4.0.2 job (docs/launch.md).
        let r =
            Message::parse(b"cmd=get_result rc=0 msg=success value=(vector,(0,1,1))\n").unwrap();
        assert_eq!(r.cmd(), "get_result");
        assert_eq!(r.rc(), Ok(0));
        assert_eq!(r.get("value"), Some("(vector,(0,1,1))"));
        let r = Message::parse(b"cmd=get_result rc=-1 msg=key_x_not_found value=unknown").unwrap();
        assert_eq!(r.rc(), Ok(-1));
        // A value may contain '=': the token splits at the first one.
        let r = Message::parse(b"cmd=get_result rc=0 value=a=b=c").unwrap();
        assert_eq!(r.get("value"), Some("a=b=c"));
        // An empty value is a value.
        let r = Message::parse(b"cmd=put_result rc=0 msg=").unwrap();
        assert_eq!(r.get("msg"), Some(""));
        // No rc: success (hydra's barrier_out).
        assert_eq!(Message::parse(b"cmd=barrier_out").unwrap().rc(), Ok(0));
        // CR-LF and doubled spaces are tolerated.
        let r = Message::parse(b"cmd=maxes  vallen_max=1024\r\n").unwrap();
        assert_eq!(r.get("vallen_max"), Some("1024"));
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        assert_eq!(Message::parse(b""), Err(WireError::Empty));
        assert_eq!(Message::parse(b"   \n"), Err(WireError::Empty));
        assert_eq!(Message::parse(b"\xff\xfe"), Err(WireError::NotText));
        assert!(matches!(
            Message::parse(b"hello world"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            Message::parse(b"cmd= rc=0"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            Message::parse(b"mcmd=spawn\n"),
            Err(WireError::MultiLine(_))
        ));
        assert!(matches!(
            Message::parse(b"cmd=put key"),
            Err(WireError::BadToken { .. })
        ));
        assert!(matches!(
            Message::parse(b"cmd=put =v"),
            Err(WireError::BadToken { .. })
        ));
        assert!(matches!(
            Message::parse(b"cmd=put k=1 k=2"),
            Err(WireError::DuplicateKey { .. })
        ));
        assert!(matches!(
            Message::parse(b"cmd=put cmd=2"),
            Err(WireError::DuplicateKey { .. })
        ));
        let long = vec![b'x'; MAX_READ_LINE + 1];
        assert!(matches!(
            Message::parse(&long),
            Err(WireError::TooLong { .. })
        ));
        // The error says what is wrong.
        let e = Message::parse(b"cmd=put key").unwrap_err().to_string();
        assert!(e.contains("\"key\"") && e.contains("key=value"), "{e}");
    }

    #[test]
    fn unsendable_fields_are_refused() {
        for (k, v) in [
            ("key", "a b"),
            ("key", "a\nb"),
            ("k=y", "v"),
            ("", "v"),
            ("key", "a\u{7}b"),
        ] {
            let e = Message::new("put").with(k, v).format().unwrap_err();
            assert!(matches!(e, WireError::Unsendable { .. }), "{k:?}={v:?}");
        }
        assert!(Message::new("").format().is_err());
        assert!(Message::new("a b").format().is_err());
    }

    #[test]
    fn hex_round_trip_and_bad_hex() {
        let bytes: Vec<u8> = (0..=255).collect();
        let h = hex_encode(&bytes);
        assert_eq!(&h[..8], "00010203");
        assert_eq!(hex_decode(&h).unwrap(), bytes);
        assert_eq!(hex_decode("2F6465"), Some(vec![0x2f, 0x64, 0x65]));
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("zz"), None);
        assert_eq!(hex_decode("+1"), None);
        assert_eq!(hex_decode(""), Some(vec![]));
    }

    #[test]
    fn squeeze_makes_one_token() {
        assert_eq!(
            squeeze("rank 2: out of\tmemory\n"),
            "rank_2:_out_of_memory_"
        );
        assert_eq!(squeeze(""), "-");
        let m = Message::new("abort").with("msg", squeeze("a b\u{1}c"));
        assert_eq!(m.format().unwrap(), "cmd=abort msg=a_bc\n");
    }
}
