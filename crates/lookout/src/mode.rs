//! The one choice of how a run goes, for one source or several: print
//! (stdout and stderr), publish (print, and write each transition to etcd)
//! or serve (print, and share a hub per engine with HTTP clients); each of
//! them with `--render` and `--exec` ([`Also`]) or without. Every mode
//! ends in the one loop of [`consume`](crate::consume).

use std::io;
use std::sync::Arc;

use lookout_core::{Dial, HubConfig, Item, Merge, Start};
use lookout_etcd::{EtcdConfig, EtcdItem, PublisherChanges, Publishers};
use tokio_stream::{Stream, StreamExt};

use crate::cli::{Common, PublishArgs};
use crate::consume::{Feeds, Printed, consume};
use crate::exec::Exec;
use crate::exit::Exit;
use crate::output::{self, Printer, Warnings, write_line};
use crate::render::{self, Addressing, Rendering};
use crate::serve::EngineHub;
use crate::sources::{Label, Location, Sources};
use crate::{publish, serve};

/// What a run does besides printing, publishing or serving: `--render`
/// (its templates parsed; each source's lister, in order, of an engine
/// that has one) and `--exec` (its argv).
#[derive(Default)]
pub struct Also {
    pub render: Option<render::Prepared>,
    pub addressing: Vec<Arc<dyn Addressing>>,
    pub exec: Option<Vec<String>>,
}

impl Also {
    /// `--render`'s and `--exec`'s flags, checked (exit 2): a template that
    /// does not parse ends the run before it watches.
    pub fn new(common: &Common) -> Result<Self, Exit> {
        Ok(Self {
            render: render::Prepared::new(&common.renders, common.notify.as_deref(), common.wait)?,
            addressing: Vec::new(),
            exec: common
                .exec
                .as_deref()
                .map(Exec::parse)
                .transpose()
                .map_err(Exit::Usage)?,
        })
    }

    /// Whether the first snapshot is wanted (the render's first file).
    pub fn wants_initial(&self) -> bool {
        self.render.is_some()
    }

    /// The feeds of a run printed by `printer` (its sources' `hosts`, in
    /// order), with `publishing`.
    fn feeds(
        self,
        printer: &Printer,
        common: &Common,
        hosts: Vec<Option<String>>,
        publishing: Option<publish::Running>,
    ) -> Feeds {
        let rendering = self.render.map(|prepared| {
            Rendering::start(
                prepared,
                render::Sources {
                    provider: printer.provider(),
                    readiness: common.readiness,
                    hosts,
                    addressing: self.addressing,
                },
                printer.warnings(),
            )
        });
        Feeds {
            publishing,
            rendering,
            exec: self.exec.map(|argv| Exec::start(argv, printer.warnings())),
            print_initial: common.initial,
        }
    }
}

/// Runs `sources` of `provider` (not etcd: [`etcd`]) as the flags say.
pub async fn run<D: Dial>(
    provider: &'static str,
    sources: Sources<D>,
    common: &Common,
    publish: &PublishArgs,
    serve: Option<serve::Prepared>,
    also: Also,
) -> Result<(), Exit> {
    match sources {
        Sources::One { watch, at } => {
            let hosts = vec![at.as_ref().map(|l| l.host.clone())];
            let printer = Printer::new(provider, common.json).one(at);
            if let Some(target) = &publish.publish {
                if serve.is_some() {
                    return Err(Exit::Usage(
                        "--publish and --serve do not go together yet".to_owned(),
                    ));
                }
                let publisher = publisher(provider, target, publish, printer.warnings()).await?;
                // On a task of its own: the feed is read and printed whatever
                // etcd does.
                let running = publish::Running::start(publisher);
                let feeds = also.feeds(&printer, common, hosts, Some(running));
                return consume(&printer, watch.map(one), feeds).await;
            }
            let wants_initial = also.wants_initial();
            let feeds = also.feeds(&printer, common, hosts, None);
            let Some(prepared) = serve else {
                return consume(&printer, watch.map(one), feeds).await;
            };
            let hub = EngineHub::share(watch, None, hub_config(common));
            let stdout = Stdout {
                feeds,
                initial: common.initial || wants_initial,
            };
            serve_hubs(vec![hub], None, &printer, stdout, prepared, common).await
        }
        Sources::Several(watches) => {
            let labels: Vec<Label> = watches
                .iter()
                .map(|w| Label {
                    name: w.name.clone(),
                    at: w.at.clone(),
                })
                .collect();
            let hosts = labels.iter().map(|l| Some(l.name.clone())).collect();
            let printer = Printer::new(provider, common.json).several(labels);
            let wants_initial = also.wants_initial();
            let feeds = also.feeds(&printer, common, hosts, None);
            if let Some(prepared) = serve {
                // A hub each (its metrics say its host), served together.
                let hubs = watches
                    .into_iter()
                    .map(|w| {
                        let config = hub_config(common).metric_label("host", w.name.clone());
                        EngineHub::share(w.watch, Some(Arc::from(w.name.as_str())), config)
                    })
                    .collect();
                let stdout = Stdout {
                    feeds,
                    initial: common.initial || wants_initial,
                };
                return serve_hubs(hubs, None, &printer, stdout, prepared, common).await;
            }
            let mut merge = Merge::new();
            for w in watches {
                merge = merge
                    .source(w.name.as_str(), w.watch)
                    .map_err(|e| Exit::usage("invalid sources", &e))?;
            }
            let stream = merge.map(|s| Printed::Item {
                source: Some(s.source.index()),
                item: s.item,
            });
            consume(&printer, stream, feeds).await
        }
    }
}

