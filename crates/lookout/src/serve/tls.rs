//! `--serve-cert`, `--serve-key`, `--serve-client-ca`: HTTPS, and client
//! certificates, with the files re-read while serving.
//!
//! The files are read at start (a pair that does not load: exit 2, naming
//! the file and why), again when one of them changes (each is `stat`ed once
//! a second, in the accept loop: a new change time, size or inode, from a
//! write in place or a rename over it as cert-manager's and the kubelet's
//! secret volumes do), and on SIGHUP (in any case). A new handshake uses
//! the new configuration; open connections keep theirs. A reload that
//! fails (a key that is not the certificate's, as between the two writes
//! of a pair; a half-written file) keeps the configuration in use and says
//! so: a warning and `lookout_serve_tls_reload_failures_total`; the files
//! are tried again when they change next.
//!
//! One concern per module: [`load`] (PEM files to a configuration),
//! [`handshake`] (one connection's handshake, refusals counted),
//! [`stream`] (plain or TLS, one type for hyper), [`not_after`] (the
//! certificate's expiry, a metric). This file: what is loaded, and when.

mod handshake;
mod load;
mod not_after;
mod stream;

use std::io;
use std::time::{Duration, SystemTime};

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, Interval, MissedTickBehavior};

pub use self::handshake::{Acceptor, REFUSED, Refused};
pub use self::load::{LoadError, TlsFiles};
pub use self::stream::{Io, open};
use crate::output::error_chain;

/// Successful reloads (the load at start is none).
pub const RELOADS: &str = "lookout_serve_tls_reloads_total";
/// Reloads that failed, the configuration in use kept.
pub const RELOAD_FAILURES: &str = "lookout_serve_tls_reload_failures_total";
/// The notAfter of the certificate in use, in seconds since the epoch.
pub const NOT_AFTER: &str = "lookout_serve_tls_cert_not_after_timestamp_seconds";

/// How often the files are `stat`ed.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What `stat` tells of a file (through symbolic links): a write changes
/// its change time (which, unlike the modification time, no copy can set
/// back), a rename over it its inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    changed: (i64, i64),
    len: u64,
    inode: (u64, u64),
}

/// Each file's [`Stamp`] (`None`: it cannot be `stat`ed now).
fn stamps(files: &TlsFiles) -> Vec<Option<Stamp>> {
    use std::os::unix::fs::MetadataExt;
    files
        .paths()
        .map(|p| {
            std::fs::metadata(p).ok().map(|m| Stamp {
                modified: m.modified().ok(),
                changed: (m.ctime(), m.ctime_nsec()),
                len: m.len(),
                inode: (m.dev(), m.ino()),
            })
        })
        .collect()
}

/// The configuration read at start (before the runtime is).
#[derive(Debug)]
pub struct Loaded {
    files: TlsFiles,
    config: load::Config,
    stamps: Vec<Option<Stamp>>,
}

impl Loaded {
    /// Reads `files`.
    pub fn read(files: TlsFiles) -> Result<Self, LoadError> {
        // Before reading: a change in between is read again at the next check.
        let stamps = stamps(&files);
        let config = load::load(&files)?;
        Ok(Self {
            files,
            config,
            stamps,
        })
    }

    /// Whether clients must show a certificate.
    pub fn requires_client_cert(&self) -> bool {
        self.files.client_ca.is_some()
    }
}

/// What asks for a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The once-a-second look at the files: reloaded if one changed.
    Tick,
    /// SIGHUP: reloaded whatever the stamps say.
    Hangup,
}

/// The configuration in use, and when to look at the files again. Owned by
/// the accept loop, which polls [`Reloader::next`] beside its accept (so,
/// at `--max-connections`, the files are looked at again once a connection
/// ends: no handshake happens in between).
#[derive(Debug)]
pub struct Reloader {
    files: TlsFiles,
    acceptor: Acceptor,
    /// The stamps of the last attempt, good or not: a failed pair is tried
    /// again when a file changes.
    tried: Vec<Option<Stamp>>,
    tick: Interval,
    hangup: Signal,
}

impl Reloader {
    /// Starts watching (inside the runtime: SIGHUP is handled from now on,
    /// instead of ending the process).
    pub fn new(loaded: Loaded) -> io::Result<Self> {
        let hangup = signal(SignalKind::hangup())?;
        let mut tick = tokio::time::interval_at(Instant::now() + CHECK_EVERY, CHECK_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Each series from the start, at 0.
        for reason in Refused::ALL {
            ::metrics::counter!(REFUSED, "reason" => reason.as_str()).increment(0);
        }
        ::metrics::counter!(RELOADS).increment(0);
        ::metrics::counter!(RELOAD_FAILURES).increment(0);
        Ok(Self {
            acceptor: install(loaded.config),
            files: loaded.files,
            tried: loaded.stamps,
            tick,
            hangup,
        })
    }

    /// The acceptor of the configuration in use (cheap: a reference count).
    pub fn acceptor(&self) -> Acceptor {
        self.acceptor.clone()
    }

    /// Waits for the next check (cancel-safe).
    pub async fn next(&mut self) -> Trigger {
        tokio::select! {
            _ = self.tick.tick() => Trigger::Tick,
            Some(()) = self.hangup.recv() => Trigger::Hangup,
        }
    }

    /// Reloads the files if `trigger` calls for it: the configuration in
    /// use is replaced only by one that loads whole.
    pub fn check(&mut self, trigger: Trigger) {
        let now = stamps(&self.files);
        if trigger == Trigger::Tick && now == self.tried {
            return;
        }
        self.tried = now;
        let why = match trigger {
            Trigger::Tick => "changed",
            Trigger::Hangup => "SIGHUP",
        };
        match load::load(&self.files) {
            Ok(config) => {
                self.acceptor = install(config);
                ::metrics::counter!(RELOADS).increment(1);
                tracing::info!(
                    cert = %self.files.cert.display(),
                    "TLS certificate reloaded ({why}): new handshakes use it"
                );
            }
            Err(e) => {
                ::metrics::counter!(RELOAD_FAILURES).increment(1);
                tracing::warn!(
                    "TLS reload failed ({why}), still serving the certificate loaded before: {}",
                    error_chain(&e)
                );
            }
        }
    }
}

/// The acceptor of `config`; its certificate's expiry as a metric.
fn install(config: load::Config) -> Acceptor {
    if let Some(at) = not_after::not_after(&config.certificate) {
        #[allow(clippy::cast_precision_loss)] // seconds of a date: exact in f64
        ::metrics::gauge!(NOT_AFTER).set(at as f64);
    } else {
        tracing::debug!("cannot read the certificate's notAfter");
    }
    Acceptor(tokio_rustls::TlsAcceptor::from(config.server))
}

/// [`Reloader::next`] of `tls`, or never without TLS.
pub async fn due(tls: &mut Option<Reloader>) -> Trigger {
    match tls {
        Some(t) => t.next().await,
        None => std::future::pending().await,
    }
}
