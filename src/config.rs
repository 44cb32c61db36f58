//! kubeplex's settings: one YAML file (`--config`), `KUBEPLEX_*` environment variables and
//! flags, in that order of strength (a flag beats a variable, which beats the file, which beats
//! the default), resolved and checked into one [`Config`] before any socket binds.
//!
//! There is one list of settings, [`Settings`]: a flag `--watch-queue` is the file's key
//! `watchQueue` and the variable `KUBEPLEX_WATCH_QUEUE` (the one exception: `--cache`, repeated,
//! is the list `caches`). `kubeplex config print` shows every key with its effective value, and
//! its output is itself a valid file.
//!
//! Errors are one line naming the key, and for the file its path and line, like
//! `kubeplex.yaml:4: unknown key "watchQueu" (did you mean "watchQueue"?)`.

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches, ValueEnum};
use kubeplex::auth::ReviewConfig;
use kubeplex::cache::fanout::WatchConfig;
use kubeplex::cache::store::StoreLimits;
use kubeplex::serve::stack::ACCESS_LOG_TARGET;
use kubeplex::serve::{Http1Server, Mode, NodeConfig};
use kubeplex::upstream::caches::{CachesConfig, FreshnessConfig};
use kubeplex::wire::names::{is_dns1123_label, is_dns1123_subdomain};
use serde::{Deserialize, Serialize};

/// The file's `apiVersion` (optional; when given it must be this one).
pub const API_VERSION: &str = "config.kubeplex.io/v1alpha1";
/// The file's `kind` (optional; when given it must be this one).
pub const KIND: &str = "KubeplexConfiguration";

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

/// A configuration file larger than this is refused before it is parsed (the examples are a
/// few hundred bytes; no setting needs more).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Every setting of `kubeplex serve`: a flag, a `KUBEPLEX_*` variable and a file key each.
/// The defaults live here, in the flags' `default_value`s, and nowhere else.
#[derive(Args, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default = "Settings::defaults")]
pub struct Settings {
    /// Written by `config print`; optional in a file, and checked when given.
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,

    /// Kubeconfig of the upstream apiserver; without it: in-cluster, $KUBECONFIG, ~/.kube/config.
    #[arg(long, env = "KUBEPLEX_KUBECONFIG", help_heading = "Upstream")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: its current-context).
    #[arg(long, env = "KUBEPLEX_CONTEXT", help_heading = "Upstream")]
    pub context: Option<String>,

