//! The command line: the clap types, whose doc comments are the `--help`
//! text (no Markdown there), and the flags' own parsers and rules (the
//! sources `--host` and `--context` name: [`Named`]).

// Doc comments of the clap types are the `--help` text: no Markdown there.
#![allow(clippy::doc_markdown)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::{publish, render, serve};

/// Watch containers, services and workloads start, stop, appear and vanish —
/// across engine restarts, without losing or repeating a transition.
#[derive(Debug, Parser)]
#[command(name = "lookout", version = VERSION, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// `lookout --version`: `0.1.0 (git 0123456789ab)`, the revision the binary
/// was built from (build.rs: the checkout's HEAD, or the commit `cargo
/// package` recorded; `unknown` when neither could be read).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("LOOKOUT_REVISION"),
    ")"
);

// Parsed once at start and moved into its run: the size difference between
// an engine's flags and the other commands costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(flatten)]
    Engine(Engine),
    /// Print the completion script of SHELL on stdout, e.g. `lookout
    /// completions bash > /usr/share/bash-completion/completions/lookout`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page lookout(1) (roff) on stdout, e.g. `lookout man
    /// | man -l -`; with --dir, write it and one page per subcommand
    /// (lookout-docker.1, …) there.
    Man {
        /// Write lookout.1 and lookout-SUBCOMMAND.1 into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// GET an http:// URL and exit 0 when it answers 2xx, 1 otherwise (a
    /// container's HEALTHCHECK: `lookout probe http://127.0.0.1:7070/healthz`).
    Probe(ProbeArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    // The help text is an attribute: `[:PORT]` would be a link in a doc comment.
    #[arg(
        value_name = "URL",
        help = "The URL: http://HOST[:PORT][/PATH], or https:// (with --cacert or --insecure)"
    )]
    pub url: String,
    /// With https://: the CA the server's certificate is checked against.
    #[arg(long, value_name = "PATH", conflicts_with = "insecure")]
    pub cacert: Option<std::path::PathBuf>,
    /// With https://: take any server certificate (its signatures still
    /// checked): for a probe of this host's own lookout, whose name its
    /// certificate may not hold.
    #[arg(long, short = 'k')]
    pub insecure: bool,
    /// With https://: the client certificate to show (PEM; for
    /// --serve-client-ca).
    #[arg(long, value_name = "PATH", requires = "key")]
    pub cert: Option<std::path::PathBuf>,
    /// With https://: the client certificate's key (PEM).
    #[arg(long, value_name = "PATH", requires = "cert")]
    pub key: Option<std::path::PathBuf>,
    /// Give up after this long (connect, send and answer), e.g. 5s, 500ms.
    #[arg(long, value_name = "DURATION", default_value = "5s",
          value_parser = parse_timeout)]
    pub timeout: std::time::Duration,
}

