//! Why an instance stopped, or why the engine says it fails: the
//! [`Reason`] an event carries, with its [`Outcome`] and [`Signal`].

use std::fmt;
use std::sync::Arc;

/// How a stop came about (every [`Stopped`](crate::EventKind::Stopped)
/// says it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// It ended by itself with success, and the engine will not start it
    /// again.
    Completed,
    /// It ended by itself otherwise (a nonzero exit, an OOM kill, a signal
    /// nobody asked for; or it succeeded and the engine starts it again),
    /// or the engine gave up on it.
    Failed,
    /// It was stopped on request: `docker stop`/`kill`, compose `down`,
    /// scaled to 0, the engine's own shutdown. Never `Failed`, whatever its
    /// exit code.
    Stopped,
}

impl Outcome {
    /// The lowercase name: `completed`, `failed`, `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }

    /// The outcome named by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "stopped" => Self::Stopped,
            _ => return None,
        })
    }

    /// The outcome of a process that ended by itself with `exit_code`: a
    /// success the engine will not start again is `Completed`, anything
    /// else `Failed`.
    pub fn of_exit(exit_code: i32, restarting: bool) -> Self {
        if exit_code == 0 && !restarting {
            Self::Completed
        } else {
            Self::Failed
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Linux signal by its number, told by its name (`SIGKILL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(u8);

/// The names of signals 1 to 31 (x86-64 and arm64 Linux).
const NAMES: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// The highest signal number (`SIGRTMAX` on Linux).
const MAX: u8 = 64;

impl Signal {
    /// `SIGKILL`.
    pub const KILL: Self = Self(9);
    /// `SIGTERM`.
    pub const TERM: Self = Self(15);

    /// Signal `number` (1 to 64).
    pub fn new(number: u8) -> Option<Self> {
        (1..=MAX).contains(&number).then_some(Self(number))
    }

    /// The signal that ended a container's process, from the exit code the
    /// engine reports for it (`128 + n`, as Docker, Podman and the kubelet
    /// report a process killed by signal `n`).
    pub fn from_exit_code(exit_code: i32) -> Option<Self> {
        u8::try_from(exit_code.checked_sub(128)?)
            .ok()
            .and_then(Self::new)
    }

    /// The signal a name gives: `SIGKILL`, `KILL`, `9`, `SIG40`.
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.trim();
        let bare = name.strip_prefix("SIG").unwrap_or(name);
        if let Ok(n) = bare.parse::<u8>() {
            return Self::new(n);
        }
        let pos = NAMES
            .iter()
            .position(|n| n[3..].eq_ignore_ascii_case(bare))?;
        Self::new(u8::try_from(pos + 1).ok()?)
    }

    /// The number.
    pub fn number(self) -> u8 {
        self.0
    }

    /// The name: `SIGKILL`; above 31 (the real-time signals), `SIG` and
    /// the number (`SIG40`).
    pub fn name(self) -> String {
        match NAMES.get(usize::from(self.0) - 1) {
            Some(name) => (*name).to_owned(),
            None => format!("SIG{}", self.0),
        }
    }

    /// Whether a process that receives it stops unless it handles it
    /// (`SIGTERM`, `SIGINT`, `SIGQUIT`, `SIGKILL`): the signals engines stop
    /// with.
    pub fn stops(self) -> bool {
        matches!(self.0, 2 | 3 | 9 | 15)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Why an instance stopped, or why the engine says the running instance
/// fails: what the engine said, never guessed.
///
/// On a [`Stopped`](crate::EventKind::Stopped) it carries the
/// [`outcome`](Self::outcome); on a [`Failing`](crate::EventKind::Failing),
/// the engine's [`message`](Self::message). Made with [`Reason::stop`] or
/// [`Reason::failing`] and the setters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Reason {
    /// How the stop came about (on a stop).
    pub outcome: Option<Outcome>,
    /// The process's exit code, when the engine says it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when the engine says it (or its exit code,
    /// `128 + n`).
    pub signal: Option<Signal>,
    /// The kernel's OOM killer ended it.
    pub oom: bool,
    /// The engine will start it again, by its restart policy.
    pub restarting: bool,
    /// The engine has given up on it (a failing instance: a Deployment past
    /// its progress deadline, a resource kstatus calls `Failed`).
    pub failed: bool,
    /// The engine's own words: a failing check's output, a task's error, a
    /// condition's message. At most [`MAX_MESSAGE`] bytes.
    pub message: Option<Arc<str>>,
}

/// The longest [`Reason::message`] kept, in bytes: a longer one is cut at a
/// character boundary and ends with `…`.
pub const MAX_MESSAGE: usize = 1024;

impl Reason {
    /// The reason of a stop with this outcome.
    pub fn stop(outcome: Outcome) -> Self {
        Self {
            outcome: Some(outcome),
            ..Self::default()
        }
    }

    /// The reason of a process that ended by itself with `exit_code`:
    /// [`Outcome::of_exit`], and the signal its code tells.
    pub fn exited(exit_code: i32, restarting: bool) -> Self {
        Self {
            outcome: Some(Outcome::of_exit(exit_code, restarting)),
            exit_code: Some(exit_code),
            signal: Signal::from_exit_code(exit_code),
            restarting,
            ..Self::default()
        }
    }

    /// The reason of a failing instance: the engine's `message`.
    pub fn failing(message: &str) -> Self {
        Self::default().message(Some(message))
    }

    /// Sets [`outcome`](Self::outcome).
    #[must_use]
    pub fn outcome(mut self, outcome: Option<Outcome>) -> Self {
        self.outcome = outcome;
        self
    }

    /// Sets [`exit_code`](Self::exit_code), and [`signal`](Self::signal)
    /// from it when not set.
    #[must_use]
    pub fn exit_code(mut self, exit_code: Option<i32>) -> Self {
        self.exit_code = exit_code;
        if self.signal.is_none() {
            self.signal = exit_code.and_then(Signal::from_exit_code);
        }
        self
    }

    /// Sets [`signal`](Self::signal).
    #[must_use]
    pub fn signal(mut self, signal: Option<Signal>) -> Self {
        self.signal = signal;
        self
    }

    /// Sets [`oom`](Self::oom).
    #[must_use]
    pub fn oom(mut self, oom: bool) -> Self {
        self.oom = oom;
        self
    }

    /// Sets [`restarting`](Self::restarting).
    #[must_use]
    pub fn restarting(mut self, restarting: bool) -> Self {
        self.restarting = restarting;
        self
    }

    /// Sets [`failed`](Self::failed).
    #[must_use]
    pub fn failed(mut self, failed: bool) -> Self {
        self.failed = failed;
        self
    }

    /// Sets [`message`](Self::message): trimmed, `None` when empty, cut to
    /// [`MAX_MESSAGE`] bytes.
    #[must_use]
    pub fn message(mut self, message: Option<&str>) -> Self {
        self.message = message.map(str::trim).filter(|m| !m.is_empty()).map(cap);
        self
    }

    /// The outcome as a requested stop tells it: never `Failed`.
    #[must_use]
    pub(crate) fn requested(mut self) -> Self {
        if self.outcome != Some(Outcome::Stopped) {
            self.outcome = Some(Outcome::Stopped);
            self.restarting = false;
        }
        self
    }
}

/// `message`, cut to at most [`MAX_MESSAGE`] bytes at a character boundary.
fn cap(message: &str) -> Arc<str> {
    const ELLIPSIS: &str = "…";
    if message.len() <= MAX_MESSAGE {
        return Arc::from(message);
    }
    let mut end = MAX_MESSAGE - ELLIPSIS.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Arc::from(format!("{}{ELLIPSIS}", message[..end].trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_exit_code_and_name() {
        assert_eq!(Signal::from_exit_code(137), Some(Signal::KILL));
        assert_eq!(
            Signal::from_exit_code(143).map(Signal::name).as_deref(),
            Some("SIGTERM")
        );
        assert_eq!(
            Signal::from_exit_code(139).map(Signal::name).as_deref(),
            Some("SIGSEGV")
        );
        assert_eq!(Signal::from_exit_code(128), None);
        assert_eq!(Signal::from_exit_code(3), None);
        assert_eq!(Signal::from_exit_code(255), None);
        assert_eq!(Signal::from_exit_code(-1), None);
        for n in 1..=64 {
            let s = Signal::new(n).expect("1 to 64");
            assert_eq!(Signal::from_name(&s.name()), Some(s), "{s}");
        }
        assert_eq!(Signal::from_name("kill"), Some(Signal::KILL));
        assert_eq!(Signal::from_name("15"), Some(Signal::TERM));
        assert_eq!(Signal::from_name("SIGNOPE"), None);
        assert!(Signal::TERM.stops() && Signal::KILL.stops());
        assert!(!Signal::from_name("SIGHUP").expect("a name").stops());
    }

    #[test]
    fn outcomes_of_exits() {
        assert_eq!(Reason::exited(0, false).outcome, Some(Outcome::Completed));
        assert_eq!(Reason::exited(0, true).outcome, Some(Outcome::Failed));
        let r = Reason::exited(137, false);
        assert_eq!(
            (r.outcome, r.signal),
            (Some(Outcome::Failed), Some(Signal::KILL))
        );
        let r = r.restarting(true).requested();
        assert_eq!((r.outcome, r.restarting), (Some(Outcome::Stopped), false));
        for o in [Outcome::Completed, Outcome::Failed, Outcome::Stopped] {
            assert_eq!(Outcome::from_name(o.as_str()), Some(o));
        }
    }

    #[test]
    fn messages_are_trimmed_and_capped() {
        assert_eq!(Reason::failing("  \n").message, None);
        assert_eq!(Reason::failing(" no \n").message.as_deref(), Some("no"));
        let long = "é".repeat(MAX_MESSAGE);
        let m = Reason::failing(&long).message.expect("a message");
        assert!(m.len() <= MAX_MESSAGE, "{}", m.len());
        assert!(m.ends_with('…') && m.starts_with("éé"));
        let exact = "a".repeat(MAX_MESSAGE);
        assert_eq!(
            Reason::failing(&exact).message.as_deref(),
            Some(exact.as_str())
        );
    }
}
