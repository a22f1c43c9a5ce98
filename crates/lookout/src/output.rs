//! What `lookout` prints: events on stdout, connection status on stderr,
//! each line naming its source ([`Printer`]); its own warnings on stderr
//! ([`Warnings`]).

use std::io::{self, IsTerminal, Write};

use lookout_core::{EventKind, InstanceEvent, Labels, Status};
use serde::Serialize;

use crate::sources::{Label, Location};

mod detail;

pub use detail::{ReadinessJson, ReasonJson, reason_text};

/// How to print.
#[derive(Clone, Copy, Debug)]
pub struct Format {
    pub json: bool,
    pub color: bool,
}

/// How a run prints, and which sources its lines name.
pub struct Printer {
    provider: &'static str,
    events: Format,
    status: Format,
    /// Where the one engine of a run without several is, when known.
    one: Option<Location>,
    /// The sources of a run of several, by index.
    several: Vec<Label>,
    warnings: Warnings,
}

impl Printer {
    /// Text or JSON lines; events in colour on a terminal unless
    /// `NO_COLOR`.
    pub fn new(provider: &'static str, json: bool) -> Self {
        let stdout_tty = io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            provider,
            events: Format {
                json,
                color: stdout_tty && !no_color,
            },
            status: Format { json, color: false },
            one: None,
            several: Vec::new(),
            warnings: Warnings::new(json),
        }
    }

    /// Of one engine, at `at`.
    #[must_use]
    pub fn one(mut self, at: Option<Location>) -> Self {
        self.one = at;
        self
    }

    /// Of several sources, in the order of the items' indexes.
    #[must_use]
    pub fn several(mut self, labels: Vec<Label>) -> Self {
        self.several = labels;
        self
    }

    /// The provider its lines name.
    pub fn provider(&self) -> &'static str {
        self.provider
    }

    /// Where the run's warnings go.
    pub fn warnings(&self) -> Warnings {
        self.warnings
    }

    fn label(&self, source: Option<usize>) -> Option<&Label> {
        source.and_then(|i| self.several.get(i))
    }

    /// An event's line: of several, with its source's name; of `lookout
    /// etcd`, with the source in its id.
    pub fn event_line(&self, source: Option<usize>, e: &InstanceEvent) -> String {
        let host = self.label(source).map(|s| s.name.as_str());
        match (host, source_in_id(self.provider, e)) {
            (None, Some((host, e))) => event_line_of(Some(host), self.provider, &e, self.events),
            _ => event_line_of(host, self.provider, e, self.events),
        }
    }

    /// An event's line as `--json` prints it, whatever this run prints
    /// (`--exec`'s stdin).
    pub fn event_json(&self, source: Option<usize>, e: &InstanceEvent) -> String {
        let json = Format {
            json: true,
            color: false,
        };
        let host = self.label(source).map(|s| s.name.as_str());
        match (host, source_in_id(self.provider, e)) {
            (None, Some((host, e))) => event_line_of(Some(host), self.provider, &e, json),
            _ => event_line_of(host, self.provider, e, json),
        }
    }

    /// A status line; `connected` with where the engine is.
    pub fn status_line(&self, source: Option<usize>, s: &Status) -> String {
        let of = self.label(source);
        let line = status_line_of(of.map(|s| s.name.as_str()), self.provider, s, self.status);
        let at = match of {
            Some(s) => s.at.as_ref(),
            None => self.one.as_ref(),
        };
        match (s, at) {
            (Status::Connected { .. }, Some(at)) => with_location(line, at, self.status),
            _ => line,
        }
    }

    /// A source's publisher status (`lookout etcd`): [`publisher_line`].
    pub fn publisher_line(&self, p: &lookout_etcd::PublisherStatus) -> String {
        publisher_line(p, self.status)
    }
}

/// A `connected` status line with where the engine is and where that came
/// from: `… (unix:///var/run/docker.sock, from default)`, or in JSON the
/// fields `endpoint` and `from`.
fn with_location(line: String, at: &Location, f: Format) -> String {
    if !f.json {
        return format!("{line} ({}, from {})", at.host, at.from);
    }
    match serde_json::from_str::<serde_json::Value>(&line) {
        Ok(serde_json::Value::Object(mut o)) => {
            o.insert("endpoint".to_owned(), at.host.as_str().into());
            o.insert("from".to_owned(), at.from.as_str().into());
            serde_json::Value::Object(o).to_string()
        }
        _ => line,
    }
}