/// `lookout etcd`: the watch of the prefix at `at`, each source's
/// publisher status on stderr (and, served, on `/healthz`, `/events`,
/// `/metrics`).
pub async fn etcd(
    config: EtcdConfig,
    at: Location,
    common: &Common,
    serve: Option<serve::Prepared>,
    also: Also,
) -> Result<(), Exit> {
    let hosts = vec![Some(at.host.clone())];
    let printer = Printer::new("etcd", common.json).one(Some(at));
    let wants_initial = also.wants_initial();
    let feeds = also.feeds(&printer, common, hosts, None);
    if let Some(prepared) = serve {
        // The hub shares instances and the watch's statuses; the
        // publishers' are read beside it, as the hub drives the watch.
        let (watch, publishers) = lookout_etcd::watch_and_publishers(config)
            .map_err(|e| Exit::usage("invalid configuration", &e))?;
        let hubs = vec![EngineHub::share(watch, None, hub_config(common))];
        let stdout = Stdout {
            feeds,
            initial: common.initial || wants_initial,
        };
        return serve_hubs(hubs, Some(publishers), &printer, stdout, prepared, common).await;
    }
    // Each source's publisher status on stderr, in order with the events.
    let watch = lookout_etcd::watch_with_publishers(config)
        .map_err(|e| Exit::usage("invalid configuration", &e))?;
    let stream = watch.map(|i| match i {
        EtcdItem::Item(item) => one(item),
        EtcdItem::Publisher(p) => Printed::Publisher(p),
    });
    consume(&printer, stream, feeds).await
}

/// What a served run's stdout subscription feeds, and whether it starts
/// with the first snapshot (`--initial`, or the render's).
struct Stdout {
    feeds: Feeds,
    initial: bool,
}

/// A served engine's hub: `--serve-queue` items.
fn hub_config(common: &Common) -> HubConfig {
    HubConfig::default().queue(common.serve_queue as usize)
}

/// An item of the one engine of a run without several.
fn one(item: Item) -> Printed {
    Printed::Item { source: None, item }
}

/// The publisher of `--publish`, its baseline read.
async fn publisher(
    provider: &'static str,
    target: &publish::Target,
    args: &PublishArgs,
    warnings: Warnings,
) -> Result<publish::Publisher, Exit> {
    let source = args.source.clone().unwrap_or_else(publish::host_name);
    let credentials = publish::credentials(target, args.etcd_password_file.as_deref())
        .map_err(|e| Exit::Usage(format!("cannot publish: {e}")))?;
    let identity = args.etcd_cert.as_deref().zip(args.etcd_key.as_deref());
    let tls = publish::tls(
        &target.endpoints,
        args.etcd_cacert.as_deref(),
        identity,
        "--etcd-cacert",
    )
    .map_err(|e| Exit::Usage(format!("cannot publish: {e}")))?;
    let mut publisher =
        publish::Publisher::new(target, source, provider, credentials, tls, warnings)
            .map_err(|e| Exit::usage("cannot publish", &e))?;
    if let Err(e) = publisher.baseline().await {
        warnings.warn_publish(&format!(
            "cannot read this source's keys ({}); each is read when written",
            output::error_chain(&e)
        ));
    }
    Ok(publisher)
}