#[derive(Debug, Subcommand)]
pub enum Engine {
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
pub struct Common {
    /// Print one JSON object per line (events on stdout, status on stderr).
    #[arg(long)]
    pub json: bool,
    /// Also print the first snapshot as events with origin `initial`.
    #[arg(long)]
    pub initial: bool,
    /// Also report when each running instance becomes ready to serve, or
    /// stops being ready (events `ready` / `unready`): Docker and Podman by
    /// healthcheck (none, or healthy, and not paused), Swarm by running
    /// tasks (polled), Kubernetes by available (ready) replicas, etcd as
    /// the publisher's records say.
    #[arg(long)]
    pub readiness: bool,
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
    pub serve: Option<SocketAddr>,
    /// With --serve: every request but /healthz needs `Authorization: Bearer
    /// TOKEN`, TOKEN being this file's content (one line).
    #[arg(long, value_name = "PATH", requires = "serve")]
    pub token_file: Option<PathBuf>,
    /// With --serve: how many items a client may fall behind before it is
    /// resynced instead (the hub's shared queue).
    #[arg(long, value_name = "N", default_value_t = 1024, hide = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub serve_queue: u32,
    /// With --serve: the most client connections open at once (beyond, a
    /// newcomer takes the oldest idle connection's place, else gets 503).
    /// lookout raises its open-files limit to the hard limit at start; each
    /// client holds one file descriptor.
    #[arg(long, value_name = "N", requires = "serve",
          default_value_t = serve::MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// With --serve: serve HTTPS (TLS 1.2 and 1.3) with this PEM
    /// certificate chain, the server's own first, and the key of
    /// --serve-key. Both are read again when either file changes (looked at
    /// every second) and on SIGHUP; a pair that does not load then keeps
    /// the one in use (a warning says why).
    #[arg(long, value_name = "PATH", requires = "serve", requires = "serve_key")]
    pub serve_cert: Option<PathBuf>,
    /// With --serve-cert: its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PATH", requires = "serve", requires = "serve_cert")]
    pub serve_key: Option<PathBuf>,
    /// With --serve-cert: require a client certificate signed by a CA of
    /// this PEM file (mutual TLS; --token-file still applies on top). Read
    /// again with the certificate.
    #[arg(long, value_name = "PATH", requires = "serve_cert")]
    pub serve_client_ca: Option<PathBuf>,
    /// Render TEMPLATE (minijinja: Jinja2's syntax) into DEST after each
    /// burst of changes (see --wait), writing DEST (a temporary file in its
    /// folder, renamed; its mode kept) only when its text changed. The
    /// template sees `instances`, sorted by id, each with id, provider,
    /// host, labels, running, ready (null without --readiness), stopping,
    /// outcome, exit_code, message, uid, since and, of Docker and Podman,
    /// networks (name -> {ip}) and ports ([{port, protocol, published}];
    /// Swarm: a service's ports). Repeatable. A template that does not
    /// parse exits 2 (with its line and column); one that fails to render
    /// keeps the last good DEST, with a warning.
    #[arg(long = "render", value_name = "TEMPLATE:DEST", value_parser = render::parse_spec)]
    pub renders: Vec<render::Spec>,
    /// With --render: run CMD once DEST changed (e.g. "nginx -s reload";
    /// split into words as a shell would, run without one: write sh -c
    /// '...' for one). Its exit status and stderr are said on stderr (its
    /// stdout is dropped: lookout's carries events); a failure is retried
    /// after the next change.
    #[arg(long, value_name = "CMD", requires = "renders")]
    pub notify: Option<String>,
    /// With --render: render MIN after the last change of a burst, at most
    /// MAX after its first (docker-gen's -wait), e.g. 500ms:2s.
    #[arg(long, value_name = "MIN[:MAX]", default_value = "500ms:2s",
          value_parser = render::parse_wait)]
    pub wait: render::debounce::Wait,
    /// Run CMD for each event printed, one at a time and in order, the
    /// event's JSON line (as --json prints it) on its stdin (split into
    /// words as a shell would, run without one). Its failures and their
    /// stderr are said on stderr; its stdout is dropped. A slow CMD holds nothing up: beyond 4096 queued events, each
    /// instance's latest event replaces its queued one (with a warning).
    #[arg(long, value_name = "CMD")]
    pub exec: Option<String>,
}

