//! The one consume loop of every run: what the sources yield, printed
//! (events on stdout, statuses on stderr) and handed to the run's other
//! [`Feeds`] (published, rendered, exec'd), until SIGTERM or Ctrl-C.

use std::io::{self, Write as _};
use std::pin::pin;

use lookout_core::{Item, Origin};
use lookout_etcd::PublisherStatus;
use tokio_stream::{Stream, StreamExt};

use crate::exec::Exec;
use crate::exit::Exit;
use crate::output::{Printer, write_line};
use crate::publish;
use crate::render::Rendering;

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

/// Where a run's items go besides stdout and stderr, each on a task of its
/// own (none waits for them).
#[derive(Default)]
pub struct Feeds {
    /// `--publish`: every event and status (the first snapshot included).
    pub publishing: Option<publish::Running>,
    /// `--render`: every event (the first snapshot included) and status.
    pub rendering: Option<Rendering>,
    /// `--exec`: each event printed.
    pub exec: Option<Exec>,
    /// Print (and exec) the first snapshot's events (`--initial`); the
    /// publisher and the render get them whatever it says.
    pub print_initial: bool,
}

/// Prints what `stream` yields (and feeds it to `feeds`), until SIGTERM or
/// Ctrl-C.
pub async fn consume(
    printer: &Printer,
    mut stream: impl Stream<Item = Printed> + Unpin,
    feeds: Feeds,
) -> Result<(), Exit> {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Exit::Failure(format!("cannot listen for SIGTERM: {e}")))?;
    let mut ctrl_c = pin!(tokio::signal::ctrl_c());
    let mut lines = Lines::default();
    loop {
        let item = if lines.is_empty() {
            tokio::select! {
                _ = &mut ctrl_c => return stop(feeds).await,
                _ = sigterm.recv() => return stop(feeds).await,
                item = stream.next() => item,
            }
        } else {
            // Lines are waiting: the next item if it is already there, else
            // they go out now (a burst, a snapshot, is one write, and no
            // line waits for the next event).
            tokio::select! {
                biased;
                item = stream.next() => item,
                () = std::future::ready(()) => {
                    lines.flush()?;
                    continue;
                }
            }
        };
        match item {
            Some(Printed::Publisher(p)) => {
                lines.flush()?;
                let line = printer.publisher_line(&p);
                let _ = blocking_write(|| write_line(&mut io::stderr().lock(), &line));
            }
            Some(Printed::Item {
                source,
                item: Item::Event(e),
            }) => {
                if let Some(p) = &feeds.publishing {
                    p.event(&e);
                }
                if let Some(r) = &feeds.rendering {
                    r.event(source, &e);
                }
                if e.origin == Origin::Initial && !feeds.print_initial {
                    continue;
                }
                if let Some(x) = &feeds.exec {
                    let instance = match source {
                        Some(i) => format!("{i}/{}", e.id.as_str()),
                        None => e.id.as_str().to_owned(),
                    };
                    x.event(instance, printer.event_json(source, &e));
                }
                lines.push(&printer.event_line(source, &e))?;
            }
            Some(Printed::Item {
                source,
                item: Item::Status(s),
            }) => {
                if let Some(p) = &feeds.publishing {
                    p.status(&s);
                }
                if let Some(r) = &feeds.rendering {
                    r.status(source, &s);
                }
                // The events before it are out before it (stdout, then
                // stderr: a reader of both sees them in order).
                lines.flush()?;
                // A closed stderr is no reason to stop delivering events.
                let line = printer.status_line(source, &s);
                let _ = blocking_write(|| write_line(&mut io::stderr().lock(), &line));
            }
            None => {
                lines.flush()?;
                return Err(Exit::Failure(
                    "the event stream ended unexpectedly".to_owned(),
                ));
            }
        }
    }
}

/// At SIGTERM or Ctrl-C: the publisher writes what is queued (the render
/// and `--exec` stop where they are).
async fn stop(feeds: Feeds) -> Result<(), Exit> {
    match feeds.publishing {
        Some(p) => p.stop().await,
        None => Ok(()),
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

/// Event lines on their way to stdout: gathered while the stream has more
/// at once, written together (one write where each line was one), at most
/// [`LINES_AT_ONCE`] bytes a write.
#[derive(Default)]
struct Lines {
    pending: Vec<u8>,
}

/// Gathered lines are written once they are this many bytes.
const LINES_AT_ONCE: usize = 64 * 1024;

impl Lines {
    fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    fn push(&mut self, line: &str) -> Result<(), Exit> {
        self.pending.extend_from_slice(line.as_bytes());
        self.pending.push(b'\n');
        if self.pending.len() >= LINES_AT_ONCE {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what is gathered: `Err` when the run must end (a reader
    /// gone: quietly).
    fn flush(&mut self) -> Result<(), Exit> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let written = blocking_write(|| {
            let mut out = io::stdout().lock();
            out.write_all(&self.pending)?;
            out.flush()
        });
        self.pending.clear();
        match written {
            Ok(()) => Ok(()),
            // The reader went away (`lookout … | head`): exit quietly.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Exit::ReaderGone),
            Err(e) => Err(Exit::Failure(format!("cannot write to stdout: {e}"))),
        }
    }
}
