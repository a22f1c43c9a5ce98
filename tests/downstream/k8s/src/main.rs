//! A downstream consumer of `lookout-k8s` alone: watches the Deployments of
//! one namespace (the cluster from `KUBECONFIG`, as kubectl finds it) and
//! prints `connected` once the stream says so, then `event KIND ID` for the
//! Deployment named on its command line, until it is removed (exit 0) or
//! 120 s pass (exit 1). Driven by `cargo xtask release`.

use std::process::ExitCode;
use std::time::Duration;

use lookout_k8s::{EventKind, Item, K8sConfig, Kind, Status, watch};
use tokio_stream::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [namespace, name] = args.as_slice() else {
        eprintln!("usage: downstream-k8s NAMESPACE DEPLOYMENT");
        return ExitCode::from(2);
    };
    let config = K8sConfig::default()
        .namespace(namespace.as_str())
        .kinds([Kind::Deployment]);
    let mut items = match watch(config) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("downstream-k8s: {e}");
            return ExitCode::from(2);
        }
    };
    let id = format!("deployment/{namespace}/{name}");
    let mut connected = false;
    let run = async {
        while let Some(item) = items.next().await {
            match item {
                Item::Status(Status::Connected { .. }) if !connected => {
                    connected = true;
                    println!("connected");
                }
                Item::Event(e) if e.id.as_str() == id => {
                    println!("event {} {}", e.kind, e.id);
                    if e.kind == EventKind::Removed {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    };
    match tokio::time::timeout(Duration::from_secs(120), run).await {
        Ok(true) => ExitCode::SUCCESS,
        _ => {
            eprintln!("downstream-k8s: {id} was not removed within 120 s");
            ExitCode::FAILURE
        }
    }
}
