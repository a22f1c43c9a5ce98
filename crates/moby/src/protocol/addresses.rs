//! Where each listed object can be reached, as the engine's list tells it
//! (no I/O): a container's networks (`NetworkSettings.Networks.<name>.
//! IPAddress`) and ports (`Ports[].PrivatePort`, `Type`, `PublicPort`); a
//! Swarm service's ports (`Endpoint.Ports[].TargetPort`, `Protocol`,
//! `PublishedPort`). What a config renderer (`lookout --render`) needs and
//! the watch does not: the watch's own list decodes none of it, so a run
//! that renders nothing pays nothing for it.
//!
//! Bounded per object ([`MAX_NETWORKS`], [`MAX_PORTS`]): a container on
//! more networks, or publishing more ports, is cut (the first by name, the
//! first listed), never refused.

use std::collections::BTreeMap;

use serde_json::Value;

use super::containers::container_name;

/// The most networks kept of one object.
pub const MAX_NETWORKS: usize = 16;
/// The most ports kept of one object.
pub const MAX_PORTS: usize = 64;

/// One network an object is on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Network {
    /// Its IPv4 address on it (`None`: the engine gave none, e.g. stopped).
    pub ip: Option<String>,
}

/// One port an object exposes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Port {
    /// The port inside (a container's private port, a service's target port).
    pub port: u16,
    /// `tcp`, `udp` or `sctp`, as the engine says.
    pub protocol: String,
    /// The port it is published on, on the host (or the swarm's ingress).
    pub published: Option<u16>,
}

/// Where one object can be reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Addresses {
    /// Its networks by name (a Swarm service's: none; the engine lists
    /// them by id).
    pub networks: BTreeMap<String, Network>,
    /// Its ports, sorted, each once (dockerd lists a port published on IPv4
    /// and IPv6 twice).
    pub ports: Vec<Port>,
}

/// Each object of a list's body (a JSON array of containers or services),
/// by instance id (a container's name, a service's `Spec.Name`); `Err` when
/// the body is no JSON array. An entry without a name is skipped.
pub fn decode(body: &[u8]) -> Result<BTreeMap<String, Addresses>, String> {
    let list: Vec<Value> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut all = BTreeMap::new();
    for entry in &list {
        if let Some(names) = entry.get("Names") {
            let Ok(raw) = serde_json::value::to_raw_value(names) else {
                continue;
            };
            let Some(name) = container_name(Some(&raw)) else {
                continue;
            };
            all.insert(name, container(entry));
        } else if let Some(name) = entry
            .pointer("/Spec/Name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            all.insert(name.to_owned(), service(entry));
        }
    }
    Ok(all)
}

fn container(entry: &Value) -> Addresses {
    let networks = entry
        .pointer("/NetworkSettings/Networks")
        .and_then(Value::as_object)
        .map(|nets| {
            let mut named: Vec<(&String, &Value)> = nets.iter().collect();
            named.sort_by(|a, b| a.0.cmp(b.0));
            named
                .into_iter()
                .take(MAX_NETWORKS)
                .map(|(name, net)| {
                    let ip = net
                        .get("IPAddress")
                        .and_then(Value::as_str)
                        .filter(|ip| !ip.is_empty())
                        .map(str::to_owned);
                    (name.clone(), Network { ip })
                })
                .collect()
        })
        .unwrap_or_default();
    let ports = ports(entry.get("Ports"), "PrivatePort", "Type", "PublicPort");
    Addresses { networks, ports }
}

fn service(entry: &Value) -> Addresses {
    let ports = ports(
        entry.pointer("/Endpoint/Ports"),
        "TargetPort",
        "Protocol",
        "PublishedPort",
    );
    Addresses {
        networks: BTreeMap::new(),
        ports,
    }
}

/// The ports of a list of port objects, under the engine's field names.
fn ports(list: Option<&Value>, port: &str, protocol: &str, published: &str) -> Vec<Port> {
    let Some(list) = list.and_then(Value::as_array) else {
        return Vec::new();
    };
    let number = |v: Option<&Value>| {
        v.and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok())
    };
    let mut ports: Vec<Port> = list
        .iter()
        .filter_map(|p| {
            Some(Port {
                port: number(p.get(port))?,
                protocol: p
                    .get(protocol)
                    .and_then(Value::as_str)
                    .unwrap_or("tcp")
                    .to_owned(),
                published: number(p.get(published)).filter(|&n| n != 0),
            })
        })
        .collect();
    ports.sort();
    ports.dedup();
    ports.truncate(MAX_PORTS);
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_containers_networks_and_ports_once_each() {
        let body = br#"[
          {"Id":"a1","Names":["/web"],"Ports":[
             {"IP":"0.0.0.0","PrivatePort":80,"PublicPort":8080,"Type":"tcp"},
             {"IP":"::","PrivatePort":80,"PublicPort":8080,"Type":"tcp"},
             {"PrivatePort":53,"Type":"udp"}],
           "NetworkSettings":{"Networks":{
             "bridge":{"IPAddress":"172.17.0.2"},"front":{"IPAddress":""}}}},
          {"Id":"s1","Spec":{"Name":"api"},"Endpoint":{"Ports":[
             {"Protocol":"tcp","TargetPort":8000,"PublishedPort":30000}]}},
          {"Id":"x","Names":[]}
        ]"#;
        let all = decode(body).expect("an array");
        assert_eq!(all.len(), 2);
        let web = &all["web"];
        assert_eq!(web.networks["bridge"].ip.as_deref(), Some("172.17.0.2"));
        assert_eq!(web.networks["front"].ip, None);
        let ports: Vec<(u16, &str, Option<u16>)> = web
            .ports
            .iter()
            .map(|p| (p.port, p.protocol.as_str(), p.published))
            .collect();
        assert_eq!(ports, [(53, "udp", None), (80, "tcp", Some(8080))]);
        assert_eq!(all["api"].ports[0].published, Some(30000));
        assert!(all["api"].networks.is_empty());
    }

    #[test]
    fn bounds_what_one_object_keeps() {
        let nets: serde_json::Map<String, Value> = (0..40)
            .map(|i| {
                (
                    format!("n{i:02}"),
                    serde_json::json!({"IPAddress": "10.0.0.1"}),
                )
            })
            .collect();
        let ports: Vec<Value> = (1..=200)
            .map(|p| serde_json::json!({"PrivatePort": p, "Type": "tcp"}))
            .collect();
        let body = serde_json::json!([{"Names":["/big"],"Ports":ports,
            "NetworkSettings":{"Networks":nets}}]);
        let all = decode(body.to_string().as_bytes()).expect("an array");
        assert_eq!(all["big"].networks.len(), MAX_NETWORKS);
        assert!(all["big"].networks.contains_key("n00"));
        assert_eq!(all["big"].ports.len(), MAX_PORTS);
        assert!(decode(b"{}").is_err());
    }
}