    /// `sidecar`: a loopback listener whose clients share kubeplex's identity (plain HTTP).
    /// `node`: the node-local mode — TLS, clients authenticated (client certificate, bearer
    /// token by TokenReview, else anonymous) and every read from the cache authorized for them
    /// by a SubjectAccessReview.
    #[arg(long, env = "KUBEPLEX_MODE", default_value = "sidecar", help_heading = "Listener")]
    pub mode: ModeName,
    /// Where clients connect (HTTP/1.1 and HTTP/2).
    #[arg(
        long,
        env = "KUBEPLEX_LISTEN",
        default_value = "127.0.0.1:8001",
        help_heading = "Listener"
    )]
    pub listen: SocketAddr,
    /// Admin endpoints: /metrics, /healthz, /readyz, /debug/caches.
    #[arg(
        long,
        env = "KUBEPLEX_ADMIN_LISTEN",
        default_value = "127.0.0.1:9090",
        help_heading = "Listener"
    )]
    pub admin_listen: SocketAddr,
    /// Server for plain HTTP/1.1 clients: `lean` answers body-less GETs (lists, gets, watches)
    /// with no buffers held while a watch idles, the rest with hyper; `hyper` uses hyper for all.
    #[arg(long, env = "KUBEPLEX_HTTP1_SERVER", default_value = "lean", help_heading = "Listener")]
    pub http1_server: Http1ServerName,
    /// Sidecar mode: allow a listener other processes can reach (not loopback), whose clients
    /// would all read the cache with kubeplex's identity. Refused unless set.
    #[arg(
        long,
        env = "KUBEPLEX_ALLOW_SHARED_IDENTITY_LISTENER",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        help_heading = "Listener"
    )]
    pub allow_shared_identity_listener: bool,
    /// On SIGTERM or SIGINT: readiness fails, the listener stops accepting, open watches end
    /// (clients resume elsewhere or after the restart), requests under way get this long to
    /// finish; then kubeplex exits 0. Keep it below the pod's terminationGracePeriodSeconds.
    #[arg(
        long,
        env = "KUBEPLEX_SHUTDOWN_GRACE_PERIOD",
        default_value = "25s",
        help_heading = "Listener"
    )]
    pub shutdown_grace_period: Duration,

    /// Node mode: serving certificate (PEM chain) of the TLS listener; reloaded when it changes.
    #[arg(long, env = "KUBEPLEX_TLS_CERT_FILE", help_heading = "Node mode")]
    pub tls_cert_file: Option<PathBuf>,
    /// Node mode: private key of the serving certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "KUBEPLEX_TLS_PRIVATE_KEY_FILE", help_heading = "Node mode")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Node mode: client CA bundle; client certificates it signed authenticate as user = CN,
    /// groups = O (the apiserver's --client-ca-file).
    #[arg(long, env = "KUBEPLEX_CLIENT_CA_FILE", help_heading = "Node mode")]
    pub client_ca_file: Option<PathBuf>,
    /// Node mode: requests without credentials are system:anonymous (true, as the apiserver's
    /// --anonymous-auth) or refused with 401 (false).
    #[arg(
        long,
        env = "KUBEPLEX_ANONYMOUS_AUTH",
        default_value_t = true,
        action = clap::ArgAction::Set,
        help_heading = "Node mode"
    )]
    pub anonymous_auth: bool,
    /// Node mode: how long a valid token's TokenReview answer is used (the apiserver's
    /// --authentication-token-webhook-cache-ttl).
    #[arg(
        long,
        env = "KUBEPLEX_TOKEN_REVIEW_TTL",
        default_value = "2m",
        help_heading = "Node mode"
    )]
    pub token_review_ttl: Duration,
    /// Node mode: how long an invalid token's TokenReview answer is used.
    #[arg(
        long,
        env = "KUBEPLEX_TOKEN_REVIEW_INVALID_TTL",
        default_value = "10s",
        help_heading = "Node mode"
    )]
    pub token_review_invalid_ttl: Duration,
    /// Node mode: how long a SubjectAccessReview's grant is used (the apiserver's
    /// --authorization-webhook-cache-authorized-ttl).
    #[arg(
        long,
        env = "KUBEPLEX_ACCESS_REVIEW_ALLOWED_TTL",
        default_value = "1m",
        help_heading = "Node mode"
    )]
    pub access_review_allowed_ttl: Duration,
    /// Node mode: how long a denial is used (short, so that a new RoleBinding takes effect
    /// quickly; the apiserver's --authorization-webhook-cache-unauthorized-ttl).
    #[arg(
        long,
        env = "KUBEPLEX_ACCESS_REVIEW_DENIED_TTL",
        default_value = "10s",
        help_heading = "Node mode"
    )]
    pub access_review_denied_ttl: Duration,
    /// Node mode: while the apiserver cannot be reached (no connection, 502/503/504), reviews
    /// are answered with the last answers that were still current when it last answered, for
    /// at most this long after that moment; 0s: never (cached reads then fail as the
    /// apiserver does). A revocation made during an outage takes effect when kubeplex reaches
    /// the apiserver again, or after this long (docs/operations.md, "Outages").
    #[arg(
        long,
        env = "KUBEPLEX_AUTH_OUTAGE_GRACE",
        default_value = "24h",
        help_heading = "Node mode"
    )]
    pub auth_outage_grace: Duration,
    /// Node mode: in an outage, a last answer stands in only if it was given within its TTL
    /// plus this of the apiserver's last answer (agents re-review their watches every 5-10
    /// minutes). A revocation made this long before an outage may not be seen during it.
    #[arg(
        long,
        env = "KUBEPLEX_AUTH_OUTAGE_RECENT",
        default_value = "15m",
        help_heading = "Node mode"
    )]
    pub auth_outage_recent: Duration,
    /// Node mode: how long a TokenReview or SubjectAccessReview may take before the apiserver
    /// counts as not answering.
    #[arg(
        long,
        env = "KUBEPLEX_REVIEW_TIMEOUT",
        default_value = "10s",
        help_heading = "Node mode"
    )]
    pub review_timeout: Duration,

    /// Caches to start at start-up and keep running (readiness waits for them):
    /// RESOURCE (core/v1) or GROUP/VERSION/RESOURCE, with `:protobuf` for the protobuf cache,
    /// and optionally `?fieldSelector=…&labelSelector=…` to cache only what those select (as a
    /// list's query writes them; `{nodeName}` is replaced by nodeName). The file's key is
    /// `caches`.
    #[arg(long = "cache", env = "KUBEPLEX_CACHES", value_delimiter = ',', help_heading = "Caches")]
    pub caches: Vec<String>,
    /// Scopes for caches started by reads, in the syntax of `caches`, which cost nothing until
    /// read: the first read within one starts that cache (rather than one of the read's own
    /// scope), and it then serves every read within it — a node's kubelet and kube-proxy share
    /// one cache of services though their selectors differ. The file's key is `cacheScopes`.
    #[arg(
        long = "cache-scope",
        env = "KUBEPLEX_CACHE_SCOPES",
        value_delimiter = ',',
        help_heading = "Caches"
    )]
    pub cache_scopes: Vec<String>,
    /// The node this kubeplex serves (a node-local DaemonSet sets it from the downward API's
    /// `spec.nodeName`): `{nodeName}` in a cache's selectors is replaced by it, so that a node
    /// caches its own pods (`pods:protobuf?fieldSelector=spec.nodeName={nodeName}`).
    #[arg(long, env = "KUBEPLEX_NODE_NAME", help_heading = "Caches")]
    pub node_name: Option<String>,
    /// Caches of namespaced resources list and watch only this namespace, and answer only
    /// reads within it; other reads of those resources pass through. For a sidecar whose
    /// ServiceAccount has a Role in its namespace rather than a ClusterRole. Unset:
    /// cluster-wide.
    #[arg(long, env = "KUBEPLEX_CACHE_NAMESPACE", help_heading = "Caches")]
    pub cache_namespace: Option<String>,
    /// How long the upstream's discovery answers are used before they are refreshed; while
    /// the upstream cannot be reached, the last answers are kept (reads go on being served
    /// from the caches through an outage of any length).
    #[arg(long, env = "KUBEPLEX_DISCOVERY_TTL", default_value = "5m", help_heading = "Caches")]
    pub discovery_ttl: Duration,
    /// Stop a resource's cache (and its upstream watch) after this long without readers.
    #[arg(
        long,
        env = "KUBEPLEX_CACHE_IDLE_TIMEOUT",
        default_value = "15m",
        help_heading = "Caches"
    )]
    pub cache_idle_timeout: Duration,
    /// How long past states are kept for exact-resourceVersion lists and continue tokens.
    #[arg(long, env = "KUBEPLEX_SNAPSHOT_WINDOW", default_value = "5m", help_heading = "Caches")]
    pub snapshot_window: Duration,
    /// At most this many past states are kept per cache.
    #[arg(long, env = "KUBEPLEX_SNAPSHOT_MAX", default_value_t = 10_000, help_heading = "Caches")]
    pub snapshot_max: usize,
    /// Reads of a cache that has not synced yet wait this long for its first load (sharing
    /// its one upstream list), then pass through; 0s: pass through at once.
    #[arg(long, env = "KUBEPLEX_CACHE_SYNC_WAIT", default_value = "15s", help_heading = "Caches")]
    pub cache_sync_wait: Duration,
    /// Consistent reads (resourceVersion unset: kubectl get, WatchList informers) wait this
    /// long for the cache to be shown current (a one-item list and a bookmark probe upstream,
    /// shared by all waiting reads), then pass through; 0s: always pass through.
    #[arg(
        long,
        env = "KUBEPLEX_CONSISTENT_READ_WAIT",
        default_value = "3s",
        help_heading = "Caches"
    )]
    pub consistent_read_wait: Duration,
    /// A consistent list smaller than this (bytes of its objects) passes through rather than
    /// wait ~1.5 s for a bookmark probe of its own; larger ones, and watches, are proven.
    #[arg(
        long,
        env = "KUBEPLEX_CONSISTENT_LIST_PROBE_MIN_BYTES",
        default_value_t = FreshnessConfig::PROBE_MIN_LIST_BYTES,
        help_heading = "Caches"
    )]
    pub consistent_list_probe_min_bytes: usize,

    /// Events kept per cache for watches that resume from a resourceVersion.
    #[arg(
        long,
        env = "KUBEPLEX_WATCH_HISTORY_EVENTS",
        default_value_t = 100_000,
        help_heading = "Watches"
    )]
    pub watch_history_events: usize,
    /// MiB kept per cache for resuming watches (objects and encoded events).
    #[arg(
        long,
        env = "KUBEPLEX_WATCH_HISTORY_MIB",
        default_value_t = 256,
        help_heading = "Watches"
    )]
    pub watch_history_mib: usize,
    /// Events a downstream watcher may have waiting before it is ended as too slow.
    #[arg(long, env = "KUBEPLEX_WATCH_QUEUE", default_value_t = 1000, help_heading = "Watches")]
    pub watch_queue: usize,
    /// How long an event may wait for a downstream watcher before it is ended as too slow.
    #[arg(
        long,
        env = "KUBEPLEX_WATCH_SLOW_AFTER",
        default_value = "30s",
        help_heading = "Watches"
    )]
    pub watch_slow_after: Duration,
    /// Period of BOOKMARK events to watchers that allow them.
    #[arg(
        long,
        env = "KUBEPLEX_WATCH_BOOKMARK_INTERVAL",
        default_value = "1m",
        help_heading = "Watches"
    )]
    pub watch_bookmark_interval: Duration,
    /// Watches without timeoutSeconds end after a random time between this and twice this
    /// (the apiserver's --min-request-timeout).
    #[arg(
        long,
        env = "KUBEPLEX_MIN_REQUEST_TIMEOUT",
        default_value = "30m",
        help_heading = "Watches"
    )]
    pub min_request_timeout: Duration,

    // --- guardrails ---
    /// Passthrough reads (GET) in flight at once; more get 429 as from the apiserver's
    /// --max-requests-inflight. Watches and exec/attach/log/port-forward/proxy are exempt,
    /// cached reads are not counted; 0: no limit.
    #[arg(
        long,
        env = "KUBEPLEX_MAX_REQUESTS_INFLIGHT",
        default_value_t = 400,
        help_heading = "Guardrails"
    )]
    pub max_requests_inflight: usize,
    /// Passthrough writes in flight at once (the apiserver's
    /// --max-mutating-requests-inflight); 0: no limit.
    #[arg(
        long,
        env = "KUBEPLEX_MAX_MUTATING_REQUESTS_INFLIGHT",
        default_value_t = 200,
        help_heading = "Guardrails"
    )]
    pub max_mutating_requests_inflight: usize,
    /// Request bodies longer than this get the apiserver's 413 and are not forwarded (its
    /// MaxRequestBodyBytes, 3 MiB); 0: no limit.
    #[arg(
        long,
        env = "KUBEPLEX_MAX_REQUEST_BODY_BYTES",
        default_value_t = 3_145_728,
        help_heading = "Guardrails"
    )]
    pub max_request_body_bytes: u64,
    /// A request head must arrive whole within this from its first byte (a slow client is
    /// closed), as the apiserver's ReadHeaderTimeout; 0s: no limit.
    #[arg(
        long,
        env = "KUBEPLEX_HEADER_READ_TIMEOUT",
        default_value = "32s",
        help_heading = "Guardrails"
    )]
    pub header_read_timeout: Duration,
    /// An HTTP/1.1 keep-alive connection with no request for this long is closed (the
    /// apiserver's IdleTimeout); 0s: no limit.
    #[arg(long, env = "KUBEPLEX_IDLE_TIMEOUT", default_value = "90s", help_heading = "Guardrails")]
    pub idle_timeout: Duration,
    /// Request heads (HTTP/2 header lists) over this get 431, as the apiserver's
    /// MaxHeaderBytes.
    #[arg(
        long,
        env = "KUBEPLEX_MAX_HEADER_BYTES",
        default_value_t = 1_048_576,
        help_heading = "Guardrails"
    )]
    pub max_header_bytes: usize,
    /// Client connections open at most on the API listener; at the cap it stops accepting
    /// until one closes. 0: no cap.
    #[arg(
        long,
        env = "KUBEPLEX_MAX_CONNECTIONS",
        default_value_t = 10_000,
        help_heading = "Guardrails"
    )]
    pub max_connections: usize,

    // --- memory budget ---
    /// At most this many bytes of objects in all caches together; a cache whose load would
    /// take them past it is not started (its reads pass through; retried later). 0: no budget.
    #[arg(
        long,
        env = "KUBEPLEX_CACHE_MEMORY_BUDGET",
        default_value_t = 0,
        help_heading = "Caches"
    )]
    pub cache_memory_budget: u64,

    // --- disk state ---
    /// Write caches' states to this directory (created 0700), so that a kubeplex restarted
    /// while the apiserver is unreachable serves its last state until it answers. Unset: off.
    #[arg(long, env = "KUBEPLEX_DISK_STATE_DIR", help_heading = "Caches")]
    pub disk_state_dir: Option<PathBuf>,
    /// How often caches that changed are written to diskStateDir (and once at shutdown).
    #[arg(
        long,
        env = "KUBEPLEX_DISK_STATE_INTERVAL",
        default_value = "1m",
        help_heading = "Caches"
    )]
    pub disk_state_interval: Duration,
    /// At most this many bytes in diskStateDir; caches past it are not written.
    #[arg(
        long,
        env = "KUBEPLEX_DISK_STATE_MAX_BYTES",
        default_value_t = 2_147_483_648,
        help_heading = "Caches"
    )]
    pub disk_state_max_bytes: u64,

    /// Log lines as `text` (for people) or `json` (one object per line, for collectors).
    #[arg(long, env = "KUBEPLEX_LOG_FORMAT", default_value = "text", help_heading = "Logging")]
    pub log_format: LogFormat,
    /// What to log: a level (`info`, `debug`) or tracing directives
    /// (`info,kubeplex::upstream=debug`). RUST_LOG is used when this is not set anywhere.
    #[arg(long, env = "KUBEPLEX_LOG_LEVEL", default_value = "info", help_heading = "Logging")]
    pub log_level: String,
    /// One log line per request (method, URI, status, source: cache, upstream or denied, user
    /// in node mode, user agent, seconds to the answer's head), at target kubeplex::access.
    #[arg(
        long,
        env = "KUBEPLEX_ACCESS_LOG",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        help_heading = "Logging"
    )]
    pub access_log: bool,
}

