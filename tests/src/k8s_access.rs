//! Access to the Kubernetes testbed as someone else than its admin: a
//! `ServiceAccount`'s token (a `TokenRequest`, as `kubectl create token` sends),
//! the testbed's CA, and a kubeconfig of that token. A token is never
//! printed: its `Debug` hides it, and the files holding it are the caller's
//! temporary ones.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::k8s_util::{apiserver, client};

/// How long one API call may take.
const CALL: Duration = Duration::from_secs(20);

/// A bearer token. Its `Debug` does not show it.
pub struct Token(String);

impl Token {
    /// The token itself: write it to a file of the test's, never print it.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// A token of the `ServiceAccount` `name` in `ns`, valid `secs` seconds (at
/// least 600: the apiserver's minimum), requested with the admin's
/// `kubeconfig`.
///
/// # Panics
/// When the apiserver refuses, or does not answer within 20 s.
pub async fn service_account_token(kubeconfig: &Path, ns: &str, name: &str, secs: i64) -> Token {
    let accounts: Api<ServiceAccount> = Api::namespaced(client(kubeconfig).await, ns);
    let request: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": { "audiences": [], "expirationSeconds": secs },
    }))
    .expect("a TokenRequest");
    let answer = tokio::time::timeout(
        CALL,
        accounts.create_token_request(name, &PostParams::default(), &request),
    )
    .await
    .unwrap_or_else(|_| panic!("k8s: no TokenRequest answer for {ns}/{name} within {CALL:?}"))
    .unwrap_or_else(|e| panic!("k8s: TokenRequest for {ns}/{name}: {e}"));
    let token = answer.status.map(|s| s.token).unwrap_or_default();
    assert!(
        !token.is_empty(),
        "k8s: the TokenRequest for {ns}/{name} holds no token"
    );
    Token(token)
}

/// The PEM of the CA that signs the testbed's serving certificate, from the
/// admin's `kubeconfig` (`certificate-authority-data`, else the file
/// `certificate-authority` names).
///
/// # Panics
/// When the kubeconfig has neither.
pub fn cluster_ca_pem(kubeconfig: &Path) -> Vec<u8> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("k8s: kubeconfig {}: {e}", kubeconfig.display()));
    let cluster = config
        .clusters
        .iter()
        .find_map(|c| c.cluster.as_ref())
        .unwrap_or_else(|| panic!("k8s: no cluster in {}", kubeconfig.display()));
    if let Some(data) = &cluster.certificate_authority_data {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .expect("k8s: certificate-authority-data is base64");
    }
    let file = cluster
        .certificate_authority
        .as_ref()
        .unwrap_or_else(|| panic!("k8s: no CA in {}", kubeconfig.display()));
    std::fs::read(file).unwrap_or_else(|e| panic!("k8s: read CA {file}: {e}"))
}

/// Writes into `dir` the testbed's CA (`ca.crt`) and a kubeconfig
/// (`kubeconfig`, mode 0600) that reaches the admin's apiserver with
/// `token`, and nothing else: no client certificate. Returns the
/// kubeconfig's path.
///
/// # Panics
/// When a file cannot be written.
pub fn token_kubeconfig(admin: &Path, token: &Token, dir: &Path) -> std::path::PathBuf {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    let (server, _) = apiserver(admin);
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, cluster_ca_pem(admin)).expect("k8s: write ca.crt");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n    \
         certificate-authority: {ca}\nusers:\n- name: token\n  user:\n    token: {token}\n\
         contexts:\n- name: token\n  context:\n    cluster: testbed\n    user: token\n\
         current-context: token\n",
        ca = ca.display(),
        token = token.secret(),
    );
    let path = dir.join("kubeconfig");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .expect("k8s: create the token's kubeconfig");
    file.write_all(text.as_bytes())
        .expect("k8s: write the token's kubeconfig");
    path
}
