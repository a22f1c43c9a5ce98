//! A downstream consumer of `lookout-k8s` alone: watches the Deployments of
//! one namespace (the cluster from `KUBECONFIG`, as kubectl finds it) and
//! prints `connected` once the stream says so, then `event KIND ID` for the
//! Deployment named on its command line, until it is removed (exit 0) or
//! 120 s pass (exit 1). Driven by `cargo xtask release`.

use std::process::ExitCode;

use lookout_k8s::{self as lookout, K8sConfig, Kind, watch};

#[path = "../../follow.rs"]
mod follow;

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
    let items = match watch(config) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("downstream-k8s: {e}");
            return ExitCode::from(2);
        }
    };
    let id = format!("deployment/{namespace}/{name}");
    follow::until_removed("downstream-k8s", items, &id).await
}
