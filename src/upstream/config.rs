//! Where the upstream kube-apiserver is and how to authenticate to it, resolved the way
//! Kubernetes components resolve it, in one place (`UpstreamConfig::resolve_in`, in
//! `resolve.rs`).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Default TCP connect timeout toward the apiserver (client-go's dialer uses 30 s; a proxy in
/// front of local clients should fail over faster).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a token file's mtime is checked. The kubelet rotates projected service-account
/// tokens well before expiry, so a few seconds of lag is harmless and keeps `stat` calls rare.
pub const DEFAULT_TOKEN_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// The service-account directory the kubelet mounts into every pod.
pub const IN_CLUSTER_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The validated connection settings for the upstream kube-apiserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// The apiserver's base URL: scheme, authority and an optional path prefix.
    pub server: ServerUrl,
    /// How the server is verified and which client certificate is presented.
    pub tls: TlsConfig,
    /// The credential put on each request (besides a client certificate).
    pub auth: AuthConfig,
    /// The context's namespace (or the pod's, in-cluster), if any.
    pub namespace: Option<String>,
    /// Where this configuration came from, for logs.
    pub source: ConfigSource,
    /// TCP connect timeout. There is deliberately no overall request timeout: watches are long.
    pub connect_timeout: Duration,
    /// Minimum interval between two checks of a token file for rotation.
    pub token_reload_interval: Duration,
    /// Servers tried before `server`, in order (a pool tier's Service): requests go to the
    /// first that can be reached, `server` — the apiserver — being the last resort
    /// (`upstream::failover`). Same credentials. Empty: only `server`.
    pub preferred: Vec<PreferredServer>,
}

/// A server tried before the apiserver (`UpstreamConfig::preferred`): its URL, the CA its
/// certificate is verified with (the kubeconfig's when `None`), and the client certificate
/// presented to it (the kubeconfig's when `None`; read again when the files change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredServer {
    pub server: ServerUrl,
    pub ca_pem: Option<Vec<u8>>,
    pub client_cert: Option<CertFiles>,
}

/// A PEM client certificate chain and its key, as files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The apiserver base URL, split into the parts a request is rebuilt from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// `true` for `https`, `false` for plain `http` (the fake apiserver).
    pub https: bool,
    /// `host[:port]` as written in the configuration.
    pub authority: String,
    /// Path prefix without a trailing slash (`""` for none), e.g. `/k8s/clusters/c-1`.
    pub path_prefix: String,
}

/// TLS settings for the upstream connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM bundle of the CAs trusted for the server certificate; the only roots used.
    pub ca_pem: Option<Vec<u8>>,
    /// Accept any server certificate (kubeconfig `insecure-skip-tls-verify`).
    pub insecure_skip_tls_verify: bool,
    /// Name the server certificate is verified against (and sent as SNI) instead of the host.
    pub server_name: Option<String>,
    /// Client certificate and key presented to the server.
    pub client_cert: Option<ClientCertPem>,
}

/// A PEM client certificate chain and its private key.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCertPem {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl fmt::Debug for ClientCertPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCertPem")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// The credential sent in the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthConfig {
    /// No header credential (anonymous, or client certificate only).
    None,
    /// A fixed bearer token.
    Token(String),
    /// A bearer token read from a file and re-read when the file changes (service-account token
    /// rotation, kubeconfig `tokenFile`). `initial` is used until the first successful re-read.
    TokenFile { path: PathBuf, initial: String },
    /// HTTP basic authentication.
    Basic { username: String, password: String },
    /// A client-go credential plugin, run when no cached credential is valid.
    Exec(ExecConfig),
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Token(_) => f.write_str("Token(<redacted>)"),
            Self::TokenFile { path, .. } => {
                f.debug_struct("TokenFile").field("path", path).finish()
            }
            Self::Basic { username, .. } => {
                f.debug_struct("Basic").field("username", username).finish()
            }
            Self::Exec(exec) => f.debug_tuple("Exec").field(exec).finish(),
        }
    }
}

/// A kubeconfig `exec` credential plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecConfig {
    /// The program; a relative path containing `/` was resolved against the kubeconfig's dir.
    pub command: String,
    pub args: Vec<String>,
    /// Added to kubeplex's own environment.
    pub env: Vec<(String, String)>,
    /// `client.authentication.k8s.io/v1` or `/v1beta1`; the plugin must answer in it.
    pub api_version: String,
    /// `spec.cluster` of the `ExecCredential` passed in `KUBERNETES_EXEC_INFO`, when the
    /// kubeconfig sets `provideClusterInfo`.
    pub cluster_info: Option<serde_json::Value>,
}

/// Where an [`UpstreamConfig`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The pod's service account.
    InCluster,
    /// The kubeconfig files read (in merge order) and the context used.
    Kubeconfig { files: Vec<PathBuf>, context: String },
}