#[derive(Serialize)]
struct JsonEvent<'a> {
    provider: &'a str,
    /// The source, when a run watches several engines.
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
    instance: &'a str,
    kind: &'a str,
    origin: &'a str,
    at: String,
    labels: &'a Labels,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    readiness: Option<ReadinessJson>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    reason: Option<ReasonJson<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
enum JsonStatus {
    Connected {
        instances: usize,
    },
    Disconnected {
        error: String,
        attempt: u32,
        retry_in_ms: u128,
    },
    Lagged {
        missed: u64,
    },
    /// A status this binary does not know of yet (`lookout_core::Status` is
    /// `#[non_exhaustive]`).
    Other {
        detail: String,
    },
}

pub use lookout_core::rfc3339::format_nanos as rfc3339_nanos;

/// One event as a line (without the newline).
#[cfg(test)]
pub fn event_line(provider: &str, e: &InstanceEvent, f: Format) -> String {
    event_line_of(None, provider, e, f)
}

/// An etcd event's source and the event under its instance id: the
/// provider's id is `SOURCE/INSTANCE` (`None` for other providers).
pub fn source_in_id<'e>(provider: &str, e: &'e InstanceEvent) -> Option<(&'e str, InstanceEvent)> {
    if provider != "etcd" {
        return None;
    }
    let (source, instance) = e.id.as_str().split_once('/')?;
    let mut inner = e.clone();
    inner.id = lookout_core::InstanceId::from(instance);
    Some((source, inner))
}

/// One event of the source `host` (when a run watches several engines) as a
/// line: JSON with `"host"`, text with `host/instance`.
pub fn event_line_of(host: Option<&str>, provider: &str, e: &InstanceEvent, f: Format) -> String {
    if f.json {
        let j = JsonEvent {
            provider,
            host,
            instance: e.id.as_str(),
            kind: e.kind.as_str(),
            origin: e.origin.as_str(),
            at: rfc3339_nanos(e.at),
            labels: &e.labels,
            readiness: ReadinessJson::new(e.readiness),
            reason: ReasonJson::new(e.reason.as_deref()),
        };
        return serde_json::to_string(&j).unwrap_or_default();
    }
    let labels = e
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    // `stopping`, the longest kind, sets the column's width.
    let kind = format!("{:<8}", e.kind.as_str());
    let kind = if f.color {
        let code = match e.kind {
            EventKind::Created => "34",
            EventKind::Started => "32",
            // A stop and the stop under way: yellow.
            EventKind::Stopped | EventKind::Stopping => "33",
            EventKind::Removed => "31",
            EventKind::Ready => "36",
            EventKind::Unready => "35",
            // Worse than unready: the engine says it fails.
            EventKind::Failing => "1;35",
            _ => "0",
        };
        format!("\x1b[{code}m{kind}\x1b[0m")
    } else {
        kind
    };
    let instance = match host {
        Some(host) => format!("{host}/{}", e.id.as_str()),
        None => e.id.as_str().to_owned(),
    };
    // Why, between the instance and its labels, when the event says it.
    let reason = match e.reason.as_deref().map(reason_text) {
        Some(text) if text.is_empty() => String::new(),
        Some(text) => {
            let failed = e
                .reason
                .as_deref()
                .is_some_and(|r| r.failed || r.outcome == Some(lookout_core::Outcome::Failed));
            if f.color && failed {
                format!("\x1b[31m{text}\x1b[0m  ")
            } else {
                format!("{text}  ")
            }
        }
        None => String::new(),
    };
    format!(
        "{}  {provider:<6}  {kind}  {:<7}  {instance:<32}  {reason}{labels}",
        rfc3339_nanos(e.at),
        e.origin.as_str(),
    )
    .trim_end()
    .to_owned()
}

/// One status as a line (without the newline).
#[cfg(test)]
pub fn status_line(provider: &str, s: &Status, f: Format) -> String {
    status_line_of(None, provider, s, f)
}

