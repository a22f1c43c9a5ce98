//! Where an engine is found when the caller names no host: a table's
//! [`Discovery`] (its host variable, default sockets, and whether Docker's
//! contexts or Podman's connections apply), read by
//! [`Endpoint::resolve`](crate::Endpoint::resolve).

/// Where an engine is found when the caller names no host.
///
/// A table's constant, made with [`Discovery::new`] and the `const`
/// builder methods below (each field private, so an option may be added):
///
/// ```
/// use lookout_moby::Discovery;
///
/// static MY_ENGINE: Discovery = Discovery::new("MY_ENGINE_HOST", "my-engine")
///     .sockets(&[("XDG_RUNTIME_DIR", "my-engine/api.sock"), ("", "/run/my-engine/api.sock")]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Discovery {
    /// The environment variable that names the host (`DOCKER_HOST`, `CONTAINER_HOST`).
    pub(crate) host_var: &'static str,
    /// The default unix sockets, most specific first; the first one whose file
    /// exists wins, else the last one. Each entry is an environment variable
    /// (empty for none) whose value prefixes the path, and the path: podman's
    /// rootless socket is `("XDG_RUNTIME_DIR", "podman/podman.sock")`.
    pub(crate) sockets: &'static [(&'static str, &'static str)],
    /// Docker contexts apply (`DOCKER_CONTEXT`, `currentContext`), between
    /// the host variable and the default sockets: see
    /// [`Endpoint`](crate::Endpoint).
    pub(crate) docker_contexts: bool,
    /// Podman's discovery applies (`CONTAINER_CONNECTION`, the default
    /// connection, the rootless socket rules) instead of [`sockets`](Self::sockets):
    /// see [`Endpoint`](crate::Endpoint).
    pub(crate) podman_connections: bool,
    /// The CLI an `ssh://` host runs remotely (`docker`, `podman`).
    pub(crate) ssh_cli: &'static str,
}

impl Discovery {
    /// dockerd's: `DOCKER_HOST`, else `/var/run/docker.sock` (Docker's
    /// containers, and Swarm's services on a manager).
    pub const DOCKER: Self = Self::new("DOCKER_HOST", "docker")
        .sockets(&[("", "/var/run/docker.sock")])
        .docker_contexts(true);

    /// An engine named by the environment variable `host_var` (as
    /// `DOCKER_HOST`), whose `ssh://` hosts run `ssh_cli` remotely
    /// (`ssh_cli system dial-stdio`); no default socket, no docker
    /// contexts, no Podman connections until set below.
    #[must_use]
    pub const fn new(host_var: &'static str, ssh_cli: &'static str) -> Self {
        Self {
            host_var,
            sockets: &[],
            docker_contexts: false,
            podman_connections: false,
            ssh_cli,
        }
    }

    /// The default unix sockets, most specific first; the first one whose
    /// file exists wins, else the last one. Each entry is an environment
    /// variable (empty for none) whose value prefixes the path, and the
    /// path: podman's rootless socket is
    /// `("XDG_RUNTIME_DIR", "podman/podman.sock")`. None by default.
    #[must_use]
    pub const fn sockets(mut self, sockets: &'static [(&'static str, &'static str)]) -> Self {
        self.sockets = sockets;
        self
    }

    /// Whether Docker's contexts apply (`DOCKER_CONTEXT`,
    /// `currentContext`), between the host variable and the default
    /// sockets: see [`Endpoint`](crate::Endpoint). Off by default.
    #[must_use]
    pub const fn docker_contexts(mut self, on: bool) -> Self {
        self.docker_contexts = on;
        self
    }

    /// The environment variable that names the host (`DOCKER_HOST`,
    /// `CONTAINER_HOST`).
    #[must_use]
    pub const fn host_var(&self) -> &'static str {
        self.host_var
    }

    /// Whether Podman's discovery applies (`CONTAINER_CONNECTION`, the
    /// default connection, `CONTAINER_SSHKEY`, the rootless socket rules)
    /// instead of the [`sockets`](Self::sockets): see
    /// [`Endpoint`](crate::Endpoint). Off by default.
    #[must_use]
    pub const fn podman_connections(mut self, on: bool) -> Self {
        self.podman_connections = on;
        self
    }
}
