//! Watch the `Deployment`s and `StatefulSet`s of one namespace (all namespaces
//! without an argument):
//!
//! ```text
//! cargo run -p lookout-k8s --example k8s_watch -- shop
//! ```
//!
//! The kubeconfig is resolved as kube does it (`KUBECONFIG`,
//! `~/.kube/config`, in-cluster), anew on every dial. Ids read
//! `deployment/NAMESPACE/NAME` and `statefulset/NAMESPACE/NAME`.

use lookout_k8s::{K8sConfig, Kind};
use tokio_stream::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lookout_k8s::ConfigError> {
    let mut config = K8sConfig::default().kinds([Kind::Deployment, Kind::StatefulSet]);
    if let Some(namespace) = std::env::args().nth(1) {
        config = config.namespace(namespace);
    }
    let mut events = lookout_k8s::watch(config)?.events();
    while let Some(e) = events.next().await {
        let running = matches!(e.kind, lookout_core::EventKind::Started);
        println!("{} {} ({}) running={running}", e.id, e.kind, e.origin);
    }
    Ok(())
}
