//! `--render TEMPLATE:DEST` (repeatable), `--notify CMD`, `--wait
//! MIN[:MAX]`: docker-gen's job. Every instance the run knows is kept
//! ([`context`]); after a burst of changes ([`debounce`]) each template
//! ([`template`]) is rendered and written where its text changed
//! ([`write`](mod@write)), then CMD runs ([`notify`](mod@notify)), once per burst.
//!
//! The render runs on a task of its own, fed by the consume loop through a
//! shared state (bounded by the instances, whatever the events' rate), so
//! a slow template, file system or notify command holds up no event. It
//! first renders once every source has told its first snapshot (a file of
//! half the instances is never written). A notify that fails is run again
//! after the next change, even when that change leaves the files as they
//! are. Docker, Podman and Swarm instances get where they can be reached
//! from one list of the engine per burst ([`Addressing`]), asked only
//! here: a run without `--render` never asks it.

pub mod context;
pub mod debounce;
pub mod notify;
pub mod template;
pub mod write;

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use lookout_core::{InstanceEvent, Status};
use lookout_moby::protocol::addresses::Addresses;
use lookout_moby::{CompatDial, Objects};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::exit::Exit;
use crate::output::{Warnings, error_chain, source_in_id};
use context::Instances;
use debounce::{Debounce, Wait};
use template::Templates;

pub use debounce::parse_wait;
pub use template::{Spec, parse_spec};

/// What [`Addressing::addresses`] answers: each object's addresses by id,
/// or why not.
pub type Listing<'a> =
    Pin<Box<dyn Future<Output = Result<BTreeMap<String, Addresses>, String>> + Send + 'a>>;

/// Where the objects of one source can be reached now (an engine's list).
pub trait Addressing: Send + Sync {
    fn addresses(&self) -> Listing<'_>;
}

impl<O: Objects> Addressing for CompatDial<O> {
    fn addresses(&self) -> Listing<'_> {
        Box::pin(async move {
            CompatDial::addresses(self)
                .await
                .map_err(|e| error_chain(&e))
        })
    }
}

/// The flags of a rendering run, checked and its templates parsed.
#[derive(Debug)]
pub struct Prepared {
    templates: Templates,
    notify: Option<Vec<String>>,
    wait: Wait,
}

impl Prepared {
    /// `None` without `--render` (`renders`); exit 2 when a template
    /// cannot be read or parsed (with its line and column), a
    /// destination's folder is missing, or `--notify` is no command.
    pub fn new(renders: &[Spec], notify: Option<&str>, wait: Wait) -> Result<Option<Self>, Exit> {
        if renders.is_empty() {
            return Ok(None);
        }
        for spec in renders {
            if !template::folder_exists(&spec.dest) {
                return Err(Exit::Usage(format!(
                    "cannot render into {}: its folder does not exist",
                    spec.dest.display()
                )));
            }
        }
        let templates = Templates::load(renders).map_err(|e| Exit::Usage(e.to_string()))?;
        let notify = notify
            .map(notify::parse_command)
            .transpose()
            .map_err(|e| Exit::Usage(format!("--notify: {e}")))?;
        Ok(Some(Self {
            templates,
            notify,
            wait,
        }))
    }
}

/// What the consume loop and the render task share.
#[derive(Debug, Default)]
struct Shared {
    instances: Instances,
    /// A change not rendered yet.
    changed: bool,
    /// The sources that told their first snapshot.
    synced: HashSet<usize>,
}