/// A status of the source `host` (when a run watches several engines): JSON
/// with `"host"` first, text `lookout: PROVIDER HOST: …`.
pub fn status_line_of(host: Option<&str>, provider: &str, s: &Status, f: Format) -> String {
    if f.json {
        let status = status_json(s);
        return match host {
            Some(host) => serde_json::to_string(&Hosted { host, status }),
            None => serde_json::to_string(&status),
        }
        .unwrap_or_default();
    }
    let provider = match host {
        Some(host) => format!("{provider} {host}"),
        None => provider.to_owned(),
    };
    status_text(&provider, s)
}

/// A status with the source it is of, first.
#[derive(Serialize)]
struct Hosted<'a> {
    host: &'a str,
    #[serde(flatten)]
    status: JsonStatus,
}

fn status_json(s: &Status) -> JsonStatus {
    match s {
        Status::Connected { instances } => JsonStatus::Connected {
            instances: *instances,
        },
        Status::Disconnected {
            error,
            attempt,
            retry_in,
            ..
        } => JsonStatus::Disconnected {
            error: error_chain(&**error),
            attempt: *attempt,
            retry_in_ms: retry_in.as_millis(),
        },
        Status::Lagged { missed } => JsonStatus::Lagged { missed: *missed },
        other => JsonStatus::Other {
            detail: format!("{other:?}"),
        },
    }
}

fn status_text(provider: &str, s: &Status) -> String {
    match s {
        Status::Connected { instances } => {
            format!("lookout: {provider}: connected, {instances} instances known")
        }
        Status::Disconnected {
            error,
            attempt,
            retry_in,
            ..
        } => format!(
            "lookout: {provider}: disconnected: {} (attempt {attempt}, retrying in {:.1}s)",
            error_chain(&**error),
            retry_in.as_secs_f64()
        ),
        Status::Lagged { missed } => {
            format!("lookout: {provider}: lagged: {missed} items dropped; resynced")
        }
        other => format!("lookout: {provider}: {other:?}"),
    }
}

/// A source's publisher status (`lookout etcd`), as a status of that
/// source: JSON `{"host":"SOURCE","status":"connected","instances":N,
/// "writer":"…"}` or `{"host":"SOURCE","status":"disconnected","error":"…",
/// "instances":N}` (its instances kept as they were), text `lookout: etcd
/// SOURCE: …`. The watch's own statuses (its connection to etcd) have no
/// `host`.
pub fn publisher_line(p: &lookout_etcd::PublisherStatus, f: Format) -> String {
    const GONE: &str = "no publisher: its status key is absent (its lease expired, the publisher lost its engine, or none wrote one)";
    #[derive(Serialize)]
    struct Publisher<'a> {
        host: &'a str,
        status: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a str>,
        instances: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        writer: Option<&'a str>,
    }
    let connected = p.state == lookout_etcd::PublisherState::Connected;
    if f.json {
        return serde_json::to_string(&Publisher {
            host: &p.source,
            status: p.state.as_str(),
            error: (!connected).then_some(GONE),
            instances: p.instances,
            writer: p.writer.as_deref(),
        })
        .unwrap_or_default();
    }
    let instances = p.instances;
    match (connected, &p.writer) {
        (true, Some(w)) => format!(
            "lookout: etcd {}: connected, {instances} instances known (publisher {w})",
            p.source
        ),
        (true, None) => format!(
            "lookout: etcd {}: connected, {instances} instances known",
            p.source
        ),
        (false, _) => format!(
            "lookout: etcd {}: disconnected: {GONE}; its {instances} instances kept as they were",
            p.source
        ),
    }
}

/// The `--serve` announcement on stderr (always JSON):
/// `{"status":"serving","addr":"127.0.0.1:7070","scheme":"http"}` (`https`
/// with `--serve-cert`).
pub fn serving_line(addr: std::net::SocketAddr, tls: bool) -> String {
    #[derive(Serialize)]
    struct Serving {
        status: &'static str,
        addr: String,
        scheme: &'static str,
    }
    serde_json::to_string(&Serving {
        status: "serving",
        addr: addr.to_string(),
        scheme: if tls { "https" } else { "http" },
    })
    .unwrap_or_default()
}

/// Where lookout's own warnings go: stderr, one line each, whatever
/// `RUST_LOG` says; JSON with `--json`.
#[derive(Clone, Copy, Debug)]
pub struct Warnings {
    json: bool,
}

