//! Choosing the upstream's configuration, in one place ([`UpstreamConfig::resolve_in`]): an
//! explicit kubeconfig, in-cluster, `$KUBECONFIG`, `~/.kube/config`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::config::{
    AuthConfig, ConfigError, ConfigSource, Environment, PreferredServer, ServerUrl, TlsConfig,
    UpstreamConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TOKEN_RELOAD_INTERVAL,
};
use super::kubeconfig::{self, Kubeconfig};

impl UpstreamConfig {
    /// Resolves the configuration from the real process environment; see [`Self::resolve_in`].
    pub fn resolve(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Self, ConfigError> {
        Self::resolve_in(&Environment::from_process(), kubeconfig, context)
    }

    /// The one place the source of the configuration is chosen:
    /// 1. an explicit `--kubeconfig` (which must exist);
    /// 2. in-cluster (service account), unless a `--context` was asked for, which only a
    ///    kubeconfig can answer;
    /// 3. `$KUBECONFIG`, merged the way client-go merges it;
    /// 4. `~/.kube/config`.
    pub fn resolve_in(
        env: &Environment,
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        if let Some(path) = kubeconfig {
            if !path.exists() {
                return Err(ConfigError::ExplicitMissing(path.to_path_buf()));
            }
            return Self::from_kubeconfig_files(&[path.to_path_buf()], context);
        }
        if let (Some(in_cluster), None) = (&env.in_cluster, context) {
            return Self::in_cluster_from(&in_cluster.dir, &in_cluster.host, &in_cluster.port);
        }
        if let Some(list) = &env.kubeconfig_var {
            let files = kubeconfig_list(list);
            let merged = Kubeconfig::load(&files)?;
            if merged.files.is_empty() {
                return Err(ConfigError::KubeconfigVarEmpty(files));
            }
            return kubeconfig::build(merged.select(context)?);
        }
        let home_config = env.home.clone().unwrap_or_default().join(".kube").join("config");
        if !home_config.exists() {
            return Err(ConfigError::NothingFound(home_config));
        }
        Self::from_kubeconfig_files(&[home_config], context)
    }

    /// In-cluster configuration as client-go's `InClusterConfig` builds it: the service's
    /// host and port, the mounted token (re-read on rotation) and CA, and the pod's namespace.
    pub fn in_cluster_from(dir: &Path, host: &str, port: &str) -> Result<Self, ConfigError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| ConfigError::Read { path, source })
        };
        let token = read("token")?;
        let ca = read("ca.crt")?;
        let namespace =
            read("namespace").ok().map(|ns| String::from_utf8_lossy(&ns).trim().to_owned());
        // net.JoinHostPort: an IPv6 service address needs brackets.
        let authority =
            if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        Ok(Self {
            server: ServerUrl::parse(&format!("https://{authority}"), true)?,
            tls: TlsConfig { ca_pem: Some(ca), ..TlsConfig::default() },
            auth: AuthConfig::TokenFile {
                path: dir.join("token"),
                initial: String::from_utf8_lossy(&token).trim().to_owned(),
            },
            namespace: namespace.filter(|ns| !ns.is_empty()),
            source: ConfigSource::InCluster,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            token_reload_interval: DEFAULT_TOKEN_RELOAD_INTERVAL,
            preferred: Vec::new(),
        })
    }

    /// Reads and merges kubeconfig files (missing ones are skipped, as client-go does for
    /// `$KUBECONFIG`) and builds the configuration of `context`, or of the current context.
    pub fn from_kubeconfig_files(
        files: &[PathBuf],
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let merged = Kubeconfig::load(files)?;
        let selected = merged.select(context)?;
        kubeconfig::build(selected)
    }

    /// The base URL requests are sent to, e.g. `https://10.0.0.1:6443/prefix`.
    pub fn base_url(&self) -> String {
        self.server.to_string()
    }

    /// Servers tried, in order, before this configuration's own (`preferred`).
    pub fn with_preferred(mut self, preferred: Vec<PreferredServer>) -> Self {
        self.preferred = preferred;
        self
    }

    /// One configuration per upstream, in order of preference: each preferred server (its URL,
    /// its CA or else this one's, never `insecure-skip-tls-verify` nor a `tls-server-name`
    /// meant for the apiserver), then this one.
    pub fn servers(&self) -> Vec<UpstreamConfig> {
        let mut servers: Vec<UpstreamConfig> = self
            .preferred
            .iter()
            .map(|p| UpstreamConfig {
                server: p.server.clone(),
                tls: TlsConfig {
                    ca_pem: p.ca_pem.clone().or_else(|| self.tls.ca_pem.clone()),
                    insecure_skip_tls_verify: false,
                    server_name: None,
                    // Replaced by the server's own, if it has one (`Upstream::new`).
                    client_cert: self.tls.client_cert.clone(),
                },
                preferred: Vec::new(),
                ..self.clone()
            })
            .collect();
        servers.push(UpstreamConfig { preferred: Vec::new(), ..self.clone() });
        servers
    }
}

/// Splits `$KUBECONFIG` like client-go: OS path-list separator, empty entries dropped,
/// duplicates dropped keeping the first.
fn kubeconfig_list(list: &OsString) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for path in std::env::split_paths(list) {
        if !path.as_os_str().is_empty() && !files.contains(&path) {
            files.push(path);
        }
    }
    files
}
