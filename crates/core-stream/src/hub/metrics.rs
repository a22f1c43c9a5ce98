//! The hub's metrics, through the [`metrics`] facade: free when the program
//! installs no recorder. Only the ring (`ring.rs`) records them.

use crate::model::{EventKind, InstanceEvent, Origin, Outcome};

/// The series of one hub. Registered when the hub is made (install the
/// recorder before).
pub(super) struct Metrics {
    /// `lookout_events_total{kind,origin}`, by kind and origin.
    events: [[metrics::Counter; 3]; 8],
    /// `lookout_stops_total{outcome}`: every `stopped`, by its outcome
    /// (`unknown` when it has none).
    stops: [metrics::Counter; 4],
    pub(super) connected: metrics::Gauge,
    pub(super) reconnects: metrics::Counter,
    pub(super) instances: metrics::Gauge,
    /// `lookout_instances_ready`: how many are ready (0 without readiness).
    pub(super) ready: metrics::Gauge,
    pub(super) subscriptions: metrics::Gauge,
    pub(super) resyncs: metrics::Counter,
}

const KINDS: [EventKind; 8] = EventKind::ALL;
const OUTCOMES: [Option<Outcome>; 4] = [
    Some(Outcome::Completed),
    Some(Outcome::Failed),
    Some(Outcome::Stopped),
    None,
];
const ORIGINS: [Origin; 3] = [Origin::Initial, Origin::Live, Origin::Resync];

/// A count as a gauge's value (exact below 2^53).
#[allow(clippy::cast_precision_loss)]
pub(super) fn gauge(n: usize) -> f64 {
    n as f64
}

impl Metrics {
    pub(super) fn new(extra: Vec<(&'static str, String)>) -> Self {
        let extra: Vec<metrics::Label> = extra
            .into_iter()
            .map(|(k, v)| metrics::Label::new(k, v))
            .collect();
        let labels = |own: &[(&'static str, &'static str)]| -> Vec<metrics::Label> {
            own.iter()
                .map(|&(k, v)| metrics::Label::new(k, v))
                .chain(extra.iter().cloned())
                .collect()
        };
        Self {
            events: KINDS.map(|kind| {
                ORIGINS.map(|origin| {
                    metrics::counter!(
                        "lookout_events_total",
                        labels(&[("kind", kind.as_str()), ("origin", origin.as_str())])
                    )
                })
            }),
            stops: OUTCOMES.map(|outcome| {
                let name = outcome.map_or("unknown", Outcome::as_str);
                metrics::counter!("lookout_stops_total", labels(&[("outcome", name)]))
            }),
            connected: metrics::gauge!("lookout_connected", labels(&[])),
            reconnects: metrics::counter!("lookout_reconnects_total", labels(&[])),
            instances: metrics::gauge!("lookout_instances", labels(&[])),
            ready: metrics::gauge!("lookout_instances_ready", labels(&[])),
            subscriptions: metrics::gauge!("lookout_subscribers", labels(&[])),
            resyncs: metrics::counter!("lookout_subscriber_resyncs_total", labels(&[])),
        }
    }

    pub(super) fn event(&self, e: &InstanceEvent) {
        let k = KINDS.iter().position(|&k| k == e.kind).unwrap_or(0);
        let o = ORIGINS.iter().position(|&o| o == e.origin).unwrap_or(0);
        self.events[k][o].increment(1);
        if e.kind == EventKind::Stopped {
            let outcome = e.reason.as_ref().and_then(|r| r.outcome);
            let i = OUTCOMES.iter().position(|&o| o == outcome).unwrap_or(3);
            self.stops[i].increment(1);
        }
    }
}