impl Warnings {
    /// `{"warning":…}` lines with `--json` (`json`), else text.
    pub fn new(json: bool) -> Self {
        Self { json }
    }

    /// A warning: [`warning_line`].
    pub fn warn(self, warning: &str) {
        say(&warning_line(warning, self.json));
    }

    /// A note, not a warning (what a `--notify` command did): `lookout:
    /// …`, or `{"note":…}` with `--json`.
    pub fn note(self, what: &str) {
        tracing::info!("{what}");
        if self.json {
            say(&serde_json::json!({ "note": what }).to_string());
        } else {
            say(&format!("lookout: {what}"));
        }
    }

    /// A warning of the publisher (`--publish`), also in the log:
    /// [`publish_warning_line`].
    pub fn warn_publish(self, what: &str) {
        tracing::warn!("publish: {what}");
        say(&publish_warning_line(what, self.json));
    }
}

/// Writes a line on stderr; one that cannot be written is no reason to
/// stop.
fn say(line: &str) {
    let _ = write_line(&mut io::stderr().lock(), line);
}

/// A warning on stderr: `{"warning":…}` with `--json`, else
/// `lookout: warning: …`.
pub fn warning_line(warning: &str, json: bool) -> String {
    if json {
        serde_json::json!({ "warning": warning }).to_string()
    } else {
        format!("lookout: warning: {warning}")
    }
}

/// A warning of the publisher on stderr: `{"warning":"publish: …"}` with
/// `--json`, else `lookout: publish: …`.
pub fn publish_warning_line(what: &str, json: bool) -> String {
    if json {
        warning_line(&format!("publish: {what}"), true)
    } else {
        format!("lookout: publish: {what}")
    }
}

/// An error and its sources, `: `-separated, without repeating a source that
/// the message already contains.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        src = cause.source();
    }
    s
}