/// `--mode`.
#[derive(ValueEnum, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ModeName {
    Sidecar,
    Node,
}

/// `--http1-server`.
#[derive(ValueEnum, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Http1ServerName {
    Lean,
    Hyper,
}

/// `--log-format`.
#[derive(ValueEnum, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// A duration as Kubernetes components write them (Go's `time.ParseDuration`, as in
/// metav1.Duration): `25s`, `1m30s`, `500ms`, `1.5h`. Printed in the same form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(pub std::time::Duration);

impl FromStr for Duration {
    type Err = String;

    /// Go's grammar: `0`, or one or more decimal numbers each with a unit (ns, us, µs, ms, s,
    /// m, h). No sign: kubeplex has no negative durations.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a duration (like 30s, 5m, 1h30m, 500ms)");
        if s.starts_with(['-', '+']) {
            return Err(bad());
        }
        let nanos = kubeplex::wire::gotime::parse_duration(s).ok_or_else(bad)?;
        Ok(Duration(std::time::Duration::from_nanos(nanos.unsigned_abs())))
    }
}

impl fmt::Display for Duration {
    /// The shortest form that parses back to the same value: `0s`, `25s`, `1h30m`, `1m500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let sub = self.0.subsec_nanos();
        if secs == 0 && sub == 0 {
            return f.write_str("0s");
        }
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        match sub {
            0 => Ok(()),
            n if n % 1_000_000 == 0 => write!(f, "{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => write!(f, "{}us", n / 1_000),
            n => write!(f, "{n}ns"),
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

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
}

/// A configuration that cannot run: one line, naming the key (and the file and line).
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Settings {
    /// Every default: the flags' defaults, with no variable read.
    pub fn defaults() -> Settings {
        let command = Settings::augment_args(clap::Command::new("defaults"))
            .mut_args(|a| a.env(None::<&str>));
        let matches = command.try_get_matches_from(["defaults"]);
        // The defaults are constants of this file: they parse (tests/config check it), so a
        // failure here is a bug in a default_value.
        matches
            .and_then(|m| Settings::from_arg_matches(&m))
            .unwrap_or_else(|e| panic!("a default of kubeplex's settings does not parse: {e}"))
    }

    /// A file's text over the defaults; the error starts with the line (`4: key: ...`) when
    /// known.
    pub fn from_yaml(text: &str) -> Result<Settings, ConfigError> {
        // An empty file (or one of comments) is all defaults.
        let parsed: Result<Option<Settings>, _> = serde_saphyr::from_str(text);
        match parsed {
            Ok(settings) => Ok(settings.unwrap_or_else(Settings::defaults)),
            Err(e) => Err(ConfigError(yaml_error_line(&e, text))),
        }
    }

    /// `self` with the values given as flags or variables in `matches` (the command line of
    /// `serve` or `config print`) put over it.
    /// Also returns the keys given so.
    pub fn overlay_command_line(
        self,
        matches: &ArgMatches,
    ) -> Result<(Settings, Vec<String>), ConfigError> {
        let given: Settings = Settings::from_arg_matches(matches)
            .map_err(|e| ConfigError(e.to_string().trim().to_string()))?;
        let mut base = serde_json::to_value(&self).map_err(internal)?;
        let given = serde_json::to_value(&given).map_err(internal)?;
        let (Some(base_map), Some(given_map)) = (base.as_object_mut(), given.as_object()) else {
            return Err(internal("settings are not a map"));
        };
        let mut keys = Vec::new();
        for id in Settings::ids() {
            let explicit = matches!(
                matches.value_source(&id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            );
            if explicit {
                let key = camel_case(&id);
                if let Some(v) = given_map.get(&key) {
                    base_map.insert(key.clone(), v.clone());
                    keys.push(key);
                }
            }
        }
        let settings = serde_json::from_value(base).map_err(|e| ConfigError(e.to_string()))?;
        Ok((settings, keys))
    }

    /// The clap ids of every setting (the field names).
    fn ids() -> Vec<String> {
        Settings::augment_args(clap::Command::new("ids"))
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect()
    }

    /// The settings as a file (`config print`).
    pub fn to_yaml(&self) -> String {
        let mut printed = self.clone();
        printed.api_version = Some(API_VERSION.to_string());
        printed.kind = Some(KIND.to_string());
        serde_saphyr::to_string(&printed).unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }

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
        let watch = WatchConfig {
            history_events: s.watch_history_events,
            history_bytes: s.watch_history_mib.saturating_mul(1 << 20),
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
            disk: kubeplex::upstream::disk::DiskConfig {
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
                Ok(Mode::Node(Box::new(NodeConfig {
                    tls,
                    anonymous: self.anonymous_auth,
                    reviews,
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

/// A configuration file's text, kept to name the line of a key in errors.
pub struct File {
    path: PathBuf,
    text: String,
}

impl File {
    /// Reads the file (at most [`MAX_FILE_BYTES`]).
    pub fn read(path: &Path) -> Result<File, ConfigError> {
        let shown = path.display();
        let size = std::fs::metadata(path)
            .map_err(|e| ConfigError(format!("{shown}: cannot read the configuration: {e}")))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(ConfigError(format!(
                "{shown}: the configuration is {size} bytes, more than the {MAX_FILE_BYTES} allowed"
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{shown}: cannot read the configuration: {e}")))?;
        Ok(File { path: path.to_path_buf(), text })
    }

    /// The file over the defaults.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        Settings::from_yaml(&self.text)
            .map_err(|e| ConfigError(format!("{}:{}", self.path.display(), e.0)))
    }

    /// `error` (from checking settings that came from this file) with the file and the line
    /// of the key it names, when the file sets that key.
    pub fn locate(&self, error: ConfigError) -> ConfigError {
        let Some((key, _)) = error.0.split_once(':') else { return error };
        let line = self.text.lines().position(|l| {
            l.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(':'))
        });
        match line {
            Some(i) => ConfigError(format!("{}:{}: {}", self.path.display(), i + 1, error.0)),
            None => error,
        }
    }
}

/// The checked settings of a command line (`serve`, `config print`): the file named by
/// `--config` (or `KUBEPLEX_CONFIG`) over the defaults, then the variables and flags given in
/// `matches` over that. An error about a key the file set names the file and line.
pub fn load(config_file: Option<&Path>, matches: &ArgMatches) -> Result<Config, ConfigError> {
    let file = config_file.map(File::read).transpose()?;
    let base = match &file {
        Some(f) => f.settings()?,
        None => Settings::defaults(),
    };
    let (settings, given) = base.overlay_command_line(matches)?;
    settings.resolve().map_err(|e| match &file {
        // A key given as a flag or variable is not the file's.
        Some(f) if !given.iter().any(|k| e.0.starts_with(&format!("{k}:"))) => f.locate(e),
        _ => e,
    })
}

/// How a user sets the key `key` (`adminListen`): `adminListen: --admin-listen,
/// KUBEPLEX_ADMIN_LISTEN` — the file's key, and the flag and variable clap reads it from.
pub fn setting_names(key: &str) -> String {
    let command = Settings::augment_args(clap::Command::new("serve"));
    let arg = command.get_arguments().find(|a| camel_case(a.get_id().as_str()) == key);
    let flag = arg.and_then(|a| a.get_long()).map(|l| format!(", --{l}")).unwrap_or_default();
    let var = arg.and_then(|a| a.get_env()).map(|e| format!(", {}", e.to_string_lossy()));
    format!("{key}:{}{}", &flag, var.unwrap_or_default()).replacen(":,", ":", 1)
}

/// A listener that could not be bound, named as the user sets it (`names`: the file's key, the
/// flag and the variable): `cannot listen on 127.0.0.1:8001 (listen: --listen, KUBEPLEX_LISTEN):
/// Address already in use (os error 98)`.
pub fn name_the_setting(
    e: kubeplex::serve::StartError,
    names: impl Fn(&str) -> String,
) -> anyhow::Error {
    match e {
        kubeplex::serve::StartError::Bind(b) => {
            anyhow::anyhow!("cannot listen on {} ({}): {}", b.addr, names(b.setting), b.error)
        }
        e => e.into(),
    }
}

/// `kubeplex config check FILE`: the file alone (no variables or flags), checked.
pub fn check(path: &Path) -> Result<Config, ConfigError> {
    let file = File::read(path)?;
    let mut settings = file.settings()?;
    // A node's name reaches a DaemonSet's kubeplex from the downward API when it starts
    // (KUBEPLEX_NODE_NAME), never from the file: the caches that use it are checked with a
    // stand-in.
    if settings.node_name.is_none()
        && settings
            .caches
            .iter()
            .chain(&settings.cache_scopes)
            .any(|c| c.contains(NODE_NAME_PLACEHOLDER))
    {
        settings.node_name = Some(CHECK_NODE_NAME.to_string());
    }
    settings.resolve().map_err(|e| file.locate(e))
}

/// The node name `config check` puts in `{nodeName}` when the file sets none.
const CHECK_NODE_NAME: &str = "node-name";

fn internal(e: impl fmt::Display) -> ConfigError {
    ConfigError(format!("internal error reading the settings: {e}"))
}

/// `watch_queue` → `watchQueue`.
fn camel_case(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    let mut upper = false;
    for c in id.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// One line from a YAML error: `LINE: KEY: message`, with "did you mean" for a misspelled key.
fn yaml_error_line(e: &serde_saphyr::Error, text: &str) -> String {
    let plain = e.without_snippet().to_string();
    // The message without the location the library appends (the line is printed first).
    let message = plain.lines().next().unwrap_or("invalid YAML").trim();
    let message = message.split(" at line ").next().unwrap_or(message).trim();
    let line = e.location().map(|at| at.line()).filter(|l| *l > 0);
    if let Some(key) = unknown_key(message) {
        let hint = match closest_key(key) {
            Some(near) => format!("did you mean {near:?}?"),
            None => "`kubeplex config print` lists every key".to_string(),
        };
        return match line {
            Some(l) => format!("{l}: unknown key {key:?} ({hint})"),
            None => format!(" unknown key {key:?} ({hint})"),
        };
    }
    // A bad value: name the key its line sets (the file is flat: one key per line).
    let key = line
        .and_then(|l| text.lines().nth(l as usize - 1))
        .and_then(|l| l.split_once(':'))
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric()));
    match (line, key) {
        (Some(l), Some(k)) => format!("{l}: {k}: {message}"),
        (Some(l), None) => format!("{l}: {message}"),
        _ => format!(" {message}"),
    }
}

/// The key of serde's "unknown field `x`, expected one of ..." message.
fn unknown_key(message: &str) -> Option<&str> {
    let rest = message.split("unknown field `").nth(1)?;
    rest.split('`').next()
}

/// The known key nearest to a misspelled one (edit distance at most 3).
fn closest_key(key: &str) -> Option<String> {
    let known: BTreeSet<String> = serde_json::to_value(Settings::defaults())
        .ok()?
        .as_object()?
        .keys()
        .cloned()
        .chain(["apiVersion".to_string(), "kind".to_string()])
        .collect();
    known
        .into_iter()
        .map(|k| (strsim::levenshtein(&k.to_lowercase(), &key.to_lowercase()), k))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests;
