//! An event's detail as `lookout` prints it: why (its [`Reason`]) and the
//! engine's readiness detail, as JSON fields and as the text output's
//! short reason column.

use lookout_core::{Readiness, Reason};
use serde::Serialize;

/// Why (issue #47), as JSON fields of an event or an instance, each only
/// when the engine said it: `outcome` (`completed`, `failed`, `stopped`),
/// `exit_code`, `signal` (`SIGKILL`), `oom`, `restarting` and `failed`
/// (only when true), `message` (the engine's words, at most 1 KiB).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ReasonJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    oom: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    restarting: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    failed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

impl<'a> ReasonJson<'a> {
    pub fn new(r: Option<&'a Reason>) -> Option<Self> {
        let r = r?;
        Some(Self {
            outcome: r.outcome.map(lookout_core::Outcome::as_str),
            exit_code: r.exit_code,
            signal: r.signal.map(lookout_core::Signal::name),
            oom: r.oom,
            restarting: r.restarting,
            failed: r.failed,
            message: r.message.as_deref(),
        })
    }
}

/// The widest reason column of a text line, in characters (a longer
/// message is cut, with `…`).
pub const REASON_WIDTH: usize = 72;

/// A reason as the short column of a text line: the outcome, the signal
/// (else the exit code, but for a completion's 0), `oom`, `restarting`,
/// `failed` (an engine that gave up, unless the outcome says it), then the
/// engine's message after `: `, on one line, at most [`REASON_WIDTH`]
/// characters: `failed exit 3`, `failed SIGKILL oom`, `completed`,
/// `failed exit 1 restarting`, `Readiness probe failed: …`.
pub fn reason_text(r: &Reason) -> String {
    use lookout_core::Outcome;
    let mut parts: Vec<String> = Vec::new();
    if let Some(o) = r.outcome {
        parts.push(o.as_str().to_owned());
    }
    match (r.signal, r.exit_code) {
        (Some(s), _) => parts.push(s.name()),
        (None, Some(0)) if r.outcome == Some(Outcome::Completed) => {}
        (None, Some(code)) => parts.push(format!("exit {code}")),
        (None, None) => {}
    }
    for (on, word) in [
        (r.oom, "oom"),
        (r.restarting, "restarting"),
        (r.failed && r.outcome != Some(Outcome::Failed), "failed"),
    ] {
        if on {
            parts.push(word.to_owned());
        }
    }
    let mut text = parts.join(" ");
    if let Some(m) = r.message.as_deref() {
        if !text.is_empty() {
            text.push_str(": ");
        }
        // One line: every run of whitespace (newlines too) one space, no
        // control character.
        let one_line = m
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        text.push_str(&one_line);
    }
    if text.chars().count() > REASON_WIDTH {
        let cut: String = text.chars().take(REASON_WIDTH - 1).collect();
        text = format!("{}…", cut.trim_end());
    }
    text
}

/// The provider's readiness detail, as JSON fields of an event or an
/// instance: `health` and `paused` for a container, `desired`,
/// `ready_replicas` and `observed` for a replicated workload, `kstatus`
/// (`Current`, `InProgress`, `Failed`, `Terminating`) for any other
/// Kubernetes kind, `ready` as a publisher told it (etcd).
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(untagged)]
pub enum ReadinessJson {
    Container {
        health: &'static str,
        paused: bool,
    },
    Replicas {
        desired: u32,
        ready_replicas: u32,
        observed: bool,
    },
    Told {
        ready: bool,
    },
    Resource {
        kstatus: &'static str,
    },
}

impl ReadinessJson {
    pub fn new(r: Option<Readiness>) -> Option<Self> {
        Some(match r? {
            Readiness::Container { health, paused, .. } => Self::Container {
                health: health.as_str(),
                paused,
            },
            Readiness::Replicas {
                desired,
                ready,
                observed,
                ..
            } => Self::Replicas {
                desired,
                ready_replicas: ready,
                observed,
            },
            Readiness::Told { ready, .. } => Self::Told { ready },
            Readiness::Resource { status, .. } => Self::Resource {
                kstatus: status.as_str(),
            },
            // A detail this binary does not know of yet.
            _ => return None,
        })
    }
}