impl Common {
    /// The TLS files of `--serve-cert`, `--serve-key`, `--serve-client-ca`.
    pub fn tls_files(&self) -> Option<serve::TlsFiles> {
        Some(serve::TlsFiles {
            cert: self.serve_cert.clone()?,
            key: self.serve_key.clone()?,
            client_ca: self.serve_client_ca.clone(),
        })
    }
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Also write each transition to etcd, one key per instance under
    /// PREFIX/i/SOURCE/ (default prefix lookout), for `lookout etcd` to read.
    /// With USER@, as that etcd user (its password: --etcd-password-file).
    /// etcds://…: over TLS, verified with --etcd-cacert.
    #[arg(long, value_name = "etcd[s]://[USER@]HOST:PORT[,HOST:PORT...][/PREFIX]",
          value_parser = publish::parse_target)]
    pub publish: Option<publish::Target>,
    /// With --publish etcd://USER@…: the file whose first line is USER's
    /// password (never on the command line).
    #[arg(long, value_name = "PATH", requires = "publish")]
    pub etcd_password_file: Option<std::path::PathBuf>,
    /// With --publish etcds://…: the CA file (PEM) that verifies the members.
    #[arg(long, value_name = "PATH", requires = "publish")]
    pub etcd_cacert: Option<std::path::PathBuf>,
    /// With --publish etcds://…: a client certificate (PEM) to show, with
    /// --etcd-key (etcd's --client-cert-auth).
    #[arg(long, value_name = "PATH", requires_all = ["etcd_key", "etcd_cacert"])]
    pub etcd_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --etcd-cert.
    #[arg(long, value_name = "PATH", requires = "etcd_cert")]
    pub etcd_key: Option<std::path::PathBuf>,
    /// With --publish: the source its keys are under (default: this host's name).
    #[arg(long, value_name = "NAME", requires = "publish")]
    pub source: Option<String>,
}

#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Engine address: `unix:///path`, `tcp://host:port`, `https://…`, or
    /// `ssh://[user@]host[:port][/socket]` (the system ssh, as `docker -H
    /// ssh://…`, with BatchMode) (default: as the
    /// engine's CLI finds it — docker: DOCKER_HOST, DOCKER_CONTEXT, the
    /// currentContext of $DOCKER_CONFIG/config.json, /var/run/docker.sock;
    /// podman: CONTAINER_HOST, its sockets). Resolved once, at start.
    /// Repeatable, as `NAME=URI` (NAME defaults to the URI), and mixable
    /// with --context / --connection: one stream of several engines, each
    /// event and status saying its source (`NAME/instance`, JSON `host`).
    #[arg(long = "host", value_name = "[NAME=]URI", value_parser = parse_host)]
    pub hosts: Vec<Named>,
    /// docker, swarm: the docker context NAME (as `docker --context`),
    /// whatever DOCKER_HOST, DOCKER_CONTEXT and currentContext say.
    /// Repeatable: a source each, named after it.
    #[arg(long = "context", value_name = "NAME")]
    pub contexts: Vec<String>,
    /// podman: the connection NAME (as `podman --connection`, see `podman
    /// system connection ls`), whatever CONTAINER_CONNECTION and
    /// CONTAINER_HOST say. Repeatable: a source each, named after it.
    #[arg(long = "connection", value_name = "NAME")]
    pub connections: Vec<String>,
    /// Only instances with this label (repeatable; all must match).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    #[command(flatten)]
    pub publish: PublishArgs,
    #[command(flatten)]
    pub common: Common,
}

/// One source the flags name, before its endpoint is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// `--host [NAME=]URI`: NAME defaults to the URI.
    Host { name: String, uri: String },
    /// `--context NAME`: named after the context.
    Context { name: String },
}

impl Named {
    pub fn name(&self) -> &str {
        match self {
            Self::Host { name, .. } | Self::Context { name } => name,
        }
    }
}

/// `NAME=URI`, or a bare `URI` named after itself. A NAME is what comes
/// before the first `=` when that holds neither `:` nor `/` (so that a URI
/// with an `=` in its query stays whole).
pub fn parse_host(arg: &str) -> Result<Named, String> {
    let (name, uri) = match arg.split_once('=') {
        Some((name, uri)) if !name.contains([':', '/']) => {
            if name.is_empty() {
                return Err(format!("`{arg}`: an empty NAME before `=`"));
            }
            (name.to_owned(), uri.to_owned())
        }
        _ => (arg.to_owned(), arg.to_owned()),
    };
    if uri.is_empty() {
        return Err(format!("`{arg}`: no URI after `{name}=`"));
    }
    Ok(Named::Host { name, uri })
}

