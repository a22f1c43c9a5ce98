//! `--notify CMD` (and `--exec CMD`): a command given as one string, split
//! into argv as a shell would split words (quotes, backslashes), run
//! without a shell (`sh -c '…'` when one is wanted), its stdin as given,
//! its stdout and stderr captured: lookout's stdout carries events only.
//! What it said on stderr and how it exited are said on lookout's stderr.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// The longest a command may run: then it is killed (and counts as failed).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a command's stderr said.
const MAX_SAID: usize = 4096;

/// A command's argv, split as a shell splits words; `Err` when it is empty
/// or its quotes are not closed.
pub fn parse_command(arg: &str) -> Result<Vec<String>, String> {
    let argv = shell_words::split(arg).map_err(|e| format!("`{arg}`: {e}"))?;
    if argv.is_empty() {
        return Err("an empty command".to_owned());
    }
    Ok(argv)
}

/// How a command ended.
#[derive(Debug)]
pub struct Ran {
    /// `None`: it did not start, or was killed after [`COMMAND_TIMEOUT`].
    pub status: Option<ExitStatus>,
    /// What it said on stderr (at most 4 KiB), or why it did not run.
    pub said: String,
}

impl Ran {
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// `exit 0`, `exit 1: what it said`, `killed by signal 9`, `did not run: …`.
    pub fn describe(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        let how = match self.status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                (None, None) => s.to_string(),
            },
            None => return self.said.clone(),
        };
        let said = self.said.trim();
        if said.is_empty() {
            how
        } else {
            format!("{how}: {said}")
        }
    }
}

/// Runs `argv` with `stdin` on its standard input, within
/// [`COMMAND_TIMEOUT`].
pub async fn run(argv: &[String], stdin: Option<&[u8]>) -> Ran {
    let Some((program, rest)) = argv.split_first() else {
        return Ran {
            status: None,
            said: "did not run: an empty command".to_owned(),
        };
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                status: None,
                said: format!("did not run: {program}: {e}"),
            };
        }
    };
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A command that does not read its stdin is no failure of ours.
        let _ = pipe.write_all(bytes).await;
        drop(pipe);
    }
    match tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            let mut said = String::from_utf8_lossy(&out.stderr).into_owned();
            if said.len() > MAX_SAID {
                let mut cut = MAX_SAID;
                while !said.is_char_boundary(cut) {
                    cut -= 1;
                }
                said.truncate(cut);
                said.push('…');
            }
            Ran {
                status: Some(out.status),
                said,
            }
        }
        Ok(Err(e)) => Ran {
            status: None,
            said: format!("did not finish: {e}"),
        },
        // Dropped: `kill_on_drop` kills it.
        Err(_) => Ran {
            status: None,
            said: format!("killed after {COMMAND_TIMEOUT:?}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_a_shell_without_one() {
        assert_eq!(
            parse_command(r#"nginx -s reload -c "/etc/my nginx.conf""#),
            Ok(vec![
                "nginx".to_owned(),
                "-s".to_owned(),
                "reload".to_owned(),
                "-c".to_owned(),
                "/etc/my nginx.conf".to_owned()
            ])
        );
        assert!(parse_command("").is_err());
        assert!(parse_command("a 'b").is_err());
    }

    #[tokio::test]
    async fn says_its_exit_and_stderr() {
        let argv = parse_command("sh -c 'cat >&2; exit 3'").expect("argv");
        let ran = run(&argv, Some(b"hello")).await;
        assert!(!ran.succeeded());
        assert_eq!(ran.describe(), "exit 3: hello");
        let ran = run(&["/nonexistent/x".to_owned()], None).await;
        assert!(
            ran.describe().starts_with("did not run"),
            "{}",
            ran.describe()
        );
    }
}