/// Serves `hubs` (the one engine's, unnamed, or each engine's, named, in
/// the order of the printer's sources; of `lookout etcd`, with its
/// `publishers`) and prints what they yield on stdout, as without
/// `--serve`, until SIGTERM or Ctrl-C.
async fn serve_hubs(
    hubs: Vec<EngineHub>,
    publishers: Option<Publishers>,
    printer: &Printer,
    stdout: Stdout,
    prepared: serve::Prepared,
    common: &Common,
) -> Result<(), Exit> {
    let addr = prepared.addr();
    let tls = prepared.is_tls();
    let warn_open =
        !addr.ip().is_loopback() && !prepared.has_token() && !prepared.requires_client_cert();
    let server = serve::Server::start(serve::Config {
        prepared,
        hubs: &hubs,
        publishers: publishers.as_ref(),
        provider: printer.provider(),
        readiness: common.readiness,
    })
    .map_err(|e| Exit::Failure(format!("cannot serve on {addr}: {e}")))?;
    let _ = write_line(&mut io::stderr().lock(), &output::serving_line(addr, tls));
    if warn_open {
        printer.warnings().warn(&format!(
            "serving on {addr}, which is not a loopback address, without --token-file: \
             anyone who can reach it can read every instance and its labels"
        ));
    }
    // The stores behind /instances and /healthz are fresh while something
    // polls each hub, client or not. (The binary may spawn; the library
    // crates never do.)
    #[allow(clippy::disallowed_methods)]
    let drivers: Vec<_> = hubs.iter().map(|e| tokio::spawn(e.hub.run())).collect();
    // Stdout is one more subscription (of each hub): the same lines as
    // without --serve.
    let Stdout { feeds, initial } = stdout;
    let start = if initial {
        Start::Initial
    } else {
        Start::Baseline
    };
    // The one engine of a run without several (its hub unnamed).
    let single = match hubs.as_slice() {
        [e] if e.host.is_none() => Some(&e.hub),
        _ => None,
    };
    let result = if let (Some(hub), Some(publishers)) = (single, &publishers) {
        // The publishers' statuses on stderr too, as without --serve.
        let stdout = AfterItems {
            items: hub.subscribe(start),
            publishers: publishers.changes(),
        };
        consume(printer, stdout, feeds).await
    } else if let Some(hub) = single {
        consume(printer, hub.subscribe(start).map(one), feeds).await
    } else {
        let mut merge = Merge::new();
        for e in &hubs {
            let name = e.host.clone().unwrap_or_else(|| Arc::from(""));
            merge = merge
                .source(name, e.hub.subscribe(start))
                .map_err(|e| Exit::usage("invalid sources", &e))?;
        }
        let stdout = merge.map(|s| Printed::Item {
            source: Some(s.source.index()),
            item: s.item,
        });
        consume(printer, stdout, feeds).await
    };
    server.shutdown().await;
    for driver in drivers {
        driver.abort();
    }
    result
}

/// The items of a hub's subscription and, when none is ready, the
/// publishers' changes (`lookout etcd --serve`): a change comes after the
/// events the hub held when it was read (a restarted publisher's `resync`
/// before its `connected`), as [`lookout_etcd::WithPublishers`] tells them.
struct AfterItems<S> {
    items: S,
    publishers: PublisherChanges,
}

impl<S: Stream<Item = Item> + Unpin> Stream for AfterItems<S> {
    type Item = Printed;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Printed>> {
        use std::task::Poll;
        let this = self.get_mut();
        match std::pin::Pin::new(&mut this.items).poll_next(cx) {
            Poll::Ready(item) => Poll::Ready(item.map(one)),
            Poll::Pending => std::pin::Pin::new(&mut this.publishers)
                .poll_next(cx)
                .map(|p| p.map(Printed::Publisher)),
        }
    }
}
