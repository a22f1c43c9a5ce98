//! `/metrics`: the hub's metrics (emitted through the `metrics` facade) in
//! the Prometheus text format (`lookout_stops_total{outcome}` among them:
//! every `stopped` by its outcome), plus `lookout_last_event_age_seconds`,
//! computed at scrape time. A server of several engines has a hub each,
//! whose metrics carry `host="NAME"`. `lookout etcd` adds
//! `lookout_publisher_connected{host="SOURCE"}` (1 or 0, read at scrape
//! time), a gauge per source its watch knows. `lookout k8s` adds
//! `lookout_k8s_instances{kind="KIND"}` and `lookout_k8s_instances_ready`,
//! per kind (an instance id's first segment: `deployment`,
//! `cluster.postgresql.cnpg.io`), counted at scrape time; a kind once seen
//! stays, at 0 when it has no instance (its CRD deleted, say). With
//! `--serve-cert`, the `lookout_serve_tls_*` series of [`super::tls`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use lookout_core::Store;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

/// What a scrape reads of one engine served.
#[derive(Clone, Copy, Debug)]
pub struct Scraped<'a> {
    /// Its name when the server serves several.
    pub host: Option<&'a str>,
    pub store: &'a Store,
    /// Of `lookout etcd`: each source's publisher status.
    pub publishers: Option<&'a lookout_etcd::Publishers>,
    /// Its instances are counted per kind (`lookout k8s`).
    pub by_kind: bool,
}

/// A kind of an engine served (`None`: the one engine).
type HostKind = (Option<String>, String);

/// The installed recorder's handle.
#[derive(Clone, Debug)]
pub struct Metrics {
    handle: PrometheusHandle,
    /// The (host, kind) pairs counted so far: each keeps its gauges.
    kinds: Arc<Mutex<BTreeSet<HostKind>>>,
}

impl Metrics {
    /// Installs the process-wide recorder. Call it before the hub is made:
    /// the hub registers its metrics then.
    pub fn install() -> Result<Self, ::metrics::SetRecorderError<PrometheusRecorder>> {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        ::metrics::set_global_recorder(recorder)?;
        describe();
        Ok(Self {
            handle,
            kinds: Arc::default(),
        })
    }

    /// The text exposition, with the age of each engine's last event as of
    /// now.
    pub fn render<'a>(&self, sources: impl IntoIterator<Item = Scraped<'a>>) -> String {
        let now = SystemTime::now();
        for source in sources {
            // Of `lookout etcd`: each source's publisher, labelled as its
            // events are (`host`).
            for p in source
                .publishers
                .into_iter()
                .flat_map(lookout_etcd::Publishers::statuses)
            {
                let connected = p.state == lookout_etcd::PublisherState::Connected;
                ::metrics::gauge!("lookout_publisher_connected", "host" => p.source.to_string())
                    .set(if connected { 1.0 } else { 0.0 });
            }
            if source.by_kind {
                self.count_kinds(source);
            }
            // Absent until the first event: an age of nothing is no number.
            let Some(at) = source.store.last_event_at() else {
                continue;
            };
            let age = now.duration_since(at).unwrap_or_default().as_secs_f64();
            match source.host {
                None => ::metrics::gauge!("lookout_last_event_age_seconds").set(age),
                Some(host) => {
                    ::metrics::gauge!("lookout_last_event_age_seconds", "host" => host.to_owned())
                        .set(age);
                }
            }
        }
        self.handle.render()
    }

    /// Sets `lookout_k8s_instances` and `_ready` of each kind of `source`
    /// (and 0 for a kind seen before that has none now).
    fn count_kinds(&self, source: Scraped<'_>) {
        let mut counts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for i in source.store.instances() {
            let kind = i.id.as_str().split('/').next().unwrap_or_default();
            let c = counts.entry(kind.to_owned()).or_default();
            c.0 += 1;
            c.1 += u64::from(i.ready);
        }
        let host = source.host.map(str::to_owned);
        let mut seen = self.kinds.lock().unwrap_or_else(PoisonError::into_inner);
        for kind in counts.keys() {
            seen.insert((host.clone(), kind.clone()));
        }
        for (h, kind) in seen.iter().filter(|(h, _)| *h == host) {
            let (n, ready) = counts.get(kind).copied().unwrap_or_default();
            #[allow(clippy::cast_precision_loss)] // counts of instances
            let (n, ready) = (n as f64, ready as f64);
            let mut labels = vec![("kind", kind.clone())];
            if let Some(h) = h {
                labels.push(("host", h.clone()));
            }
            let labels: Vec<::metrics::Label> = labels
                .into_iter()
                .map(|(k, v)| ::metrics::Label::new(k, v))
                .collect();
            ::metrics::gauge!("lookout_k8s_instances", labels.clone()).set(n);
            ::metrics::gauge!("lookout_k8s_instances_ready", labels).set(ready);
        }
    }
}

fn describe() {
    use ::metrics::{describe_counter, describe_gauge};
    describe_gauge!(
        "lookout_connected",
        "1 while the engine's change feed is connected, else 0"
    );
    describe_counter!(
        "lookout_reconnects_total",
        "Times the connection to the engine was lost"
    );
    describe_counter!(
        "lookout_events_total",
        "Instance events the engine connection yielded, by kind and origin"
    );
    describe_counter!(
        "lookout_stops_total",
        "Stopped events, by outcome: completed, failed, stopped (a requested stop), \
         unknown (the engine said nothing)"
    );
    describe_gauge!("lookout_instances", "Instances known now");
    describe_gauge!(
        "lookout_instances_ready",
        "Instances ready now (0 without --readiness)"
    );
    describe_gauge!(
        "lookout_subscribers",
        "Open subscriptions (HTTP /events clients and stdout)"
    );
    describe_counter!(
        "lookout_subscriber_resyncs_total",
        "Times a subscription fell behind and was resynced"
    );
    describe_gauge!(
        "lookout_publisher_connected",
        "lookout etcd: 1 while the source's publisher status key is there, else 0"
    );
    describe_gauge!(
        "lookout_k8s_instances",
        "lookout k8s: instances known now, by kind"
    );
    describe_gauge!(
        "lookout_k8s_instances_ready",
        "lookout k8s: instances ready now, by kind (0 without --readiness)"
    );
    describe_gauge!(
        "lookout_serve_connections",
        "--serve: client connections open now (at most --max-connections)"
    );
    describe_counter!(
        "lookout_serve_connections_shed_total",
        "--serve: idle connections closed to admit a newcomer at --max-connections"
    );
    describe_counter!(
        "lookout_serve_connections_refused_total",
        "--serve: connections refused (503) because every connection was answering a request"
    );
    describe_gauge!(
        "lookout_last_event_age_seconds",
        "Seconds since the last instance event reached lookout"
    );
    describe_counter!(
        super::tls::RELOADS,
        "--serve-cert: times the TLS files were reloaded (a change, SIGHUP)"
    );
    describe_counter!(
        super::tls::RELOAD_FAILURES,
        "--serve-cert: reloads that failed, the certificate in use kept"
    );
    describe_gauge!(
        super::tls::NOT_AFTER,
        "--serve-cert: when the certificate in use expires (notAfter), in seconds since the epoch"
    );
    describe_counter!(
        super::tls::REFUSED,
        "--serve-cert: TLS handshakes that did not complete, by reason: timeout, not_tls, \
         no_client_cert, bad_client_cert, client_alert, protocol, other"
    );
}