/// The sources of `hosts` and `contexts`, in the order given (hosts first,
/// then contexts); an error names a NAME given twice. An unnamed `--host
/// URI` with a context is refused, as the docker CLI refuses `-H` with
/// `--context` (one engine, two answers): named (`--host NAME=URI`), both
/// are watched.
fn named(hosts: &[Named], contexts: &[String]) -> Result<Vec<Named>, String> {
    if !contexts.is_empty()
        && let Some(Named::Host { uri, .. }) = hosts
            .iter()
            .find(|h| matches!(h, Named::Host { name, uri } if name == uri))
    {
        return Err(format!(
            "an unnamed --host ({uri}) with --context/--connection: which engine is it? \
             (the docker CLI refuses -H with --context); to watch both, name the host: \
             --host NAME={uri}"
        ));
    }
    let all: Vec<Named> = hosts
        .iter()
        .cloned()
        .chain(contexts.iter().map(|c| Named::Context { name: c.clone() }))
        .collect();
    let mut seen = HashSet::new();
    for s in &all {
        if !seen.insert(s.name()) {
            return Err(format!(
                "the source name `{}` is given twice: name each source once \
                 (`--host NAME=URI`)",
                s.name()
            ));
        }
    }
    Ok(all)
}

impl EngineArgs {
    /// The sources of `--host` and `--context` (or `--connection`: a docker
    /// context and a podman connection name an endpoint alike), as
    /// [`named`] checks them.
    pub fn sources(&self) -> Result<Vec<Named>, String> {
        let contexts: Vec<String> = self
            .contexts
            .iter()
            .chain(&self.connections)
            .cloned()
            .collect();
        named(&self.hosts, &contexts)
    }
}

/// `--kind`'s value: any kind [`lookout_k8s::KindRef`] reads; the built-in
/// workloads offered to completion.
#[derive(Clone, Copy, Debug)]
pub struct KindParser;

impl clap::builder::TypedValueParser for KindParser {
    type Value = lookout_k8s::KindRef;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let text = value
            .to_str()
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidUtf8).with_cmd(cmd))?;
        lookout_k8s::KindRef::parse(text).map_err(|e| {
            let name = arg.map_or_else(|| "--kind".to_owned(), ToString::to_string);
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value '{text}' for '{name}': {e}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            ["deployment", "statefulset", "daemonset"]
                .into_iter()
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

#[derive(Debug, Args)]
pub struct K8sArgs {
    /// Path to a kubeconfig (default: KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Only this namespace (default: all).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    #[arg(
        long = "kind",
        value_name = "KIND",
        value_parser = KindParser,
        hide_possible_values = true,
        help = "Which kinds to watch (repeatable; default: deployment and statefulset): \
                deployment, statefulset, daemonset (or their plural or short names), or any \
                namespaced kind, a custom resource's as GROUP/VERSION/KIND or NAME[.GROUP] \
                (`postgresql.cnpg.io/v1/Cluster`, `clusters`). A kind the cluster does not \
                serve exits 2"
    )]
    pub kinds: Vec<lookout_k8s::KindRef>,
    /// A Kubernetes label selector, e.g. `app=web,tier!=db`.
    #[arg(long, value_name = "SELECTOR")]
    pub label_selector: Option<String>,
    /// The kubeconfig context NAME (as `kubectl --context`; default: its
    /// current-context). Repeatable: one stream of several clusters, each
    /// event and status saying its context (`NAME/instance`, JSON `host`).
    #[arg(long = "context", value_name = "NAME")]
    pub contexts: Vec<String>,
    #[command(flatten)]
    pub publish: PublishArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Args)]
