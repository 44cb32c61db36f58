//! Every setting, once: a flag, a `KUBEPLEX_*` variable and a file key each.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use kubeplex::live::caches::FreshnessConfig;

use super::duration::Duration;

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
    /// Servers tried, in order, before the apiserver the kubeconfig (or in-cluster config)
    /// names, with the same credentials: a pool tier's Service. Requests go to the first that
    /// can be reached; the apiserver is the last resort, and kubeplex goes back to an earlier
    /// one (its watches resuming from their resourceVersion) within seconds of its return.
    #[arg(
        long = "upstream",
        env = "KUBEPLEX_UPSTREAMS",
        value_delimiter = ',',
        help_heading = "Upstream"
    )]
    pub upstreams: Vec<String>,
    /// CA bundle that verifies the `upstreams`' serving certificates (default: the
    /// kubeconfig's CA).
    #[arg(long, env = "KUBEPLEX_UPSTREAMS_CA_FILE", help_heading = "Upstream")]
    pub upstreams_ca_file: Option<PathBuf>,
    /// Client certificate (PEM) presented to the `upstreams` instead of the kubeconfig's
    /// credentials' certificate, e.g. the node tiers' certificate a pool tier authenticates
    /// (no TokenReview per node). Read again when it changes. With upstreamsClientKeyFile.
    #[arg(long, env = "KUBEPLEX_UPSTREAMS_CLIENT_CERT_FILE", help_heading = "Upstream")]
    pub upstreams_client_cert_file: Option<PathBuf>,
    /// Private key of upstreamsClientCertFile (PEM).
    #[arg(long, env = "KUBEPLEX_UPSTREAMS_CLIENT_KEY_FILE", help_heading = "Upstream")]
    pub upstreams_client_key_file: Option<PathBuf>,

    /// `sidecar`: a loopback listener whose clients share kubeplex's identity (plain HTTP).
    /// `node`: the node-local mode — TLS, clients authenticated (client certificate, bearer
    /// token by TokenReview, else anonymous) and every read from the cache authorized for them
    /// by a SubjectAccessReview (or by the Node authorizer's rules: nodeAuthorizer).
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
    /// Listen for clients only once ready (the configured caches synced, as `/readyz` says):
    /// until then a connection is refused, so that clients with another upstream to go to —
    /// node tiers in front of pool replicas — use one that can answer from its caches, rather
    /// than one that would pass their reads on to the apiserver while it loads. The port is
    /// held from the start.
    #[arg(
        long,
        env = "KUBEPLEX_LISTEN_WHEN_READY",
        default_value_t = false,
        action = clap::ArgAction::Set,
        help_heading = "Listener"
    )]
    pub listen_when_ready: bool,

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
    /// Node mode: for how long after a pod is bound to a node that node's reads of the pod and
    /// of what it uses in its namespace (ConfigMaps, Secrets, claims), when the Node
    /// authorizer refuses them because its graph has not caught up with the binding yet
    /// (1.36: median 0.3 s, up to ~1 s), are sent again until granted instead of handing the
    /// refusal to the agent; no read waits before it is refused. 0s: never retried.
    #[arg(
        long,
        env = "KUBEPLEX_NODE_GRAPH_LAG",
        default_value = "1500ms",
        help_heading = "Node mode"
    )]
    pub node_graph_lag: Duration,
    /// Node mode: the apiserver authorizes with the Node authorizer, and nothing ahead of it
    /// refuses what it grants (`--authorization-mode=Node,RBAC`, as kubeadm and managed
    /// clusters run it). A node's reads it grants by rule are then answered without a
    /// SubjectAccessReview: its own Node and pods, services, RuntimeClasses, CSIDrivers, and a
    /// ConfigMap or Secret that a pod the cache of pods has shown bound to that node for twice
    /// nodeGraphLag (at least 3 s) uses. Anything else is still reviewed.
    #[arg(
        long,
        env = "KUBEPLEX_NODE_AUTHORIZER",
        default_value_t = false,
        action = clap::ArgAction::Set,
        help_heading = "Node mode"
    )]
    pub node_authorizer: bool,
    /// Node mode: the apiserver's authorizers grant a resource whole — none refuses part of
    /// what it grants for every object (a name, a label or field selector): RBAC, the Node
    /// authorizer and ABAC do not, a webhook whose matchConditions or policy look at names or
    /// selectors may (structured authorization configuration), or at a ServiceAccount token's
    /// extras (the pod and node it is bound to). A read narrowed by a name or selector, or by
    /// one ServiceAccount's token, is then granted by one review of the same read of the whole
    /// resource by the ServiceAccount, and an impersonation of one user by one review of
    /// impersonating every user, shared by all the names, selectors and nodes a client reads
    /// with (a CNI agent's pods of each node; every node tier's services). Off, each such read
    /// is reviewed as it is.
    #[arg(
        long,
        env = "KUBEPLEX_AUTHORIZERS_GRANT_WHOLE",
        default_value_t = false,
        action = clap::ArgAction::Set,
        help_heading = "Node mode"
    )]
    pub authorizers_grant_whole: bool,
    /// Node mode, with `nodeName`: how this kubeplex acts for its node's kubelet upstream.
    /// `associated-node`: its credential is bound to its node (the pod's ServiceAccount token,
    /// whose node kube-apiserver 1.36 knows), and it acts only as that node — with
    /// `Impersonate-User: system:node:NAME` alone, which constrained impersonation
    /// (`impersonate:associated-node`, beta and on by default since 1.36) grants it for its own
    /// node and no other; the caches of the node's own pods and Node load as that node too, so
    /// its credential needs no read of every pod or Node. `legacy`: the `impersonate` verb,
    /// with the certificate's user and groups (any node, if RBAC lets it name any user; older
    /// apiservers).
    #[arg(
        long,
        env = "KUBEPLEX_NODE_IMPERSONATION",
        default_value = "legacy",
        help_heading = "Node mode"
    )]
    pub node_impersonation: NodeImpersonationName,
    /// Node mode: ServiceAccount tokens bound to a pod (every pod's projected token: node
    /// tiers', DaemonSet agents') are verified here as the apiserver's ServiceAccount
    /// authenticator verifies them — signed with one of its keys (`/openid/v1/jwks`), issued
    /// by it for its own audience (its issuer; `--api-audiences` defaults to it), current, and
    /// bound to a pod and ServiceAccount that caches whose watch is live show with the token's
    /// uids — rather than by a TokenReview each; anything it cannot tell is reviewed. Needs a
    /// cache of pods and of ServiceAccounts (`caches`), and `get` of the discovery paths
    /// (`system:service-account-issuer-discovery`).
    #[arg(
        long,
        env = "KUBEPLEX_VERIFY_SERVICE_ACCOUNT_TOKENS",
        default_value_t = false,
        action = clap::ArgAction::Set,
        help_heading = "Node mode"
    )]
    pub verify_service_account_tokens: bool,

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
    /// wait ~1.5 s for a bookmark probe of its own — unless it is about all of a small cache,
    /// proven by one metadata list; larger ones, and watches, are proven.
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
    /// How long events are kept per cache for watches that resume from a resourceVersion
    /// (and the newest 100 for four times as long): the apiserver keeps at least 75 s; older
    /// RVs get 410 Gone, and the client lists again (from the cache).
    #[arg(
        long,
        env = "KUBEPLEX_WATCH_HISTORY_WINDOW",
        default_value = "150s",
        help_heading = "Watches"
    )]
    pub watch_history_window: Duration,
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
    /// A passthrough request over its in-flight limit waits this long for a slot before its
    /// 429, as the apiserver's priority and fairness queues it (a quarter of its request
    /// timeout); at most as many wait as the limit lets in flight; 0s: refused at once.
    #[arg(
        long,
        env = "KUBEPLEX_INFLIGHT_QUEUE_WAIT",
        default_value = "15s",
        help_heading = "Guardrails"
    )]
    pub inflight_queue_wait: Duration,
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

/// `--node-impersonation`.
#[derive(ValueEnum, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum NodeImpersonationName {
    AssociatedNode,
    Legacy,
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

/// The file's key of a flag's id (`watch_queue` → `watchQueue`).
pub fn camel_case(id: &str) -> String {
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
