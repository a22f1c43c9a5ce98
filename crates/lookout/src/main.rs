//! `lookout`: one `docker events` / `kubectl get -w` for Docker, Podman, Swarm
//! and Kubernetes that survives engine restarts; and what publishers wrote to
//! etcd, read back the same way.
//!
//! Events go to stdout (one line each, flushed), connection status to stderr.
//! See `lookout --help`.

// Doc comments of the clap types are the `--help` text: no Markdown there.
#![allow(clippy::doc_markdown)]

mod output;
mod publish;
mod serve;
mod sources;

use std::io::{self, IsTerminal};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use lookout_core::{Hub, HubConfig, Item, Labels, Merge, Start, Watch, WatchConfig};
use tokio_stream::{Stream, StreamExt};

use crate::output::{Format, event_line_of, status_line_of, write_line};

/// Watch containers, services and workloads start, stop, appear and vanish —
/// across engine restarts, without losing or repeating a transition.
#[derive(Debug, Parser)]
#[command(name = "lookout", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    engine: Engine,
}

#[derive(Debug, Subcommand)]
enum Engine {
    /// Containers of a Docker engine.
    Docker(EngineArgs),
    /// Containers of Podman (its Docker-compatible API service).
    Podman(EngineArgs),
    /// Replicated and global services of a Docker Swarm (on a manager).
    Swarm(EngineArgs),
    /// Deployments and StatefulSets of a Kubernetes cluster.
    K8s(K8sArgs),
    /// Instances that publishers wrote to an etcd cluster (one key each
    /// under PREFIX/i/SOURCE/), each event saying its source
    /// (`SOURCE/instance`, JSON `host`).
    Etcd(EtcdArgs),
}

#[derive(Debug, Args)]
struct Common {
    /// Print one JSON object per line (events on stdout, status on stderr).
    #[arg(long)]
    json: bool,
    /// Also print the first snapshot as events with origin `initial`.
    #[arg(long)]
    initial: bool,
    /// Also report when each running instance becomes ready to serve, or
    /// stops being ready (events `ready` / `unready`): Docker and Podman by
    /// healthcheck (none, or healthy, and not paused), Swarm by running
    /// tasks (polled), Kubernetes by available (ready) replicas, etcd as
    /// the publisher's records say.
    #[arg(long)]
    readiness: bool,
    /// Also serve HTTP/1.1 on ADDR: `--help` says what.
    // The help text is an attribute: `[::1]` would be a link in a doc comment.
    #[arg(
        long,
        value_name = "ADDR",
        help = "Also serve HTTP/1.1 on ADDR (e.g. 127.0.0.1:7070, [::1]:0; port 0 picks \
                one): GET /events (NDJSON, or SSE with Accept: text/event-stream; \
                ?initial=true, ?label=K=V), /instances, /instances/ID (?wait=running|\
                stopped|gone, with --readiness also ready|unready; &timeout=10s), \
                /healthz, /metrics. One engine connection for every client."
    )]
    serve: Option<SocketAddr>,
    /// With --serve: every request but /healthz needs `Authorization: Bearer
    /// TOKEN`, TOKEN being this file's content (one line).
    #[arg(long, value_name = "PATH", requires = "serve")]
    token_file: Option<PathBuf>,
    /// With --serve: how many items a client may fall behind before it is
    /// resynced instead (the hub's shared queue).
    #[arg(long, value_name = "N", default_value_t = 1024, hide = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    serve_queue: u32,
    /// With --serve: the most client connections open at once (more wait in
    /// the listen backlog). lookout raises its open-files limit to the hard
    /// limit at start; each client holds one file descriptor.
    #[arg(long, value_name = "N", requires = "serve",
          default_value_t = serve::MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
}