/// Writes one line and flushes (stdout is piped into other tools).
pub fn write_line(w: &mut impl Write, line: &str) -> io::Result<()> {
    w.write_all(line.as_bytes())?;
    w.write_all(b"\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::detail::REASON_WIDTH;
    use super::*;
    use lookout_core::Reason;
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_known_values() {
        let t = UNIX_EPOCH + Duration::new(1_796_010_138, 979_493_067);
        assert_eq!(rfc3339_nanos(t), "2026-11-30T03:42:18.979493067Z");
        assert_eq!(rfc3339_nanos(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339_nanos(leap), "2000-02-29T00:00:00.000000000Z");
        let before = UNIX_EPOCH - Duration::from_millis(1);
        assert_eq!(rfc3339_nanos(before), "1969-12-31T23:59:59.999000000Z");
    }

    fn event() -> InstanceEvent {
        InstanceEvent::new(
            "web".into(),
            EventKind::Stopped,
            UNIX_EPOCH + Duration::new(1_796_010_138, 979_493_067),
            lookout_core::Origin::Live,
        )
        .labels(Arc::new(Labels::from([("app".into(), "web".into())])))
    }

    #[test]
    fn json_event_has_exactly_the_documented_keys_in_order() {
        let f = Format {
            json: true,
            color: false,
        };
        assert_eq!(
            event_line("docker", &event(), f),
            r#"{"provider":"docker","instance":"web","kind":"stopped","origin":"live","at":"2026-11-30T03:42:18.979493067Z","labels":{"app":"web"}}"#
        );
    }

    #[test]
    fn with_several_sources_json_says_the_host_and_text_host_slash_instance() {
        let json = Format {
            json: true,
            color: false,
        };
        assert_eq!(
            event_line_of(Some("b"), "docker", &event(), json),
            r#"{"provider":"docker","host":"b","instance":"web","kind":"stopped","origin":"live","at":"2026-11-30T03:42:18.979493067Z","labels":{"app":"web"}}"#
        );
        let s = Status::Connected { instances: 3 };
        assert_eq!(
            status_line_of(Some("b"), "docker", &s, json),
            r#"{"host":"b","status":"connected","instances":3}"#
        );
        assert_eq!(
            status_line_of(None, "docker", &s, json),
            r#"{"status":"connected","instances":3}"#
        );
        let plain = Format {
            json: false,
            color: false,
        };
        let line = event_line_of(Some("b"), "docker", &event(), plain);
        assert!(line.contains("  b/web"), "{line}");
        assert_eq!(
            status_line_of(Some("b"), "docker", &s, plain),
            "lookout: docker b: connected, 3 instances known"
        );
    }

    #[test]
    fn human_line_is_aligned_and_colourless_unless_asked() {
        let plain = Format {
            json: false,
            color: false,
        };
        let line = event_line("docker", &event(), plain);
        assert!(line.starts_with("2026-11-30T03:42:18.979493067Z  docker  stopped   live     web"));
        assert!(line.ends_with("app=web"));
        assert!(!line.contains('\x1b'));
        let coloured = event_line(
            "docker",
            &event(),
            Format {
                json: false,
                color: true,
            },
        );
        assert!(coloured.contains("\x1b[33mstopped"));
    }

    fn why(kind: EventKind, reason: Reason) -> InstanceEvent {
        let mut e = event().reason(Some(Arc::new(reason)));
        e.kind = kind;
        e
    }

    const PLAIN: Format = Format {
        json: false,
        color: false,
    };
    const JSON: Format = Format {
        json: true,
        color: false,
    };

    #[test]
    fn reasons_as_a_short_column() {
        use lookout_core::{Outcome, Signal};
        let cases = [
            (Reason::exited(3, false), "failed exit 3"),
            (Reason::exited(137, false).oom(true), "failed SIGKILL oom"),
            (Reason::exited(0, false), "completed"),
            (Reason::stop(Outcome::Stopped), "stopped"),
            (
                Reason::exited(143, false).outcome(Some(Outcome::Stopped)),
                "stopped SIGTERM",
            ),
            (Reason::exited(1, true), "failed exit 1 restarting"),
            (Reason::exited(0, true), "failed exit 0 restarting"),
            (
                Reason::stop(Outcome::Stopped).signal(Some(Signal::KILL)),
                "stopped SIGKILL",
            ),
            (
                Reason::failing("probe said\n  no\tway"),
                "probe said no way",
            ),
            (
                Reason::failing("ProgressDeadlineExceeded").failed(true),
                "failed: ProgressDeadlineExceeded",
            ),
            (Reason::default(), ""),
        ];
        for (reason, text) in cases {
            assert_eq!(reason_text(&reason), text, "{reason:?}");
        }
        let long = reason_text(&Reason::failing(&"é".repeat(1000)));
        assert_eq!(long.chars().count(), REASON_WIDTH);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn text_lines_say_why_between_the_instance_and_its_labels() {
        let line = event_line(
            "docker",
            &why(EventKind::Stopped, Reason::exited(3, false)),
            PLAIN,
        );
        assert!(
            line.ends_with(" web                               failed exit 3  app=web"),
            "{line}"
        );
        let line = event_line(
            "docker",
            &why(
                EventKind::Failing,
                Reason::failing("health check:\nrefused"),
            ),
            PLAIN,
        );
        assert!(
            line.contains("  failing   live     web  ")
                && line.ends_with("health check: refused  app=web"),
            "{line}"
        );
        let line = event_line(
            "docker",
            &why(EventKind::Stopping, Reason::default()),
            PLAIN,
        );
        assert!(
            line.contains("  stopping  live     web                               app=web"),
            "{line}"
        );
        let colour = Format {
            json: false,
            color: true,
        };
        let line = event_line(
            "docker",
            &why(EventKind::Failing, Reason::failing("x")),
            colour,
        );
        assert!(line.contains("\x1b[1;35mfailing "), "{line:?}");
        let line = event_line(
            "docker",
            &why(EventKind::Stopping, Reason::default()),
            colour,
        );
        assert!(line.contains("\x1b[33mstopping"), "{line:?}");
        let line = event_line(
            "docker",
            &why(EventKind::Stopped, Reason::exited(3, false)),
            colour,
        );
        assert!(
            line.contains("\x1b[31mfailed exit 3\x1b[0m  app=web"),
            "{line:?}"
        );
        let line = event_line(
            "docker",
            &why(EventKind::Stopped, Reason::exited(0, false)),
            colour,
        );
        assert!(line.contains("  completed  app=web"), "{line:?}");
    }

    #[test]
    fn json_events_carry_the_reason_flat_each_field_only_when_said() {
        use lookout_core::{Outcome, Signal};
        let e = why(
            EventKind::Stopped,
            Reason::exited(137, true)
                .oom(true)
                .message(Some("OOMKilled")),
        );
        assert_eq!(
            event_line("docker", &e, JSON),
            r#"{"provider":"docker","instance":"web","kind":"stopped","origin":"live","at":"2026-11-30T03:42:18.979493067Z","labels":{"app":"web"},"outcome":"failed","exit_code":137,"signal":"SIGKILL","oom":true,"restarting":true,"message":"OOMKilled"}"#
        );
        let e = why(EventKind::Stopped, Reason::stop(Outcome::Completed));
        assert!(
            event_line("docker", &e, JSON)
                .ends_with(r#""labels":{"app":"web"},"outcome":"completed"}"#)
        );
        let e = why(
            EventKind::Failing,
            Reason::failing("Back-off restarting failed container").failed(true),
        )
        .readiness(Some(lookout_core::Readiness::replicas(2, 0, true)));
        assert_eq!(
            event_line("k8s", &e, JSON),
            r#"{"provider":"k8s","instance":"web","kind":"failing","origin":"live","at":"2026-11-30T03:42:18.979493067Z","labels":{"app":"web"},"desired":2,"ready_replicas":0,"observed":true,"failed":true,"message":"Back-off restarting failed container"}"#
        );
        let e = why(
            EventKind::Stopping,
            Reason::default().signal(Some(Signal::TERM)),
        );
        assert!(
            event_line("docker", &e, JSON).contains(r#""kind":"stopping","#)
                && event_line("docker", &e, JSON).ends_with(r#""signal":"SIGTERM"}"#)
        );
        // No reason: not a key more than before.
        assert!(!event_line("docker", &event(), JSON).contains("outcome"));
    }

    #[test]
    fn publisher_statuses_are_statuses_of_their_source() {
        let json = Format {
            json: true,
            color: false,
        };
        let mut p =
            lookout_etcd::PublisherStatus::new("h", lookout_etcd::PublisherState::Connected);
        p.writer = Some("lookout/0.1.0 h pid 7".into());
        p.instances = 2;
        p.revision = 9;
        assert_eq!(
            publisher_line(&p, json),
            r#"{"host":"h","status":"connected","instances":2,"writer":"lookout/0.1.0 h pid 7"}"#
        );
        p.state = lookout_etcd::PublisherState::Disconnected;
        p.writer = None;
        assert_eq!(
            publisher_line(&p, json),
            r#"{"host":"h","status":"disconnected","error":"no publisher: its status key is absent (its lease expired, the publisher lost its engine, or none wrote one)","instances":2}"#
        );
        let plain = Format {
            json: false,
            color: false,
        };
        assert!(
            publisher_line(&p, plain).starts_with("lookout: etcd h: disconnected: no publisher"),
            "{}",
            publisher_line(&p, plain)
        );
    }

    #[test]
    fn warnings_as_text_and_json() {
        assert_eq!(warning_line("w", false), "lookout: warning: w");
        assert_eq!(warning_line("a \"w\"", true), r#"{"warning":"a \"w\""}"#);
        assert_eq!(
            publish_warning_line("cannot write k: e", false),
            "lookout: publish: cannot write k: e"
        );
        assert_eq!(
            publish_warning_line("cannot write k: e", true),
            r#"{"warning":"publish: cannot write k: e"}"#
        );
    }

    #[test]
    fn serving_json() {
        let addr: std::net::SocketAddr = "[::1]:7070".parse().expect("addr");
        assert_eq!(
            serving_line(addr, false),
            r#"{"status":"serving","addr":"[::1]:7070","scheme":"http"}"#
        );
    }

    #[test]
    fn status_json() {
        let f = Format {
            json: true,
            color: false,
        };
        assert_eq!(
            status_line("docker", &Status::Connected { instances: 3 }, f),
            r#"{"status":"connected","instances":3}"#
        );
        let s = Status::disconnected(
            Arc::new(lookout_core::Error::SessionEnded),
            2,
            Duration::from_secs(1),
        );
        assert_eq!(
            status_line("docker", &s, f),
            r#"{"status":"disconnected","error":"the engine closed the change feed","attempt":2,"retry_in_ms":1000}"#
        );
    }
}
