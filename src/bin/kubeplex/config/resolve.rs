//! Checking settings into the [`Config`] a process runs with: one line naming the key for
//! settings that cannot run.

use kubeplex::auth::ReviewConfig;
use kubeplex::cache::fanout::WatchConfig;
use kubeplex::cache::store::StoreLimits;
use kubeplex::live::caches::{CachesConfig, FreshnessConfig};
use kubeplex::serve::stack::ACCESS_LOG_TARGET;
use kubeplex::serve::{Http1Server, Mode, NodeConfig};
use kubeplex::upstream::ServerUrl;
use kubeplex::wire::names::{is_dns1123_label, is_dns1123_subdomain};

use super::error::ConfigError;
use super::read::{API_VERSION, KIND};
use super::settings::{Http1ServerName, LogFormat, ModeName, NodeImpersonationName, Settings};

/// The settings a process runs with, checked.
#[derive(Debug)]
pub struct Config {
    /// The effective settings (what `config print` shows).
    pub settings: Settings,
    pub mode: Mode,
    pub caches: CachesConfig,
    /// Passthrough in-flight and body limits.
    pub guardrails: kubeplex::serve::guardrails::Guardrails,
    pub shutdown_grace_period: std::time::Duration,
    /// The tracing filter: logLevel (else RUST_LOG, else `info`), and the access log.
    pub log_filter: String,
    pub log_format: LogFormat,
    /// Servers tried before the apiserver (`upstreams`), checked.
    pub upstreams: Vec<ServerUrl>,
}

/// The cache specs of the setting `key`, `{nodeName}` replaced and each checked.
fn cache_specs(
    key: &str,
    specs: &[String],
    node: Option<&str>,
) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::with_capacity(specs.len());
    for spec in specs {
        let expanded = match (spec.contains(NODE_NAME_PLACEHOLDER), node) {
            (false, _) => spec.clone(),
            (true, Some(node)) => spec.replace(NODE_NAME_PLACEHOLDER, node),
            (true, None) => {
                return Err(ConfigError(format!(
                    "{key}: {spec:?}: {NODE_NAME_PLACEHOLDER} needs nodeName (--node-name, KUBEPLEX_NODE_NAME; the downward API's spec.nodeName)"
                )))
            }
        };
        kubeplex::serve::CacheSpec::parse(&expanded)
            .map_err(|e| ConfigError(format!("{key}: {spec:?}: {e}")))?;
        out.push(expanded);
    }
    Ok(out)
}

/// Replaced by `nodeName` in cache specs.
pub const NODE_NAME_PLACEHOLDER: &str = "{nodeName}";

