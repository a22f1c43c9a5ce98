//! What a template sees: `instances`, every instance the run knows now
//! (each source's, sorted by id then host), as the events told them, with
//! where each can be reached (networks, ports) when its engine's list says
//! it (Docker, Podman: networks and ports; Swarm: published ports).
//!
//! The state follows the events as the hub's store does (`/instances`): a
//! `removed` forgets, a `created` starts anew, a start, stop or readiness
//! change updates, a `failing` or `stopping` keeps its reason until a start
//! or `ready` ends it.

use std::collections::BTreeMap;

use lookout_core::{EventKind, Instance, InstanceEvent, Labels};
use lookout_moby::protocol::addresses::Addresses;
use serde::Serialize;

use crate::output::rfc3339_nanos;

/// One instance as the events told it (followed as the hub's store
/// follows them), and its host.
#[derive(Clone, Debug)]
struct Known {
    instance: Instance,
    /// Its host when the event says it (`lookout etcd`: the publisher's
    /// source), over its source's.
    host: Option<String>,
}

/// Every instance the run knows, by (id, source).
#[derive(Debug, Default)]
pub struct Instances {
    known: BTreeMap<(String, usize), Known>,
}

impl Instances {
    /// One more event of source `source`; `host`: the host the event
    /// itself says (`lookout etcd`'s publisher source), if any.
    pub fn apply(&mut self, source: usize, host: Option<String>, e: &InstanceEvent) {
        let key = (e.id.as_str().to_owned(), source);
        match (e.kind, self.known.get_mut(&key)) {
            (EventKind::Removed, _) => {
                self.known.remove(&key);
            }
            (EventKind::Created, _) | (_, None) => {
                let instance = Instance::from_event(e);
                self.known.insert(key, Known { instance, host });
            }
            (_, Some(k)) => k.instance.follow(e),
        }
    }

    /// Every instance as a template sees it. `hosts`: each source's name
    /// (or address); `addresses`: each source's last list, when asked.
    pub fn context<'a>(
        &'a self,
        provider: &'a str,
        readiness: bool,
        hosts: &'a [Option<String>],
        addresses: &'a [Option<BTreeMap<String, Addresses>>],
    ) -> Context<'a> {
        let instances = self
            .known
            .iter()
            .map(|((id, source), known)| {
                let (k, host) = (&known.instance, &known.host);
                let at = addresses
                    .get(*source)
                    .and_then(Option::as_ref)
                    .and_then(|a| a.get(id))
                    // A stopped container keeps no address.
                    .filter(|_| k.running);
                View {
                    id,
                    provider,
                    host: host
                        .as_deref()
                        .or_else(|| hosts.get(*source).and_then(Option::as_deref)),
                    labels: &k.labels,
                    running: k.running,
                    ready: readiness.then_some(k.ready),
                    stopping: k.stopping,
                    outcome: k
                        .reason
                        .as_ref()
                        .and_then(|r| r.outcome)
                        .map(lookout_core::Outcome::as_str),
                    exit_code: k.reason.as_ref().and_then(|r| r.exit_code),
                    message: k.reason.as_ref().and_then(|r| r.message.as_deref()),
                    uid: k.uid.as_deref(),
                    since: rfc3339_nanos(k.since),
                    networks: at
                        .map(|a| {
                            a.networks
                                .iter()
                                .map(|(name, n)| {
                                    (
                                        name.as_str(),
                                        Net {
                                            ip: n.ip.as_deref(),
                                        },
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    ports: at
                        .map(|a| {
                            a.ports
                                .iter()
                                .map(|p| PortView {
                                    port: p.port,
                                    protocol: &p.protocol,
                                    published: p.published,
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                }
            })
            .collect();
        Context {
            provider,
            instances,
        }
    }
}

/// The template's variables.
#[derive(Debug, Serialize)]
pub struct Context<'a> {
    pub provider: &'a str,
    pub instances: Vec<View<'a>>,
}

/// One instance, as a template sees it.
#[derive(Debug, Serialize)]
pub struct View<'a> {
    pub id: &'a str,
    pub provider: &'a str,
    /// Its source's name of a run of several, else the engine's address.
    pub host: Option<&'a str>,
    pub labels: &'a Labels,
    pub running: bool,
    /// `null` without `--readiness`.
    pub ready: Option<bool>,
    pub stopping: bool,
    /// Why it stopped: `completed`, `failed`, `stopped`.
    pub outcome: Option<&'static str>,
    pub exit_code: Option<i32>,
    /// What the engine said (why it fails or stopped).
    pub message: Option<&'a str>,
    pub uid: Option<&'a str>,
    pub since: String,
    pub networks: BTreeMap<&'a str, Net<'a>>,
    pub ports: Vec<PortView<'a>>,
}

#[derive(Debug, Serialize)]
pub struct Net<'a> {
    pub ip: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct PortView<'a> {
    pub port: u16,
    pub protocol: &'a str,
    pub published: Option<u16>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookout_core::Origin;
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    fn event(id: &str, kind: EventKind) -> InstanceEvent {
        InstanceEvent::new(id.into(), kind, UNIX_EPOCH, Origin::Live)
            .labels(Arc::new(Labels::new()))
    }

    #[test]
    fn follows_the_events_and_sorts_by_id() {
        let mut all = Instances::default();
        for (id, kind) in [
            ("b", EventKind::Created),
            ("b", EventKind::Started),
            ("a", EventKind::Started),
            ("a", EventKind::Ready),
            ("c", EventKind::Created),
            ("c", EventKind::Removed),
        ] {
            all.apply(0, None, &event(id, kind));
        }
        let hosts = [None];
        let ctx = all.context("docker", true, &hosts, &[]);
        let v = serde_json::to_value(&ctx).expect("serialises");
        let ids: Vec<&str> = v["instances"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|i| i["id"].as_str())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(v["instances"][0]["ready"], true);
        assert_eq!(v["instances"][1]["ready"], false);
        assert_eq!(v["instances"][1]["running"], true);
        let ctx = all.context("docker", false, &hosts, &[]);
        let v = serde_json::to_value(&ctx).expect("serialises");
        assert!(
            v["instances"][0]["ready"].is_null(),
            "null without --readiness"
        );
    }
}
