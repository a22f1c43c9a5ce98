//! The log on stderr: `RUST_LOG` chooses what is logged (tracing's text
//! lines, as ever: a log asked for); without it, only what the Kubernetes
//! provider warns of (a kind not served, an object it cannot read) and
//! whether `--serve`'s TLS files were reloaded, which no status line tells,
//! and with `--json` as JSON lines
//! (`{"log":"warn","target":…,"message":…}`), so that stderr stays one JSON
//! value per line.

use std::fmt;
use std::io;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// What is logged without `RUST_LOG`: what the Kubernetes provider warns
/// of, and the TLS files reloaded or not (`--serve-cert`).
const DEFAULT: &str = "lookout_k8s=warn,lookout::serve::tls=info";

/// Installs the log; `json`: the run prints JSON.
pub fn init(json: bool) {
    let asked = std::env::var_os("RUST_LOG").is_some();
    let filter = if asked {
        tracing_subscriber::EnvFilter::from_default_env()
    } else {
        tracing_subscriber::EnvFilter::new(DEFAULT)
    };
    let json = json && !asked;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(!json && io::IsTerminal::is_terminal(&io::stderr()))
        .with_writer(io::stderr);
    if json {
        builder.event_format(JsonLine).init();
    } else {
        builder.init();
    }
}

/// One event as one JSON line: its level, target and fields (the message,
/// then `key=value`s, as the text log writes them).
struct JsonLine;

impl<S, N> FormatEvent<S, N> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = String::new();
        ctx.format_fields(Writer::new(&mut fields), event)?;
        let meta = event.metadata();
        let line = serde_json::json!({
            "log": meta.level().as_str().to_ascii_lowercase(),
            "target": meta.target(),
            "message": fields,
        });
        writeln!(writer, "{line}")
    }
}
