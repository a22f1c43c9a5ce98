//! The one consume loop of every run: what the sources yield, printed
//! (events on stdout, statuses on stderr) and, when publishing, published,
//! until SIGTERM or Ctrl-C.

use std::io::{self, IsTerminal};
use std::pin::pin;

use lookout_core::{InstanceEvent, Item, Origin, Status};
use lookout_etcd::PublisherStatus;
use tokio_stream::{Stream, StreamExt};

use crate::exit::Exit;
use crate::output::{self, Format, event_line_of, status_line_of, write_line};
use crate::publish;
use crate::sources::{Label, Location};

/// What a run prints: an item of a source, or a source's publisher status
/// (`lookout etcd`).
pub enum Printed {
    /// `source`: its index among the printer's several (`None`: the one
    /// engine of a run without several).
    Item {
        source: Option<usize>,
        item: Item,
    },
    Publisher(PublisherStatus),
}

/// How a run prints, and which sources its lines name.
pub struct Printer {
    pub provider: &'static str,
    events: Format,
    status: Format,
    /// Where the one engine of a run without several is, when known.
    one: Option<Location>,
    /// The sources of a run of several, by index.
    several: Vec<Label>,
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

    fn label(&self, source: Option<usize>) -> Option<&Label> {
        source.and_then(|i| self.several.get(i))
    }

    /// An event's line: of several, with its source's name; of `lookout
    /// etcd`, with the source in its id.
    fn event_line(&self, source: Option<usize>, e: &InstanceEvent) -> String {
        let host = self.label(source).map(|s| s.name.as_str());
        match (host, output::source_in_id(self.provider, e)) {
            (None, Some((host, e))) => event_line_of(Some(host), self.provider, &e, self.events),
            _ => event_line_of(host, self.provider, e, self.events),
        }
    }

    /// A status line; `connected` with where the engine is.
    fn status_line(&self, source: Option<usize>, s: &Status) -> String {
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
}

/// A publishing run's publisher.
pub struct Publishing {
    pub running: publish::Running,
    /// Print the first snapshot (the publisher always gets it).
    pub print_initial: bool,
}

/// Prints what `stream` yields (and publishes it), until SIGTERM or Ctrl-C.
pub async fn consume(
    printer: &Printer,
    mut stream: impl Stream<Item = Printed> + Unpin,
    publishing: Option<Publishing>,
) -> Result<(), Exit> {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Exit::Failure(format!("cannot listen for SIGTERM: {e}")))?;
    let mut ctrl_c = pin!(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            _ = &mut ctrl_c => return stop(publishing).await,
            _ = sigterm.recv() => return stop(publishing).await,
            item = stream.next() => match item {
                Some(Printed::Publisher(p)) => {
                    let line = output::publisher_line(&p, printer.status);
                    let _ = blocking_write(|| write_line(&mut io::stderr().lock(), &line));
                }
                Some(Printed::Item { source, item: Item::Event(e) }) => {
                    if let Some(p) = &publishing {
                        p.running.event(&e);
                        if e.origin == Origin::Initial && !p.print_initial {
                            continue;
                        }
                    }
                    print_event(&printer.event_line(source, &e))?;
                }
                Some(Printed::Item { source, item: Item::Status(s) }) => {
                    if let Some(p) = &publishing {
                        p.running.status(&s);
                    }
                    // A closed stderr is no reason to stop delivering events.
                    let line = printer.status_line(source, &s);
                    let _ = blocking_write(|| write_line(&mut io::stderr().lock(), &line));
                }
                None => {
                    return Err(Exit::Failure("the event stream ended unexpectedly".to_owned()));
                }
            },
        }
    }
}

/// At SIGTERM or Ctrl-C: the publisher writes what is queued.
async fn stop(publishing: Option<Publishing>) -> Result<(), Exit> {
    match publishing {
        Some(p) => p.running.stop().await,
        None => Ok(()),
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

/// Runs a blocking write; on a multi-thread runtime (`--serve`), off the
/// worker, so that a stdout nobody reads stalls nothing but itself.
fn blocking_write<T>(write: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(write)
        }
        _ => write(),
    }
}

/// Writes an event line to stdout: `Err` when the run must end (a reader
/// gone: quietly).
fn print_event(line: &str) -> Result<(), Exit> {
    match blocking_write(|| write_line(&mut io::stdout().lock(), line)) {
        Ok(()) => Ok(()),
        // The reader went away (`lookout … | head`): exit quietly.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Exit::ReaderGone),
        Err(e) => Err(Exit::Failure(format!("cannot write to stdout: {e}"))),
    }
}
