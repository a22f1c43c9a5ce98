//! Where an engine is found when the caller names no host: a table's
//! [`Discovery`] (its host variable, default sockets, and whether Docker's
//! contexts or Podman's connections apply), read by
//! [`Endpoint::resolve`](crate::Endpoint::resolve).

/// Where an engine is found when the caller names no host.
#[derive(Debug, Clone, Copy)]
pub struct Discovery {
    /// The environment variable that names the host (`DOCKER_HOST`, `CONTAINER_HOST`).
    pub host_var: &'static str,
    /// The default unix sockets, most specific first; the first one whose file
    /// exists wins, else the last one. Each entry is an environment variable
    /// (empty for none) whose value prefixes the path, and the path: podman's
    /// rootless socket is `("XDG_RUNTIME_DIR", "podman/podman.sock")`.
    pub sockets: &'static [(&'static str, &'static str)],
    /// Docker contexts apply (`DOCKER_CONTEXT`, `currentContext`), between
    /// the host variable and the default sockets: see
    /// [`Endpoint`](crate::Endpoint).
    pub docker_contexts: bool,
    /// Podman's discovery applies (`CONTAINER_CONNECTION`, the default
    /// connection, the rootless socket rules) instead of [`sockets`](Self::sockets):
    /// see [`Endpoint`](crate::Endpoint).
    pub podman_connections: bool,
    /// The CLI an `ssh://` host runs remotely (`docker`, `podman`).
    pub ssh_cli: &'static str,
}

impl Discovery {
    /// dockerd's: `DOCKER_HOST`, else `/var/run/docker.sock` (Docker's
    /// containers, and Swarm's services on a manager).
    pub const DOCKER: Self = Self {
        host_var: "DOCKER_HOST",
        sockets: &[("", "/var/run/docker.sock")],
        docker_contexts: true,
        podman_connections: false,
        ssh_cli: "docker",
    };
}