pub struct EtcdArgs {
    /// The cluster's members: http://HOST:PORT, https://HOST:PORT (TLS, with
    /// --cacert) or HOST:PORT, comma-separated (tried in order; a member
    /// that fails is left for the next).
    #[arg(
        long,
        value_name = "URLS",
        env = "ETCDCTL_ENDPOINTS",
        default_value = "http://127.0.0.1:2379"
    )]
    pub endpoints: String,
    /// The key prefix the publishers write under.
    #[arg(long, value_name = "P", default_value = lookout_etcd::model::DEFAULT_PREFIX)]
    pub prefix: String,
    /// Only this source (repeatable; default: every source under the prefix).
    #[arg(long = "source", value_name = "S")]
    pub sources: Vec<String>,
    /// The etcd user to authenticate as (etcd's auth enabled), with
    /// --password-file.
    #[arg(long, value_name = "NAME", requires = "password_file")]
    pub user: Option<String>,
    /// The file whose first line is --user's password (never on the
    /// command line).
    #[arg(long, value_name = "PATH", requires = "user")]
    pub password_file: Option<std::path::PathBuf>,
    /// The CA file (PEM) that verifies https:// members.
    #[arg(long, value_name = "PATH")]
    pub cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM) to show https:// members, with --key
    /// (etcd's --client-cert-auth).
    #[arg(long, value_name = "PATH", requires_all = ["key", "cacert"])]
    pub cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --cert.
    #[arg(long, value_name = "PATH", requires = "cert")]
    pub key: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    crate::duration::parse_duration(s)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("expected a duration such as 5s or 500ms, got `{s}`"))
}

pub fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got `{s}`")),
    }
}

impl Engine {
    pub fn common(&self) -> &Common {
        match self {
            Self::Docker(a) | Self::Podman(a) | Self::Swarm(a) => &a.common,
            Self::K8s(a) => &a.common,
            Self::Etcd(a) => &a.common,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, uri: &str) -> Named {
        Named::Host {
            name: name.into(),
            uri: uri.into(),
        }
    }

    #[test]
    fn a_host_is_named_or_named_after_itself() {
        assert_eq!(
            parse_host("a=unix:///run/a.sock"),
            Ok(host("a", "unix:///run/a.sock"))
        );
        assert_eq!(
            parse_host("unix:///run/a.sock"),
            Ok(host("unix:///run/a.sock", "unix:///run/a.sock"))
        );
        assert_eq!(
            parse_host("tcp://h:2376"),
            Ok(host("tcp://h:2376", "tcp://h:2376"))
        );
        // An `=` after a `:` or `/` is the URI's.
        assert_eq!(
            parse_host("ssh://u@h/x=y"),
            Ok(host("ssh://u@h/x=y", "ssh://u@h/x=y"))
        );
        assert!(parse_host("=unix:///a").is_err());
        assert!(parse_host("a=").is_err());
    }

    #[test]
    fn an_unnamed_host_with_a_context_is_refused_a_named_one_is_watched_too() {
        let err = named(&[host("unix:///x", "unix:///x")], &["a".into()]).expect_err("bare");
        assert!(err.contains("--host NAME=unix:///x"), "{err}");
        let both = named(&[host("x", "unix:///x")], &["a".into()]).expect("named");
        assert_eq!(both.len(), 2);
        let two_bare = [
            host("unix:///1", "unix:///1"),
            host("unix:///2", "unix:///2"),
        ];
        assert_eq!(named(&two_bare, &[]).map(|s| s.len()), Ok(2));
    }

    #[test]
    fn a_name_given_twice_is_refused() {
        let hosts = [host("a", "unix:///a"), host("b", "unix:///b")];
        assert_eq!(named(&hosts, &["c".into()]).map(|s| s.len()), Ok(3));
        let err = named(&hosts, &["a".into()]).expect_err("a twice");
        assert!(err.contains("`a` is given twice"), "{err}");
        let err =
            named(&[host("x", "unix:///1"), host("x", "unix:///2")], &[]).expect_err("x twice");
        assert!(err.contains("`x`"), "{err}");
    }
}
