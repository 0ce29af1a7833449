//! Where the ranks of a job run: `--hosts h1,h2:4,...` (hydra's syntax: a host name and
//! optionally its number of slots, 1 when left out), and how a rank is started on a host
//! that is not this one: through `ssh` (or whatever `--launcher-exec` names, called as
//! `PROGRAM HOST COMMAND...`), like hydra's `-launcher ssh` / `-launcher-exec`.
//!
//! Placement follows hydra's default: the hosts' slots are filled in order, and when every
//! slot is taken the list starts over, so `--hosts a:2,b:2 -n 6` places ranks 0, 1, 4, 5 on
//! `a` and 2, 3 on `b`.
//!
//! A rank on another host gets its environment on its command line (`env K=V ... PROGRAM`),
//! since ssh does not pass the launcher's environment; with `ssh` the words are quoted for
//! the remote shell, with `exec` they are passed as they are (a program like
//! `ip netns exec` runs them without a shell).

#![forbid(unsafe_code)]

use crate::error::JobError;

/// The most slots one `--hosts` entry may give.
pub const MAX_SLOTS: u32 = 4096;

/// One entry of `--hosts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Its name, as the launcher program takes it.
    pub name: String,
    /// How many ranks it takes per round.
    pub slots: u32,
}

/// Parse `h1,h2:4,...`.
pub fn parse(list: &str) -> Result<Vec<Host>, JobError> {
    let bad = |why: String| JobError::Invalid(format!("--hosts {list:?}: {why}"));
    let mut hosts = Vec::new();
    for entry in list.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(bad("an empty host name".into()));
        }
        let (name, slots) = match entry.rsplit_once(':') {
            Some((name, n)) => {
                let slots = n
                    .parse::<u32>()
                    .ok()
                    .filter(|s| (1..=MAX_SLOTS).contains(s))
                    .ok_or_else(|| {
                        bad(format!(
                            "{entry:?}: the number of slots must be between 1 and {MAX_SLOTS}"
                        ))
                    })?;
                (name, slots)
            }
            None => (entry, 1),
        };
        if name.is_empty() || name.starts_with('-') || name.contains(char::is_whitespace) {
            return Err(bad(format!("{name:?} is not a host name")));
        }
        hosts.push(Host {
            name: name.to_string(),
            slots,
        });
    }
    Ok(hosts)
}

/// The host of each of `ranks` ranks (an index into `hosts`), hydra's round-robin by slots.
pub fn place(hosts: &[Host], ranks: u32) -> Vec<usize> {
    let mut out = Vec::with_capacity(ranks as usize);
    'fill: loop {
        for (i, h) in hosts.iter().enumerate() {
            for _ in 0..h.slots {
                if out.len() == ranks as usize {
                    break 'fill;
                }
                out.push(i);
            }
        }
        if hosts.is_empty() {
            break;
        }
    }
    out
}

/// How ranks on other hosts are started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `PROGRAM HOST 'quoted words'...`: a remote shell (`ssh` by default).
    Ssh(Vec<String>),
    /// `PROGRAM HOST words...`: a program that runs the words without a shell.
    Exec(Vec<String>),
}

impl Launcher {
    /// From `--launcher ssh|exec` and `--launcher-exec "PROGRAM ARGS"`.
    pub fn new(kind: &str, exec: Option<&str>) -> Result<Launcher, JobError> {
        let words: Option<Vec<String>> =
            exec.map(|e| e.split_whitespace().map(str::to_string).collect());
        if words.as_ref().is_some_and(Vec::is_empty) {
            return Err(JobError::Invalid(
                "--launcher-exec: no program given".into(),
            ));
        }
        match kind {
            "ssh" => Ok(Launcher::Ssh(words.unwrap_or_else(|| vec!["ssh".into()]))),
            "exec" => words.map(Launcher::Exec).ok_or_else(|| {
                JobError::Invalid(
                    "--launcher exec needs --launcher-exec PROGRAM (run as PROGRAM HOST COMMAND...)"
                        .into(),
                )
            }),
            other => Err(JobError::Invalid(format!(
                "--launcher {other}: expected ssh or exec"
            ))),
        }
    }

    /// The program and arguments that start `command` with `env` on `host`.
    pub fn argv(&self, host: &str, env: &[(String, String)], command: &[String]) -> Vec<String> {
        let (prefix, quote) = match self {
            Launcher::Ssh(p) => (p, true),
            Launcher::Exec(p) => (p, false),
        };
        let mut words: Vec<String> = vec!["env".into()];
        words.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        words.extend(command.iter().cloned());
        let mut argv = prefix.clone();
        argv.push(host.to_string());
        if quote {
            argv.extend(words.iter().map(|w| shell_quote(w)));
        } else {
            argv.extend(words);
        }
        argv
    }
}

/// `word` as one word of a POSIX shell command line.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Whether `name` is this host (its ranks are started directly): `localhost`, a loopback
/// address, or this host's name.
pub fn is_this_host(name: &str) -> bool {
    if name == "localhost" || name.starts_with("127.") || name == "::1" {
        return true;
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname").is_ok_and(|h| h.trim() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_parse_with_and_without_slots() {
        assert_eq!(
            parse("a,b:3").unwrap(),
            vec![
                Host {
                    name: "a".into(),
                    slots: 1
                },
                Host {
                    name: "b".into(),
                    slots: 3
                }
            ]
        );
        for bad in ["", "a,,b", "a:0", "a:x", "-a", "a b", ":2"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("--hosts"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn placement_fills_slots_then_starts_over() {
        let hosts = parse("a:2,b:2").unwrap();
        assert_eq!(place(&hosts, 6), vec![0, 0, 1, 1, 0, 0]);
        assert_eq!(place(&parse("a,b").unwrap(), 3), vec![0, 1, 0]);
        assert!(place(&[], 3).is_empty());
    }

    #[test]
    fn ssh_quotes_for_the_remote_shell_and_exec_does_not() {
        let env = vec![("K".into(), "a b".into())];
        let cmd = vec!["/bin/prog".into(), "it's".into()];
        let ssh = Launcher::new("ssh", None).unwrap();
        assert_eq!(
            ssh.argv("h", &env, &cmd),
            ["ssh", "h", "env", "'K=a b'", "/bin/prog", r"'it'\''s'"]
        );
        let exec = Launcher::new("exec", Some("ip netns exec")).unwrap();
        assert_eq!(
            exec.argv("ns1", &env, &cmd),
            [
                "ip",
                "netns",
                "exec",
                "ns1",
                "env",
                "K=a b",
                "/bin/prog",
                "it's"
            ]
        );
        assert!(Launcher::new("exec", None).is_err());
        assert!(Launcher::new("rsh", None).is_err());
        assert!(Launcher::new("ssh", Some("  ")).is_err());
    }
}