#[derive(Debug, Args)]
struct PublishArgs {
    /// Also write each transition to etcd, one key per instance under
    /// PREFIX/i/SOURCE/ (default prefix lookout), for `lookout etcd` to read.
    /// With USER@, as that etcd user (its password: --etcd-password-file).
    /// etcds://…: over TLS, verified with --etcd-cacert.
    #[arg(long, value_name = "etcd[s]://[USER@]HOST:PORT[,HOST:PORT...][/PREFIX]",
          value_parser = publish::parse_target)]
    publish: Option<publish::Target>,
    /// With --publish etcd://USER@…: the file whose first line is USER's
    /// password (never on the command line).
    #[arg(long, value_name = "PATH", requires = "publish")]
    etcd_password_file: Option<std::path::PathBuf>,
    /// With --publish etcds://…: the CA file (PEM) that verifies the members.
    #[arg(long, value_name = "PATH", requires = "publish")]
    etcd_cacert: Option<std::path::PathBuf>,
    /// With --publish etcds://…: a client certificate (PEM) to show, with
    /// --etcd-key (etcd's --client-cert-auth).
    #[arg(long, value_name = "PATH", requires_all = ["etcd_key", "etcd_cacert"])]
    etcd_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --etcd-cert.
    #[arg(long, value_name = "PATH", requires = "etcd_cert")]
    etcd_key: Option<std::path::PathBuf>,
    /// With --publish: the source its keys are under (default: this host's name).
    #[arg(long, value_name = "NAME", requires = "publish")]
    source: Option<String>,
}

#[derive(Debug, Args)]
struct EngineArgs {
    /// Engine address: `unix:///path`, `tcp://host:port`, `https://…`, or
    /// `ssh://[user@]host[:port][/socket]` (the system ssh, as `docker -H
    /// ssh://…`, with BatchMode) (default: as the
    /// engine's CLI finds it — docker: DOCKER_HOST, DOCKER_CONTEXT, the
    /// currentContext of $DOCKER_CONFIG/config.json, /var/run/docker.sock;
    /// podman: CONTAINER_HOST, its sockets). Resolved once, at start.
    /// Repeatable, as `NAME=URI` (NAME defaults to the URI), and mixable
    /// with --context / --connection: one stream of several engines, each
    /// event and status saying its source (`NAME/instance`, JSON `host`).
    #[arg(long = "host", value_name = "[NAME=]URI", value_parser = sources::parse_host)]
    hosts: Vec<sources::Named>,
    /// docker, swarm: the docker context NAME (as `docker --context`),
    /// whatever DOCKER_HOST, DOCKER_CONTEXT and currentContext say.
    /// Repeatable: a source each, named after it.
    #[arg(long = "context", value_name = "NAME")]
    contexts: Vec<String>,
    /// podman: the connection NAME (as `podman --connection`, see `podman
    /// system connection ls`), whatever CONTAINER_CONNECTION and
    /// CONTAINER_HOST say. Repeatable: a source each, named after it.
    #[arg(long = "connection", value_name = "NAME")]
    connections: Vec<String>,
    /// Only instances with this label (repeatable; all must match).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    #[command(flatten)]
    publish: PublishArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    Deployment,
    Statefulset,
}

#[derive(Debug, Args)]
struct K8sArgs {
    /// Path to a kubeconfig (default: KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Only this namespace (default: all).
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// Which kinds to watch (repeatable; default: both).
    #[arg(long = "kind", value_enum)]
    kinds: Vec<KindArg>,
    /// A Kubernetes label selector, e.g. `app=web,tier!=db`.
    #[arg(long, value_name = "SELECTOR")]
    label_selector: Option<String>,
    /// The kubeconfig context NAME (as `kubectl --context`; default: its
    /// current-context). Repeatable: one stream of several clusters, each
    /// event and status saying its context (`NAME/instance`, JSON `host`).
    #[arg(long = "context", value_name = "NAME")]
    contexts: Vec<String>,
    #[command(flatten)]
    publish: PublishArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct EtcdArgs {
    /// The cluster's members: http://HOST:PORT, https://HOST:PORT (TLS, with
    /// --cacert) or HOST:PORT, comma-separated (tried in order; a member
    /// that fails is left for the next).
    #[arg(
        long,
        value_name = "URLS",
        env = "ETCDCTL_ENDPOINTS",
        default_value = "http://127.0.0.1:2379"
    )]
    endpoints: String,
    /// The key prefix the publishers write under.
    #[arg(long, value_name = "P", default_value = lookout_etcd::model::DEFAULT_PREFIX)]
    prefix: String,
    /// Only this source (repeatable; default: every source under the prefix).
    #[arg(long = "source", value_name = "S")]
    sources: Vec<String>,
    /// The etcd user to authenticate as (etcd's auth enabled), with
    /// --password-file.
    #[arg(long, value_name = "NAME", requires = "password_file")]
    user: Option<String>,
    /// The file whose first line is --user's password (never on the
    /// command line).
    #[arg(long, value_name = "PATH", requires = "user")]
    password_file: Option<std::path::PathBuf>,
    /// The CA file (PEM) that verifies https:// members.
    #[arg(long, value_name = "PATH")]
    cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM) to show https:// members, with --key
    /// (etcd's --client-cert-auth).
    #[arg(long, value_name = "PATH", requires_all = ["key", "cacert"])]
    cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --cert.
    #[arg(long, value_name = "PATH", requires = "cert")]
    key: Option<std::path::PathBuf>,
    #[command(flatten)]
    common: Common,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got `{s}`")),
    }
}