impl Settings {
    /// Checks the settings and builds what each part of kubeplex takes. Reads no file and
    /// opens no socket (the certificate and kubeconfig are read by `serve`, still before
    /// anything binds).
    pub fn resolve(self) -> Result<Config, ConfigError> {
        let s = self;
        if let Some(v) = s.api_version.as_deref().filter(|v| *v != API_VERSION) {
            return Err(ConfigError(format!("apiVersion: {v:?} is not {API_VERSION:?}")));
        }
        if let Some(k) = s.kind.as_deref().filter(|k| *k != KIND) {
            return Err(ConfigError(format!("kind: {k:?} is not {KIND:?}")));
        }
        if let Some(name) = s.node_name.as_deref().filter(|n| !is_dns1123_subdomain(n)) {
            return Err(ConfigError(format!(
                "nodeName: {name:?} is not a node name (a DNS subdomain: at most 253 of a-z, 0-9, '-' and '.')"
            )));
        }
        let preload = cache_specs("caches", &s.caches, s.node_name.as_deref())?;
        let scopes = cache_specs("cacheScopes", &s.cache_scopes, s.node_name.as_deref())?;
        if let Some(ns) = s.cache_namespace.as_deref().filter(|ns| !is_dns1123_label(ns)) {
            return Err(ConfigError(format!(
                "cacheNamespace: {ns:?} is not a namespace name (a DNS label: at most 63 of a-z, 0-9 and '-', starting and ending with a letter or digit)"
            )));
        }
        let positive = [
            ("shutdownGracePeriod", s.shutdown_grace_period),
            ("discoveryTtl", s.discovery_ttl),
            ("cacheIdleTimeout", s.cache_idle_timeout),
            ("snapshotWindow", s.snapshot_window),
            ("watchSlowAfter", s.watch_slow_after),
            ("watchBookmarkInterval", s.watch_bookmark_interval),
            ("minRequestTimeout", s.min_request_timeout),
            ("diskStateInterval", s.disk_state_interval),
            ("reviewTimeout", s.review_timeout),
        ];
        for (key, d) in positive {
            if d.0.is_zero() {
                return Err(ConfigError(format!("{key}: must be more than 0s")));
            }
        }
        for (key, n) in [("watchQueue", s.watch_queue), ("snapshotMax", s.snapshot_max)] {
            if n == 0 {
                return Err(ConfigError(format!("{key}: must be at least 1")));
            }
        }
        if s.watch_history_mib > (1 << 20) {
            return Err(ConfigError("watchHistoryMib: more than 1 TiB per cache".into()));
        }
        tracing_subscriber::EnvFilter::try_new(&s.log_level)
            .map_err(|e| ConfigError(format!("logLevel: {:?}: {e}", s.log_level)))?;
        let mode = s.mode()?;
        let upstreams = s
            .upstreams
            .iter()
            .map(|url| {
                ServerUrl::parse(url, true).map_err(|e| ConfigError(format!("upstreams: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (key, set) in [
            ("upstreamsCaFile", s.upstreams_ca_file.is_some()),
            ("upstreamsClientCertFile", s.upstreams_client_cert_file.is_some()),
            ("upstreamsClientKeyFile", s.upstreams_client_key_file.is_some()),
        ] {
            if set && upstreams.is_empty() {
                return Err(ConfigError(format!("{key}: set without upstreams")));
            }
        }
        if s.upstreams_client_cert_file.is_some() != s.upstreams_client_key_file.is_some() {
            return Err(ConfigError(
                "upstreamsClientCertFile: needs upstreamsClientKeyFile, and the other way round"
                    .into(),
            ));
        }
        let watch = WatchConfig {
            history_events: s.watch_history_events,
            history_bytes: s.watch_history_mib.saturating_mul(1 << 20),
            history_window: s.watch_history_window.0,
            queue_frames: s.watch_queue,
            slow_after: s.watch_slow_after.0,
            bookmark_interval: s.watch_bookmark_interval.0,
            max_timeout: s.min_request_timeout.0,
        };
        let caches = CachesConfig {
            limits: StoreLimits {
                max_snapshots: s.snapshot_max,
                max_snapshot_age: s.snapshot_window.0,
            },
            idle_timeout: s.cache_idle_timeout.0,
            preload,
            scopes,
            watch,
            freshness: FreshnessConfig {
                sync_wait: s.cache_sync_wait.0,
                consistent_wait: s.consistent_read_wait.0,
                probe_min_list_bytes: s.consistent_list_probe_min_bytes,
            },
            discovery_ttl: s.discovery_ttl.0,
            memory_budget: (s.cache_memory_budget > 0)
                .then(|| usize::try_from(s.cache_memory_budget).unwrap_or(usize::MAX)),
            namespace: s.cache_namespace.clone(),
            disk: kubeplex::live::disk::DiskConfig {
                dir: s.disk_state_dir.clone(),
                interval: s.disk_state_interval.0,
                max_bytes: s.disk_state_max_bytes,
            },
        };
        // logLevel when it is set (or RUST_LOG is not); the access log's target on or off
        // whatever the level says.
        let level = (s.log_level != Settings::defaults().log_level
            || std::env::var_os("RUST_LOG").is_none())
        .then(|| s.log_level.clone())
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info".to_string());
        let access = if s.access_log { "info" } else { "off" };
        let log_filter = format!("{level},{ACCESS_LOG_TARGET}={access}");
        let guardrails = kubeplex::serve::guardrails::Guardrails {
            max_requests_inflight: s.max_requests_inflight,
            max_mutating_requests_inflight: s.max_mutating_requests_inflight,
            queue_wait: s.inflight_queue_wait.0,
            max_request_body_bytes: s.max_request_body_bytes,
            header_read_timeout: s.header_read_timeout.0,
            idle_timeout: s.idle_timeout.0,
            max_header_bytes: s.max_header_bytes,
            max_connections: s.max_connections,
        };
        Ok(Config {
            mode,
            caches,
            guardrails,
            shutdown_grace_period: s.shutdown_grace_period.0,
            log_filter,
            log_format: s.log_format,
            upstreams,
            settings: s,
        })
    }

    /// The listener's mode, or the one line that says why these settings cannot run.
    fn mode(&self) -> Result<Mode, ConfigError> {
        match self.mode {
            ModeName::Node => {
                let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_private_key_file)
                else {
                    return Err(ConfigError("mode: node needs tlsCertFile and tlsPrivateKeyFile (--tls-cert-file, --tls-private-key-file): clients send credentials only over TLS".into()));
                };
                let mut tls = kubeplex_net::TlsConfig::new(cert.clone(), key.clone());
                if let Some(ca) = &self.client_ca_file {
                    tls = tls.with_client_ca(ca.clone());
                }
                let reviews = ReviewConfig {
                    token_ttl: self.token_review_ttl.0,
                    invalid_token_ttl: self.token_review_invalid_ttl.0,
                    allowed_ttl: self.access_review_allowed_ttl.0,
                    denied_ttl: self.access_review_denied_ttl.0,
                    outage_grace: self.auth_outage_grace.0,
                    outage_recent: self.auth_outage_recent.0,
                    timeout: self.review_timeout.0,
                    ..ReviewConfig::default()
                };
                let bound_node = match (self.node_impersonation, &self.node_name) {
                    (NodeImpersonationName::Legacy, _) => None,
                    (NodeImpersonationName::AssociatedNode, Some(name)) => Some(name.clone()),
                    (NodeImpersonationName::AssociatedNode, None) => {
                        return Err(ConfigError("nodeImpersonation: associated-node needs nodeName (--node-name, KUBEPLEX_NODE_NAME): the node whose kubelet this kubeplex acts for".into()));
                    }
                };
                Ok(Mode::Node(Box::new(NodeConfig {
                    tls,
                    anonymous: self.anonymous_auth,
                    reviews,
                    graph_lag: self.node_graph_lag.0,
                    node_authorizer: self.node_authorizer,
                    authorizers_grant_whole: self.authorizers_grant_whole,
                    bound_node,
                    verify_service_account_tokens: self.verify_service_account_tokens,
                })))
            }
            ModeName::Sidecar => {
                let node_only = [
                    ("tlsCertFile", self.tls_cert_file.is_some()),
                    ("tlsPrivateKeyFile", self.tls_private_key_file.is_some()),
                    ("clientCaFile", self.client_ca_file.is_some()),
                ];
                if let Some((key, _)) = node_only.iter().find(|(_, set)| *set) {
                    return Err(ConfigError(format!(
                        "{key}: only for mode: node (the sidecar listener is plain HTTP)"
                    )));
                }
                // A listener other processes can reach would serve the cache to anyone with
                // kubeplex's identity.
                if !self.listen.ip().is_loopback() && !self.allow_shared_identity_listener {
                    return Err(ConfigError(format!(
                        "listen: {} is not a loopback address: in the sidecar mode every client reads the cache with kubeplex's identity; use mode: node (TLS, authenticated clients) or set allowSharedIdentityListener",
                        self.listen
                    )));
                }
                Ok(Mode::Sidecar(match self.http1_server {
                    Http1ServerName::Lean => Http1Server::Lean,
                    Http1ServerName::Hyper => Http1Server::Hyper,
                }))
            }
        }
    }
}
