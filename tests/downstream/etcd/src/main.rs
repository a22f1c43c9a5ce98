//! A downstream consumer of `lookout-etcd` alone: watches a prefix of an
//! etcd cluster and, once the stream says `connected`, publishes one
//! instance's lifecycle there with the crate's own client and record format
//! (running, stopped, then the key deleted), printing `event KIND ID` for
//! each event the watch tells of it, until it is removed (exit 0) or 120 s
//! pass (exit 1). Driven by `cargo xtask release`.

use std::process::ExitCode;
use std::time::Duration;

use lookout_etcd::model::{self, Record, RecordEvent, State};
use lookout_etcd::{Client, EtcdConfig, EtcdEndpoint, EventKind, Item, Status, watch};
use tokio_stream::StreamExt;

const SOURCE: &str = "downstream";

fn record(state: State, kind: &str) -> Vec<u8> {
    let mut r = Record::new(
        "docker",
        state,
        RecordEvent::new(kind, "live", "2026-12-05T00:00:00Z"),
    );
    r.uid = Some("downstream-uid".to_owned());
    serde_json::to_vec(&r).unwrap_or_default()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [endpoints, prefix, name] = args.as_slice() else {
        eprintln!("usage: downstream-etcd ENDPOINTS PREFIX INSTANCE");
        return ExitCode::from(2);
    };
    let setup = || -> Result<_, lookout_etcd::ConfigError> {
        let items = watch(EtcdConfig::new(endpoints)?.prefix(prefix.as_str()))?;
        let client = Client::new(EtcdEndpoint::parse_list(endpoints)?, Duration::from_secs(5))?;
        Ok((items, client))
    };
    let (mut items, client) = match setup() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("downstream-etcd: {e}");
            return ExitCode::from(2);
        }
    };
    let prefix = prefix.trim_end_matches('/');
    let key = model::instance_key(prefix, SOURCE, name);
    let id = format!("{SOURCE}/{name}");
    let mut connected = false;
    // What to write next: the record it runs, the record it stopped, or
    // the key deleted (the instance removed).
    let run = async {
        while let Some(item) = items.next().await {
            match item {
                Item::Status(Status::Connected { .. }) if !connected => {
                    connected = true;
                    println!("connected");
                    client
                        .put(key.as_bytes(), &record(State::Running, "started"), 0)
                        .await?;
                }
                Item::Event(e) if e.id.as_str() == id => {
                    println!("event {} {}", e.kind, e.id);
                    match e.kind {
                        EventKind::Started => {
                            client
                                .put(key.as_bytes(), &record(State::Stopped, "stopped"), 0)
                                .await?;
                        }
                        EventKind::Stopped => {
                            client.delete(key.as_bytes()).await?;
                        }
                        EventKind::Removed => return Ok(true),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        Ok::<_, lookout_etcd::EtcdError>(false)
    };
    match tokio::time::timeout(Duration::from_secs(120), run).await {
        Ok(Ok(true)) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("downstream-etcd: {e}");
            ExitCode::FAILURE
        }
        _ => {
            eprintln!("downstream-etcd: {id} was not removed within 120 s");
            ExitCode::FAILURE
        }
    }
}
