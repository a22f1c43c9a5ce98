//! `/metrics`: the hub's metrics (emitted through the `metrics` facade) in
//! the Prometheus text format, plus `lookout_last_event_age_seconds`,
//! computed at scrape time. A server of several engines has a hub each,
//! whose metrics carry `host="NAME"`. `lookout etcd` adds
//! `lookout_publisher_connected{host="SOURCE"}` (1 or 0, read at scrape
//! time), a gauge per source its watch knows.

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
}

/// The installed recorder's handle.
#[derive(Clone, Debug)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl Metrics {
    /// Installs the process-wide recorder. Call it before the hub is made:
    /// the hub registers its metrics then.
    pub fn install() -> Result<Self, ::metrics::SetRecorderError<PrometheusRecorder>> {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        ::metrics::set_global_recorder(recorder)?;
        describe();
        Ok(Self { handle })
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
        "lookout_last_event_age_seconds",
        "Seconds since the last instance event reached lookout"
    );
}