/// The settings of an engine speaking the Docker API (Docker, Podman, Swarm).
fn compat_config(a: &EngineArgs) -> lookout_moby::Config {
    let labels: Labels = a.labels.iter().cloned().collect();
    // The host and the context are the endpoint's (see `compat`).
    lookout_moby::Config::default()
        .labels(labels)
        .watch_config(watch_config(&a.common, a.publish.publish.is_some()))
        .readiness(a.common.readiness)
}

/// The first snapshot is told when asked, and always to a publisher (its
/// baseline's comparison).
fn watch_config(common: &Common, publish: bool) -> WatchConfig {
    WatchConfig::default().initial(common.initial || publish)
}

impl Engine {
    fn common(&self) -> &Common {
        match self {
            Self::Docker(a) | Self::Podman(a) | Self::Swarm(a) => &a.common,
            Self::K8s(a) => &a.common,
            Self::Etcd(a) => &a.common,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(io::stderr)
            .init();
    }
    // Bound, token read and metrics recorder installed before the watch
    // (the hub registers its metrics when it is made).
    let common = cli.engine.common();
    let serve = match common.serve {
        Some(addr) => match serve::Prepared::new(
            addr,
            common.token_file.as_deref(),
            common.max_connections as usize,
        ) {
            Ok(p) => Some(p),
            Err(e) => return usage_error("cannot serve", &e),
        },
        None => None,
    };
    // Serving: one worker per core for the clients; else one thread is plenty.
    let runtime = if serve.is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lookout: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(dispatch(cli.engine, serve));
    // Whatever did not end by itself (a connection past its grace) ends here.
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}

/// Exit 2 for configuration that can never work (as for bad flags).
fn usage_error(what: &str, e: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("lookout: {what}: {}", output::error_chain(e));
    ExitCode::from(2)
}

/// Where an engine is (its address) and where that came from (`context
/// NAME`, `DOCKER_HOST`, `default`…).
type Located = (String, String);

/// Where the engine of this run is (its address) and where that came from
/// (`context NAME`, `DOCKER_HOST`, `default`…): resolved once, at start,
/// and said with every `connected` status on stderr.
static ENDPOINT: std::sync::OnceLock<Located> = std::sync::OnceLock::new();

/// The watch of an engine speaking the Docker API, at the endpoint its CLI
/// would use (resolved once, here).
async fn compat<O: lookout_moby::Objects>(
    provider: &'static str,
    objects: &'static O,
    a: &EngineArgs,
    serve: Option<serve::Prepared>,
) -> ExitCode {
    // A docker context and a podman connection name an endpoint alike.
    let named: Vec<String> = a.contexts.iter().chain(&a.connections).cloned().collect();
    let named = match sources::sources(&a.hosts, &named) {
        Ok(named) => named,
        Err(e) => {
            eprintln!("lookout: {e}");
            return ExitCode::from(2);
        }
    };
    if named.len() > 1 {
        if a.publish.publish.is_some() {
            eprintln!("lookout: --publish takes one engine (a source each: one run each)");
            return ExitCode::from(2);
        }
        return compat_merged(provider, objects, a, &named, serve).await;
    }
    let endpoint = match resolve(objects, named.first()) {
        Ok(e) => e,
        Err(e) => return usage_error("cannot find the engine", &e),
    };
    warn_unverified(None, &endpoint, a.common.json);
    let _ = ENDPOINT.set((endpoint.host.to_string(), endpoint.source.to_string()));
    match lookout_moby::watch_at(objects, endpoint, compat_config(a)) {
        Ok(w) => run(provider, w, &a.common, serve, Some(&a.publish)).await,
        Err(e) => usage_error("invalid configuration", &e),
    }
}

/// Says on stderr, whatever `RUST_LOG` says, when the engine's TLS
/// certificate is not verified (as the docker CLI does not verify it).
fn warn_unverified(source: Option<&str>, endpoint: &lookout_moby::Endpoint, json: bool) {
    let Some(why) = endpoint.unverified() else {
        return;
    };
    let of = source.map(|s| format!(" ({s})")).unwrap_or_default();
    let warning = format!(
        "the TLS certificate of {}{of} is not verified ({why}): anyone on the path can \
         pose as the engine",
        endpoint.host
    );
    let line = if json {
        serde_json::json!({ "warning": warning }).to_string()
    } else {
        format!("lookout: warning: {warning}")
    };
    let _ = write_line(&mut io::stderr().lock(), &line);
}

/// The endpoint of one source (none: as the engine's CLI finds it).
fn resolve<O: lookout_moby::Objects>(
    objects: &'static O,
    source: Option<&sources::Named>,
) -> Result<lookout_moby::Endpoint, lookout_moby::ConfigError> {
    let (host, context) = match source {
        Some(sources::Named::Host { uri, .. }) => (Some(uri.as_str()), None),
        Some(sources::Named::Context { name }) => (None, Some(name.as_str())),
        None => (None, None),
    };
    lookout_moby::Endpoint::resolve(objects.discovery(), host, context)
}

/// Several engines in one stream: a watch each, merged.
async fn compat_merged<O: lookout_moby::Objects>(
    provider: &'static str,
    objects: &'static O,
    a: &EngineArgs,
    named: &[sources::Named],
    serve: Option<serve::Prepared>,
) -> ExitCode {
    let mut watches = Vec::with_capacity(named.len());
    for source in named {
        let name = source.name();
        let endpoint = match resolve(objects, Some(source)) {
            Ok(e) => e,
            Err(e) => return usage_error(&format!("cannot find the engine `{name}`"), &e),
        };
        warn_unverified(Some(name), &endpoint, a.common.json);
        let at = (endpoint.host.to_string(), endpoint.source.to_string());
        match lookout_moby::watch_at(objects, endpoint, compat_config(a)) {
            Ok(w) => watches.push((name.to_owned(), w, Some(at))),
            Err(e) => return usage_error(&format!("invalid configuration of `{name}`"), &e),
        }
    }
    merged(provider, watches, &a.common, serve).await
}

/// Several sources in one stream on stdout: each `(name, watch, where its
/// engine is and where that came from, when known at start)`, merged.
async fn merged<D: lookout_core::Dial>(
    provider: &'static str,
    watches: Vec<(String, Watch<D>, Option<Located>)>,
    common: &Common,
    serve: Option<serve::Prepared>,
) -> ExitCode {
    if let Some(prepared) = serve {
        // A hub each (its metrics say its host), served together.
        let hub_config = || HubConfig::default().queue(common.serve_queue as usize);
        let mut hubs = Vec::with_capacity(watches.len());
        let mut labelled = Vec::with_capacity(watches.len());
        for (name, watch, at) in watches {
            let hub = watch.share_with(hub_config().metric_label("host", name.clone()));
            hubs.push((Some(Arc::<str>::from(name.as_str())), hub));
            labelled.push((name, at));
        }
        return serve_hubs(provider, hubs, None, &labelled, common, prepared).await;
    }
    let mut merge = Merge::new();
    let mut labelled = Vec::with_capacity(watches.len());
    for (name, watch, at) in watches {
        merge = match merge.source(name.as_str(), watch) {
            Ok(m) => m,
            Err(e) => return usage_error("invalid sources", &e),
        };
        labelled.push((name, at));
    }
    let (events_fmt, status_fmt) = formats(common);
    let stream = merge.map(|s| (Some(s.source.index()), s.item));
    consume(provider, stream, &labelled, events_fmt, status_fmt).await
}

/// How events (stdout) and statuses (stderr) are printed.
fn formats(common: &Common) -> (Format, Format) {
    let stdout_tty = io::stdout().is_terminal();
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let events_fmt = Format {
        json: common.json,
        color: stdout_tty && !no_color,
    };
    let status_fmt = Format {
        json: common.json,
        color: false,
    };
    (events_fmt, status_fmt)
}

async fn dispatch(engine: Engine, serve: Option<serve::Prepared>) -> ExitCode {
    match engine {
        Engine::Docker(a) | Engine::Swarm(a) if !a.connections.is_empty() => {
            eprintln!(
                "lookout: --connection names a podman connection; docker has contexts \
                 (--context NAME, DOCKER_CONTEXT)"
            );
            ExitCode::from(2)
        }
        Engine::Docker(a) => compat("docker", &lookout_docker::MAPPING, &a, serve).await,
        Engine::Podman(a) if !a.contexts.is_empty() => {
            eprintln!(
                "lookout: --context names a docker context; podman has connections \
                 (--connection NAME, CONTAINER_CONNECTION)"
            );
            ExitCode::from(2)
        }
        Engine::Podman(a) => compat("podman", &lookout_podman::MAPPING, &a, serve).await,
        Engine::Swarm(a) => compat("swarm", &lookout_swarm::SERVICES, &a, serve).await,
        Engine::K8s(a) => k8s(a, serve).await,
        Engine::Etcd(a) => etcd(a, serve).await,
    }
}

/// `lookout etcd`: one watch of the prefix (of every source, or of those
/// named), each event's source printed as its host.
async fn etcd(a: EtcdArgs, serve: Option<serve::Prepared>) -> ExitCode {
    let mut config = match lookout_etcd::EtcdConfig::new(&a.endpoints) {
        Ok(c) => c,
        Err(e) => return usage_error("invalid configuration", &e),
    };
    config.prefix.clone_from(&a.prefix);
    config.sources.clone_from(&a.sources);
    config.readiness = a.common.readiness;
    config.watch = lookout_etcd::EtcdConfig::default_watch().initial(a.common.initial);
    if let (Some(user), Some(file)) = (&a.user, &a.password_file) {
        match lookout_etcd::Credentials::from_file(user.as_str(), file) {
            Ok(c) => config.credentials = Some(c),
            Err(e) => return usage_error("invalid configuration", &e),
        }
    }
    let identity = a.cert.as_deref().zip(a.key.as_deref());
    match publish::tls(&config.endpoints, a.cacert.as_deref(), identity, "--cacert") {
        Ok(tls) => config.tls = tls,
        Err(e) => {
            eprintln!("lookout: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    }
    let _ = ENDPOINT.set((a.endpoints.clone(), "--endpoints".to_owned()));
    if let Some(prepared) = serve {
        // The hub shares instances and the watch's statuses; the
        // publishers' are read beside it, as the hub drives the watch.
        return match lookout_etcd::watch_and_publishers(config) {
            Ok((w, publishers)) => {
                let hub = w.share_with(HubConfig::default().queue(a.common.serve_queue as usize));
                let hubs = vec![(None, hub)];
                serve_hubs("etcd", hubs, Some(publishers), &[], &a.common, prepared).await
            }
            Err(e) => usage_error("invalid configuration", &e),
        };
    }
    // Each source's publisher status on stderr, in order with the events.
    match lookout_etcd::watch_with_publishers(config) {
        Ok(w) => {
            let (events_fmt, status_fmt) = formats(&a.common);
            let stream = w.map(|i| match i {
                lookout_etcd::EtcdItem::Item(item) => Printed::Item(None, item),
                lookout_etcd::EtcdItem::Publisher(p) => Printed::Publisher(p),
            });
            consume_all("etcd", stream, &[], events_fmt, status_fmt).await
        }
        Err(e) => usage_error("invalid configuration", &e),
    }
}

/// `lookout k8s`: one cluster, or with `--context` repeated one stream of
/// several.
async fn k8s(a: K8sArgs, serve: Option<serve::Prepared>) -> ExitCode {
    let kinds = if a.kinds.is_empty() {
        vec![
            lookout_k8s::Kind::Deployment,
            lookout_k8s::Kind::StatefulSet,
        ]
    } else {
        a.kinds
            .iter()
            .map(|k| match k {
                KindArg::Deployment => lookout_k8s::Kind::Deployment,
                KindArg::Statefulset => lookout_k8s::Kind::StatefulSet,
            })
            .collect()
    };
    let config = |context: Option<&String>| lookout_k8s::K8sConfig {
        kubeconfig: a.kubeconfig.clone(),
        context: context.cloned(),
        namespace: a.namespace.clone(),
        kinds: kinds.clone(),
        label_selector: a.label_selector.clone(),
        // No periodic or lag relist: the watch protocol resumes
        // from its resourceVersion and says when it cannot (410).
        watch: lookout_k8s::K8sConfig::default_watch()
            .initial(a.common.initial || a.publish.publish.is_some()),
        readiness: a.common.readiness,
    };
    if a.contexts.len() <= 1 {
        return match lookout_k8s::watch(config(a.contexts.first())) {
            Ok(w) => run("k8s", w, &a.common, serve, Some(&a.publish)).await,
            Err(e) => usage_error("invalid configuration", &e),
        };
    }
    if a.publish.publish.is_some() {
        eprintln!("lookout: --publish takes one cluster (a source each: one run each)");
        return ExitCode::from(2);
    }
    let mut watches = Vec::with_capacity(a.contexts.len());
    for context in &a.contexts {
        match lookout_k8s::watch(config(Some(context))) {
            // Where the cluster is, the kubeconfig says at each dial.
            Ok(w) => watches.push((context.clone(), w, None)),
            Err(e) => return usage_error(&format!("invalid configuration of `{context}`"), &e),
        }
    }
    merged("k8s", watches, &a.common, serve).await
}

async fn run<D: lookout_core::Dial>(
    provider: &'static str,
    watch: Watch<D>,
    common: &Common,
    serve: Option<serve::Prepared>,
    publish: Option<&PublishArgs>,
) -> ExitCode {
    let (events_fmt, status_fmt) = formats(common);
    if let Some(PublishArgs {
        publish: Some(target),
        source,
        etcd_password_file,
        etcd_cacert,
        etcd_cert,
        etcd_key,
    }) = publish
    {
        if serve.is_some() {
            eprintln!("lookout: --publish and --serve do not go together yet");
            return ExitCode::from(2);
        }
        let source = source.clone().unwrap_or_else(publish::host_name);
        let credentials = match publish::credentials(target, etcd_password_file.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("lookout: cannot publish: {e}");
                return ExitCode::from(2);
            }
        };
        let identity = etcd_cert.as_deref().zip(etcd_key.as_deref());
        let tls = match publish::tls(
            &target.endpoints,
            etcd_cacert.as_deref(),
            identity,
            "--etcd-cacert",
        ) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("lookout: cannot publish: {e}");
                return ExitCode::from(2);
            }
        };
        let mut publisher =
            match publish::Publisher::new(target, source, provider, credentials, tls) {
                Ok(p) => p,
                Err(e) => return usage_error("cannot publish", &e),
            };
        publish::json_warnings(common.json);
        if let Err(e) = publisher.baseline().await {
            publish::warn(&format!(
                "cannot read this source's keys ({}); each is read when written",
                output::error_chain(&e)
            ));
        }
        let out = Out {
            events: events_fmt,
            status: status_fmt,
            initial: common.initial,
        };
        return consume_publishing(provider, watch.map(|i| (None, i)), out, publisher).await;
    }
    let Some(prepared) = serve else {
        return consume(
            provider,
            watch.map(|i| (None, i)),
            &[],
            events_fmt,
            status_fmt,
        )
        .await;
    };
    let hub = watch.share_with(HubConfig::default().queue(common.serve_queue as usize));
    serve_hubs(provider, vec![(None, hub)], None, &[], common, prepared).await
}

/// Serves `hubs` (one `(None, hub)`, or each engine's `(Some(name), hub)`,
/// in the order of `sources`; of `lookout etcd`, with its `publishers`)
/// and prints what they yield on stdout, as without `--serve`, until
/// SIGTERM or Ctrl-C.
async fn serve_hubs(
    provider: &'static str,
    hubs: Vec<(Option<Arc<str>>, Hub)>,
    publishers: Option<lookout_etcd::Publishers>,
    sources: &[(String, Option<Located>)],
    common: &Common,
    prepared: serve::Prepared,
) -> ExitCode {
    let (events_fmt, status_fmt) = formats(common);
    let addr = prepared.addr();
    let warn_open = !addr.ip().is_loopback() && !prepared.has_token();
    let queue = common.serve_queue as usize;
    let started = serve::Server::start(
        prepared,
        &hubs,
        publishers.as_ref(),
        provider,
        common.readiness,
        queue,
    );
    let server = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lookout: cannot serve on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let _ = write_line(&mut io::stderr().lock(), &output::serving_line(addr));
    if warn_open {
        let warning = format!(
            "serving on {addr}, which is not a loopback address, without --token-file: \
             anyone who can reach it can read every instance and its labels"
        );
        let line = if common.json {
            serde_json::json!({ "warning": warning }).to_string()
        } else {
            format!("lookout: warning: {warning}")
        };
        let _ = write_line(&mut io::stderr().lock(), &line);
    }
    // The stores behind /instances and /healthz are fresh while something
    // polls each hub, client or not. (The binary may spawn; the library
    // crates never do.)
    #[allow(clippy::disallowed_methods)]
    let drivers: Vec<_> = hubs
        .iter()
        .map(|(_, hub)| tokio::spawn(hub.run()))
        .collect();
    // Stdout is one more subscription (of each hub): the same lines as
    // without --serve.
    let start = if common.initial {
        Start::Initial
    } else {
        Start::Baseline
    };
    let code = if let ([(None, hub)], Some(publishers)) = (hubs.as_slice(), &publishers) {
        // The publishers' statuses on stderr too, as without --serve.
        let stdout = AfterItems {
            items: hub.subscribe(start),
            publishers: publishers.changes(),
        };
        consume_all(provider, stdout, &[], events_fmt, status_fmt).await
    } else if let [(None, hub)] = hubs.as_slice() {
        let stdout = hub.subscribe(start).map(|i| (None, i));
        consume(provider, stdout, &[], events_fmt, status_fmt).await
    } else {
        let mut merge = Merge::new();
        for (name, hub) in &hubs {
            let name = name.clone().unwrap_or_else(|| Arc::from(""));
            merge = match merge.source(name, hub.subscribe(start)) {
                Ok(m) => m,
                Err(e) => return usage_error("invalid sources", &e),
            };
        }
        let stdout = merge.map(|s| (Some(s.source.index()), s.item));
        consume(provider, stdout, sources, events_fmt, status_fmt).await
    };
    server.shutdown().await;
    for driver in drivers {
        driver.abort();
    }
    code
}

/// A `connected` status line with where the engine is and where that came
/// from: `… (unix:///var/run/docker.sock, from default)`, or in JSON the
/// fields `endpoint` and `from`.
fn with_endpoint(line: String, (host, from): &Located, f: Format) -> String {
    if !f.json {
        return format!("{line} ({host}, from {from})");
    }
    match serde_json::from_str::<serde_json::Value>(&line) {
        Ok(serde_json::Value::Object(mut o)) => {
            o.insert("endpoint".to_owned(), host.as_str().into());
            o.insert("from".to_owned(), from.as_str().into());
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

/// SIGTERM, listened for.
fn sigterm() -> Result<tokio::signal::unix::Signal, ExitCode> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|e| {
        eprintln!("lookout: cannot listen for SIGTERM: {e}");
        ExitCode::FAILURE
    })
}

/// Writes an event line to stdout: `Err` with the exit code when the run
/// must end (a reader gone: quietly).
fn print_event(line: &str) -> Result<(), ExitCode> {
    match blocking_write(|| write_line(&mut io::stdout().lock(), line)) {
        Ok(()) => Ok(()),
        // The reader went away (`lookout … | head`): exit quietly.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("lookout: cannot write to stdout: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// How a publishing run prints.
#[derive(Clone, Copy)]
struct Out {
    events: Format,
    status: Format,
    /// Print the first snapshot (the publisher always gets it).
    initial: bool,
}

/// Prints what `stream` yields, as [`consume`] does, and publishes it,
/// until SIGTERM or Ctrl-C.
async fn consume_publishing(
    provider: &str,
    mut stream: impl Stream<Item = (Option<usize>, Item)> + Unpin,
    out: Out,
    publisher: publish::Publisher,
) -> ExitCode {
    // On a task of its own: the feed is read and printed whatever etcd does.
    let publisher = publish::Running::start(publisher);
    let mut sigterm = match sigterm() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut ctrl_c = pin!(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            _ = &mut ctrl_c => return publisher.stop().await,
            _ = sigterm.recv() => return publisher.stop().await,
            item = stream.next() => match item {
                Some((_, Item::Event(e))) => {
                    publisher.event(&e);
                    if e.origin == lookout_core::Origin::Initial && !out.initial {
                        continue;
                    }
                    let line = event_line_of(None, provider, &e, out.events);
                    if let Err(code) = print_event(&line) {
                        return code;
                    }
                }
                Some((_, Item::Status(s))) => {
                    publisher.status(&s);
                    let line = status_line_of(None, provider, &s, out.status);
                    let line = match (&s, ENDPOINT.get()) {
                        (lookout_core::Status::Connected { .. }, Some(at)) => {
                            with_endpoint(line, at, out.status)
                        }
                        _ => line,
                    };
                    let _ = write_line(&mut io::stderr().lock(), &line);
                }
                None => {
                    eprintln!("lookout: the event stream ended unexpectedly");
                    return ExitCode::FAILURE;
                }
            },
        }
    }
}

/// Prints what `stream` yields until SIGTERM or Ctrl-C. Each item comes
/// with its source's index in `sources` (its name, and where its engine is
/// and where that came from, when known at start); `None` for the one
/// engine of a run without several, whose endpoint is [`ENDPOINT`].
async fn consume(
    provider: &str,
    stream: impl Stream<Item = (Option<usize>, Item)> + Unpin,
    sources: &[(String, Option<Located>)],
    events_fmt: Format,
    status_fmt: Format,
) -> ExitCode {
    let stream = stream.map(|(source, item)| Printed::Item(source, item));
    consume_all(provider, stream, sources, events_fmt, status_fmt).await
}

/// What a run prints: an item of a source (see [`consume`]), or a source's
/// publisher status (`lookout etcd`).
enum Printed {
    Item(Option<usize>, Item),
    Publisher(lookout_etcd::PublisherStatus),
}

/// The items of a hub's subscription and, when none is ready, the
/// publishers' changes (`lookout etcd --serve`): a change comes after the
/// events the hub held when it was read (a restarted publisher's `resync`
/// before its `connected`), as [`lookout_etcd::WithPublishers`] tells them.
struct AfterItems<S> {
    items: S,
    publishers: lookout_etcd::PublisherChanges,
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
            Poll::Ready(item) => Poll::Ready(item.map(|i| Printed::Item(None, i))),
            Poll::Pending => std::pin::Pin::new(&mut this.publishers)
                .poll_next(cx)
                .map(|p| p.map(Printed::Publisher)),
        }
    }
}

/// [`consume`], with the publishers' statuses of `lookout etcd` on stderr.
async fn consume_all(
    provider: &str,
    mut stream: impl Stream<Item = Printed> + Unpin,
    sources: &[(String, Option<Located>)],
    events_fmt: Format,
    status_fmt: Format,
) -> ExitCode {
    let mut sigterm = match sigterm() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut ctrl_c = pin!(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            _ = &mut ctrl_c => return ExitCode::SUCCESS,
            _ = sigterm.recv() => return ExitCode::SUCCESS,
            item = stream.next() => match item {
                Some(Printed::Publisher(p)) => {
                    let line = output::publisher_line(&p, status_fmt);
                    let _ = blocking_write(|| write_line(&mut io::stderr().lock(), &line));
                }
                Some(Printed::Item(source, Item::Event(e))) => {
                    let host = source.and_then(|i| sources.get(i)).map(|s| s.0.as_str());
                    let line = match (host, output::source_in_id(provider, &e)) {
                        (None, Some((host, e))) => event_line_of(Some(host), provider, &e, events_fmt),
                        _ => event_line_of(host, provider, &e, events_fmt),
                    };
                    if let Err(code) = print_event(&line) {
                        return code;
                    }
                }
                Some(Printed::Item(source, Item::Status(s))) => {
                    // A closed stderr is no reason to stop delivering events.
                    let of = source.and_then(|i| sources.get(i));
                    let line = status_line_of(of.map(|s| s.0.as_str()), provider, &s, status_fmt);
                    let endpoint = match of {
                        Some(s) => s.1.as_ref(),
                        None => ENDPOINT.get(),
                    };
                    let line = match (&s, endpoint) {
                        (lookout_core::Status::Connected { .. }, Some(at)) => {
                            with_endpoint(line, at, status_fmt)
                        }
                        _ => line,
                    };
                    let _ = blocking_write(|| write_line(&mut io::stderr().lock(), &line));
                }
                None => {
                    eprintln!("lookout: the event stream ended unexpectedly");
                    return ExitCode::FAILURE;
                }
            },
        }
    }
}