fn lock(s: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A run's sources as the render needs them.
pub struct Sources {
    pub provider: &'static str,
    pub readiness: bool,
    /// Each source's name (several) or address (one), in order.
    pub hosts: Vec<Option<String>>,
    /// Each source's lister, when its engine has one (empty: none).
    pub addressing: Vec<Arc<dyn Addressing>>,
}

/// The render, running.
#[derive(Debug)]
pub struct Rendering {
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    task: JoinHandle<()>,
    provider: &'static str,
}

impl Drop for Rendering {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Rendering {
    /// Starts the render task (the binary may spawn; the library crates
    /// never do).
    pub fn start(prepared: Prepared, sources: Sources, warnings: Warnings) -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let wake = Arc::new(Notify::new());
        let provider = sources.provider;
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(run(
            prepared,
            sources,
            Arc::clone(&shared),
            Arc::clone(&wake),
            warnings,
        ));
        Self {
            shared,
            wake,
            task,
            provider,
        }
    }

    /// An event of `source` (`None`: the one engine).
    pub fn event(&self, source: Option<usize>, e: &InstanceEvent) {
        let source = source.unwrap_or(0);
        let mut s = lock(&self.shared);
        // `lookout etcd`: the publisher's source is the host.
        let host = source_in_id(self.provider, e).map(|(host, _)| host.to_owned());
        s.instances.apply(source, host, e);
        s.changed = true;
        drop(s);
        self.wake.notify_one();
    }

    /// A status of `source`: its first `connected` ends its first snapshot.
    pub fn status(&self, source: Option<usize>, status: &Status) {
        if matches!(status, Status::Connected { .. }) {
            let mut s = lock(&self.shared);
            if s.synced.insert(source.unwrap_or(0)) {
                s.changed = true;
                drop(s);
                self.wake.notify_one();
            }
        }
    }
}

async fn run(
    prepared: Prepared,
    sources: Sources,
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    warnings: Warnings,
) {
    let count = sources.hosts.len().max(1);
    let mut debounce = Debounce::new(prepared.wait);
    let mut addresses: Vec<Option<BTreeMap<String, Addresses>>> =
        vec![None; sources.addressing.len()];
    // A notify that failed runs again after the next change.
    let mut notify_owed = false;
    loop {
        burst(&shared, &wake, &mut debounce, count).await;
        for (i, lister) in sources.addressing.iter().enumerate() {
            match lister.addresses().await {
                Ok(a) => addresses[i] = Some(a),
                Err(e) => warnings.warn(&format!(
                    "render: cannot list where the instances are (their networks and ports \
                     as last listed are used): {e}"
                )),
            }
        }
        let rendered: Vec<Result<String, String>> = {
            let s = lock(&shared);
            let context = s.instances.context(
                sources.provider,
                sources.readiness,
                &sources.hosts,
                &addresses,
            );
            (0..prepared.templates.specs().len())
                .map(|i| prepared.templates.render(i, &context))
                .collect()
        };
        let written = write_all(prepared.templates.specs(), rendered, warnings).await;
        if let Some(argv) = &prepared.notify
            && (written || notify_owed)
        {
            notify_owed = !notify(argv, warnings).await;
        }
    }
}

/// Waits for a change (once every one of `count` sources is synced), then
/// for its burst to end.
async fn burst(shared: &Mutex<Shared>, wake: &Notify, debounce: &mut Debounce, count: usize) {
    loop {
        let changed = {
            let mut s = lock(shared);
            let changed = s.changed && s.synced.len() >= count;
            if changed {
                s.changed = false;
            }
            changed
        };
        if changed {
            debounce.change(tokio::time::Instant::now());
        }
        match debounce.due() {
            Some(due) => {
                tokio::select! {
                    () = wake.notified() => {}
                    () = tokio::time::sleep_until(due) => break,
                }
            }
            None => wake.notified().await,
        }
    }
    debounce.done();
}

/// Writes each rendered text where it changed (off the runtime's
/// thread); a render error keeps the last good file: `true` when a file
/// was written.
async fn write_all(
    specs: &[Spec],
    rendered: Vec<Result<String, String>>,
    warnings: Warnings,
) -> bool {
    let mut written = false;
    for (spec, text) in specs.iter().zip(rendered) {
        let text = match text {
            Ok(t) => t,
            Err(why) => {
                warnings.warn(&format!(
                    "render: {} not rendered (the last good {} is kept): {why}",
                    spec.template.display(),
                    spec.dest.display()
                ));
                continue;
            }
        };
        let dest = spec.dest.clone();
        // The binary may spawn; the library crates never do.
        #[allow(clippy::disallowed_methods)]
        let done = tokio::task::spawn_blocking(move || write::write_if_changed(&dest, &text)).await;
        match done {
            Ok(Ok(true)) => {
                tracing::info!(dest = %spec.dest.display(), "rendered");
                written = true;
            }
            Ok(Ok(false)) => {}
            Ok(Err(e)) => warnings.warn(&format!(
                "render: cannot write {}: {e}",
                spec.dest.display()
            )),
            Err(e) => warnings.warn(&format!(
                "render: the write of {} failed: {e}",
                spec.dest.display()
            )),
        }
    }
    written
}

/// Runs `--notify`'s `argv` and says how it went: `true` when it
/// succeeded.
async fn notify(argv: &[String], warnings: Warnings) -> bool {
    let ran = notify::run(argv, None).await;
    let line = format!(
        "render: notify `{}`: {}",
        shell_words::join(argv),
        ran.describe()
    );
    if ran.succeeded() {
        warnings.note(&line);
        true
    } else {
        warnings.warn(&format!("{line} (run again after the next change)"));
        false
    }
}