/// The process inputs that decide the configuration, injectable for tests.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// Set when running in a pod (`KUBERNETES_SERVICE_HOST` and `_PORT` both non-empty).
    pub in_cluster: Option<InClusterEnv>,
    /// `$KUBECONFIG`, a path list.
    pub kubeconfig_var: Option<OsString>,
    /// `$HOME`, for `~/.kube/config`.
    pub home: Option<PathBuf>,
}

/// What in-cluster configuration reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InClusterEnv {
    pub host: String,
    pub port: String,
    /// Holds `token`, `ca.crt` and `namespace`.
    pub dir: PathBuf,
}

impl Environment {
    /// Reads the real process environment.
    pub fn from_process() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        // client-go's InClusterConfig needs both variables; one alone is "not in cluster".
        let in_cluster = match (var("KUBERNETES_SERVICE_HOST"), var("KUBERNETES_SERVICE_PORT")) {
            (Some(host), Some(port)) => {
                Some(InClusterEnv { host, port, dir: IN_CLUSTER_DIR.into() })
            }
            _ => None,
        };
        Self {
            in_cluster,
            kubeconfig_var: std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()),
            home: std::env::var_os("HOME").filter(|v| !v.is_empty()).map(PathBuf::from),
        }
    }
}

/// Why no usable configuration could be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no upstream configuration: no --kubeconfig given, not running in a cluster, \
         KUBECONFIG is unset and {0} does not exist"
    )]
    NothingFound(PathBuf),
    #[error("kubeconfig {0} does not exist")]
    ExplicitMissing(PathBuf),
    #[error("none of the files in KUBECONFIG exists: {0:?}")]
    KubeconfigVarEmpty(Vec<PathBuf>),
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing kubeconfig {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("kubeconfig {path}: duplicate {kind} name {name:?}")]
    DuplicateName { path: PathBuf, kind: &'static str, name: String },
    #[error("current-context is not set in {files:?}; choose a context with --context")]
    NoCurrentContext { files: Vec<PathBuf> },
    #[error("context {context:?} not found in {files:?}")]
    ContextNotFound { context: String, files: Vec<PathBuf> },
    #[error("cluster was not specified for context {context:?}")]
    NoClusterInContext { context: String },
    #[error("cluster {cluster:?} was not found for context {context:?}")]
    ClusterNotFound { cluster: String, context: String },
    #[error("user {user:?} was not found for context {context:?}")]
    UserNotFound { user: String, context: String },
    #[error("no server found for cluster {0:?}")]
    NoServer(String),
    #[error("invalid server url {url:?}: {reason}")]
    InvalidServer { url: String, reason: &'static str },
    #[error("cluster {0:?} sets proxy-url, which kubeplex does not support; reach the apiserver directly")]
    ProxyUrlUnsupported(String),
    #[error("invalid base64 in {field} of {owner:?}")]
    Base64 { field: &'static str, owner: String },
    #[error("user {user:?} uses auth-provider {provider:?}, which kubeplex does not support; use an exec credential plugin")]
    AuthProviderUnsupported { user: String, provider: String },
    #[error("user {0:?} sets impersonation (as, as-groups, as-uid or as-user-extra), which kubeplex does not support")]
    ImpersonationUnsupported(String),
    #[error("more than one authentication method found for {user:?}; found [token basicAuth], only one is allowed")]
    TokenAndBasic { user: String },
    #[error("client-key-data or client-key must be specified for {0:?} to use the clientCert authentication method")]
    MissingClientKey(String),
    #[error("client-certificate-data or client-certificate must be specified for {0:?} with a client key")]
    MissingClientCert(String),
    #[error("user {user:?}: invalid exec plugin: {reason}")]
    InvalidExec { user: String, reason: String },
}

impl ServerUrl {
    /// Parses a kubeconfig `server`. Like client-go's `DefaultServerURL`, a URL without a
    /// scheme gets `https` when TLS settings are present and `http` otherwise.
    pub fn parse(server: &str, default_tls: bool) -> Result<Self, ConfigError> {
        let invalid = |reason| ConfigError::InvalidServer { url: server.to_owned(), reason };
        let full = if server.contains("://") {
            server.to_owned()
        } else if default_tls {
            format!("https://{server}")
        } else {
            format!("http://{server}")
        };
        let uri: http::Uri = full.parse().map_err(|_| invalid("not a valid url"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(invalid("the scheme must be http or https")),
        };
        let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
        if authority.as_str().contains('@') {
            return Err(invalid("user info in the url is not supported"));
        }
        if authority.host().is_empty() {
            return Err(invalid("no host"));
        }
        if uri.query().is_some() {
            return Err(invalid("a query is not allowed"));
        }
        Ok(Self {
            https,
            authority: authority.as_str().to_owned(),
            path_prefix: uri.path().trim_end_matches('/').to_owned(),
        })
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.path_prefix)
    }
}

#[cfg(test)]
mod tests;
