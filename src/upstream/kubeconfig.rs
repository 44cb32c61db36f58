//! Kubeconfig files (client-go `clientcmd/api/v1`): parsing, merging several files the way
//! client-go's loading rules do, and turning one context into an [`UpstreamConfig`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::config::{
    AuthConfig, ClientCertPem, ConfigError, ConfigSource, ExecConfig, ServerUrl, TlsConfig,
    UpstreamConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TOKEN_RELOAD_INTERVAL,
};

/// The cluster extension client-go hands to exec plugins as `spec.cluster.config`.
const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct File {
    clusters: Option<Vec<NamedCluster>>,
    users: Option<Vec<NamedUser>>,
    contexts: Option<Vec<NamedContext>>,
    #[serde(rename = "current-context")]
    current_context: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NamedCluster {
    name: String,
    cluster: Option<Cluster>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NamedUser {
    name: String,
    user: Option<User>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NamedContext {
    name: String,
    context: Option<Context>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    tls_server_name: Option<String>,
    insecure_skip_tls_verify: bool,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    proxy_url: Option<String>,
    extensions: Option<Vec<NamedExtension>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct NamedExtension {
    name: String,
    extension: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct User {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
    #[serde(rename = "as-uid")]
    impersonate_uid: Option<String>,
    #[serde(rename = "as-groups")]
    impersonate_groups: Option<Vec<String>>,
    #[serde(rename = "as-user-extra")]
    impersonate_extra: Option<serde_json::Value>,
    username: Option<String>,
    password: Option<String>,
    auth_provider: Option<AuthProvider>,
    exec: Option<Exec>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct AuthProvider {
    name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Exec {
    command: String,
    args: Option<Vec<String>>,
    env: Option<Vec<ExecEnv>>,
    api_version: String,
    provide_cluster_info: bool,
    interactive_mode: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ExecEnv {
    name: String,
    value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Context {
    cluster: String,
    user: String,
    namespace: Option<String>,
}

/// An entry together with the directory its relative paths are resolved against: client-go
/// records each entry's file of origin and resolves against that file's directory.
#[derive(Debug, Clone)]
struct Located<T> {
    value: T,
    dir: PathBuf,
}

/// Several kubeconfig files merged by client-go's rule: the first file to define a cluster,
/// user or context name wins, and the first file to set `current-context` wins.
#[derive(Debug, Default)]
pub(super) struct Kubeconfig {
    /// The files that existed and were read, in order.
    pub(super) files: Vec<PathBuf>,
    clusters: HashMap<String, Located<Cluster>>,
    users: HashMap<String, Located<User>>,
    contexts: HashMap<String, Context>,
    current_context: Option<String>,
}

/// One context's cluster and user, ready to be turned into an [`UpstreamConfig`].
pub(super) struct Selected {
    files: Vec<PathBuf>,
    context_name: String,
    namespace: Option<String>,
    cluster_name: String,
    cluster: Located<Cluster>,
    user_name: String,
    user: Located<User>,
}

impl Kubeconfig {
    /// Reads `paths` in order, skipping files that do not exist.
    pub(super) fn load(paths: &[PathBuf]) -> Result<Self, ConfigError> {
        let mut merged = Self::default();
        for path in paths {
            let text = match std::fs::read(path) {
                Ok(text) => text,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(ConfigError::Read { path: path.clone(), source }),
            };
            merged.merge(path, &text)?;
        }
        Ok(merged)
    }

    fn merge(&mut self, path: &Path, text: &[u8]) -> Result<(), ConfigError> {
        let parse_err = |message: String| ConfigError::Parse { path: path.to_path_buf(), message };
        let text = decode_text(text).map_err(parse_err)?;
        let text = text.as_str();
        // An empty file is an empty config for client-go, not an error.
        let file: File = serde_saphyr::from_str::<Option<File>>(text)
            .map_err(|err| parse_err(err.to_string()))?
            .unwrap_or_default();
        let abs = std::path::absolute(path)
            .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let dir = abs.parent().map(Path::to_path_buf).unwrap_or_default();
        self.files.push(path.to_path_buf());

        let clusters =
            file.clusters.unwrap_or_default().into_iter().map(|n| {
                (n.name, Located { value: n.cluster.unwrap_or_default(), dir: dir.clone() })
            });
        add_first_wins(&mut self.clusters, clusters, "cluster", path)?;
        let users = file
            .users
            .unwrap_or_default()
            .into_iter()
            .map(|n| (n.name, Located { value: n.user.unwrap_or_default(), dir: dir.clone() }));
        add_first_wins(&mut self.users, users, "user", path)?;
        let contexts = file
            .contexts
            .unwrap_or_default()
            .into_iter()
            .map(|n| (n.name, n.context.unwrap_or_default()));
        add_first_wins(&mut self.contexts, contexts, "context", path)?;
        if self.current_context.is_none() {
            self.current_context = file.current_context.filter(|c| !c.is_empty());
        }
        Ok(())
    }

    /// Picks `context` (or the current context) and the cluster and user it names.
    pub(super) fn select(mut self, context: Option<&str>) -> Result<Selected, ConfigError> {
        let context_name = match context.filter(|c| !c.is_empty()) {
            Some(name) => name.to_owned(),
            None => self
                .current_context
                .clone()
                .ok_or_else(|| ConfigError::NoCurrentContext { files: self.files.clone() })?,
        };
        let ctx =
            self.contexts.remove(&context_name).ok_or_else(|| ConfigError::ContextNotFound {
                context: context_name.clone(),
                files: self.files.clone(),
            })?;
        if ctx.cluster.is_empty() {
            return Err(ConfigError::NoClusterInContext { context: context_name });
        }
        let cluster =
            self.clusters.remove(&ctx.cluster).ok_or_else(|| ConfigError::ClusterNotFound {
                cluster: ctx.cluster.clone(),
                context: context_name.clone(),
            })?;
        // A context without a user is anonymous (or relies on the cluster's client cert-less
        // defaults); a named user that does not exist is an error, as in client-go validation.
        let user = if ctx.user.is_empty() {
            Located { value: User::default(), dir: cluster.dir.clone() }
        } else {
            self.users.remove(&ctx.user).ok_or_else(|| ConfigError::UserNotFound {
                user: ctx.user.clone(),
                context: context_name.clone(),
            })?
        };
        Ok(Selected {
            files: self.files,
            context_name,
            namespace: ctx.namespace.filter(|ns| !ns.is_empty()),
            cluster_name: ctx.cluster,
            cluster,
            user_name: ctx.user,
            user,
        })
    }
}

/// A kubeconfig's text: UTF-8, or UTF-16 (little or big endian) or UTF-8 with a byte order
/// mark, as go-yaml (client-go's YAML parser) reads them — Windows PowerShell writes UTF-16.
fn decode_text(bytes: &[u8]) -> Result<String, String> {
    let utf16 = |rest: &[u8], unit: fn([u8; 2]) -> u16| {
        if rest.len() % 2 != 0 {
            return Err("incomplete UTF-16 character".to_string());
        }
        let units = rest.chunks_exact(2).map(|c| unit([c[0], c[1]]));
        char::decode_utf16(units)
            .collect::<Result<String, _>>()
            .map_err(|err| format!("invalid UTF-16: {err}"))
    };
    match bytes {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        [0xEF, 0xBB, 0xBF, rest @ ..] | rest => {
            String::from_utf8(rest.to_vec()).map_err(|err| err.to_string())
        }
    }
}

/// Adds one file's entries: a name already defined by an earlier file keeps that definition
/// (client-go's map merge), a name defined twice in the same file is an error (client-go's
/// list-to-map conversion).
fn add_first_wins<T>(
    into: &mut HashMap<String, T>,
    entries: impl Iterator<Item = (String, T)>,
    kind: &'static str,
    path: &Path,
) -> Result<(), ConfigError> {
    let mut in_this_file = HashSet::new();
    for (name, value) in entries {
        if !in_this_file.insert(name.clone()) {
            return Err(ConfigError::DuplicateName { path: path.to_path_buf(), kind, name });
        }
        into.entry(name).or_insert(value);
    }
    Ok(())
}

/// Turns the selected context into a validated configuration, reading referenced files.
pub(super) fn build(selected: Selected) -> Result<UpstreamConfig, ConfigError> {
    let Selected { files, context_name, namespace, cluster_name, cluster, user_name, user } =
        selected;
    let (c, user_dir) = (&cluster.value, &user.dir);
    let u = &user.value;

    let server = non_empty(&c.server).ok_or_else(|| ConfigError::NoServer(cluster_name.clone()))?;
    if non_empty(&c.proxy_url).is_some() {
        return Err(ConfigError::ProxyUrlUnsupported(cluster_name));
    }
    let ca_pem = data_or_file(
        &c.certificate_authority_data,
        &c.certificate_authority,
        &cluster.dir,
        "certificate-authority-data",
        &cluster_name,
    )?;
    let client_cert = client_cert(u, user_dir, &user_name)?;
    let server_name = non_empty(&c.tls_server_name).map(str::to_owned);
    // client-go's DefaultServerURL: a scheme-less server is https when any TLS setting is set.
    let default_tls = ca_pem.is_some()
        || client_cert.is_some()
        || c.insecure_skip_tls_verify
        || server_name.is_some();
    let server = ServerUrl::parse(server, default_tls)?;
    let tls = TlsConfig {
        ca_pem,
        insecure_skip_tls_verify: c.insecure_skip_tls_verify,
        server_name,
        client_cert,
    };
    let auth = auth(u, user_dir, &user_name, &server, &tls, c)?;
    Ok(UpstreamConfig {
        server,
        tls,
        auth,
        namespace,
        source: ConfigSource::Kubeconfig { files, context: context_name },
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        token_reload_interval: DEFAULT_TOKEN_RELOAD_INTERVAL,
        preferred: Vec::new(),
    })
}

fn client_cert(u: &User, dir: &Path, user: &str) -> Result<Option<ClientCertPem>, ConfigError> {
    let cert = data_or_file(
        &u.client_certificate_data,
        &u.client_certificate,
        dir,
        "client-certificate-data",
        user,
    )?;
    let key = data_or_file(&u.client_key_data, &u.client_key, dir, "client-key-data", user)?;
    match (cert, key) {
        (Some(cert_pem), Some(key_pem)) => Ok(Some(ClientCertPem { cert_pem, key_pem })),
        (Some(_), None) => Err(ConfigError::MissingClientKey(user.to_owned())),
        (None, Some(_)) => Err(ConfigError::MissingClientCert(user.to_owned())),
        (None, None) => Ok(None),
    }
}

/// The header credential, by client-go's precedence: token / tokenFile and basic are exclusive;
/// an exec plugin is used only when no token, basic or client certificate is configured.
fn auth(
    u: &User,
    dir: &Path,
    user: &str,
    server: &ServerUrl,
    tls: &TlsConfig,
    cluster: &Cluster,
) -> Result<AuthConfig, ConfigError> {
    if let Some(provider) = &u.auth_provider {
        return Err(ConfigError::AuthProviderUnsupported {
            user: user.to_owned(),
            provider: provider.name.clone(),
        });
    }
    if non_empty(&u.impersonate).is_some()
        || non_empty(&u.impersonate_uid).is_some()
        || u.impersonate_groups.as_ref().is_some_and(|g| !g.is_empty())
        || u.impersonate_extra.as_ref().is_some_and(|e| !e.is_null())
    {
        return Err(ConfigError::ImpersonationUnsupported(user.to_owned()));
    }
    let token = non_empty(&u.token);
    let token_file = non_empty(&u.token_file).map(|f| dir.join(f));
    let basic = non_empty(&u.username).is_some() || non_empty(&u.password).is_some();
    if (token.is_some() || token_file.is_some()) && basic {
        return Err(ConfigError::TokenAndBasic { user: user.to_owned() });
    }
    // client-go: with both, the file is re-read and wins once read; the inline token is the
    // starting value. Without an inline token the file must be readable now.
    if let Some(path) = token_file {
        let initial = match token {
            Some(token) => token.to_owned(),
            None => std::fs::read(&path)
                .map(|t| String::from_utf8_lossy(&t).trim().to_owned())
                .map_err(|source| ConfigError::Read { path: path.clone(), source })?,
        };
        return Ok(AuthConfig::TokenFile { path, initial });
    }
    if let Some(token) = token {
        return Ok(AuthConfig::Token(token.to_owned()));
    }
    if basic {
        return Ok(AuthConfig::Basic {
            username: u.username.clone().unwrap_or_default(),
            password: u.password.clone().unwrap_or_default(),
        });
    }
    match &u.exec {
        Some(exec) if tls.client_cert.is_none() => {
            exec_config(exec, dir, user, server, tls, cluster).map(AuthConfig::Exec)
        }
        _ => Ok(AuthConfig::None),
    }
}

fn exec_config(
    exec: &Exec,
    dir: &Path,
    user: &str,
    server: &ServerUrl,
    tls: &TlsConfig,
    cluster: &Cluster,
) -> Result<ExecConfig, ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidExec {
        user: user.to_owned(),
        reason: reason.to_owned(),
    };
    if exec.command.is_empty() {
        return Err(invalid("command must be specified"));
    }
    if exec.api_version.is_empty() {
        return Err(invalid("apiVersion must be specified"));
    }
    // kubeplex runs without a terminal: a plugin that insists on one can never succeed.
    if exec.interactive_mode.as_deref() == Some("Always") {
        return Err(invalid(
            "interactiveMode Always needs a terminal, which kubeplex does not have",
        ));
    }
    let env = exec.env.clone().unwrap_or_default();
    if env.iter().any(|e| e.name.is_empty()) {
        return Err(invalid("env variable name must be specified"));
    }
    // client-go resolves the command against the kubeconfig only when it is a path, not a
    // name looked up in $PATH.
    let command = if exec.command.contains('/') {
        dir.join(&exec.command).to_string_lossy().into_owned()
    } else {
        exec.command.clone()
    };
    let cluster_info = exec.provide_cluster_info.then(|| cluster_info(server, tls, cluster));
    Ok(ExecConfig {
        command,
        args: exec.args.clone().unwrap_or_default(),
        env: env.into_iter().map(|e| (e.name, e.value)).collect(),
        api_version: exec.api_version.clone(),
        cluster_info,
    })
}

/// `spec.cluster` of the ExecCredential (client.authentication.k8s.io `Cluster`), with
/// client-go's omitempty fields left out.
fn cluster_info(server: &ServerUrl, tls: &TlsConfig, cluster: &Cluster) -> serde_json::Value {
    let mut info = serde_json::Map::new();
    info.insert("server".into(), server.to_string().into());
    if let Some(name) = &tls.server_name {
        info.insert("tls-server-name".into(), name.clone().into());
    }
    if tls.insecure_skip_tls_verify {
        info.insert("insecure-skip-tls-verify".into(), true.into());
    }
    if let Some(ca) = &tls.ca_pem {
        let b64 = base64::engine::general_purpose::STANDARD.encode(ca);
        info.insert("certificate-authority-data".into(), b64.into());
    }
    let extension = cluster.extensions.iter().flatten().find(|e| e.name == EXEC_EXTENSION);
    if let Some(config) = extension.and_then(|e| e.extension.clone()) {
        info.insert("config".into(), config);
    }
    serde_json::Value::Object(info)
}

/// `*-data` (base64) wins over the file, as client-go's `dataFromSliceOrFile` decides.
fn data_or_file(
    data: &Option<String>,
    file: &Option<String>,
    dir: &Path,
    field: &'static str,
    owner: &str,
) -> Result<Option<Vec<u8>>, ConfigError> {
    if let Some(data) = non_empty(data) {
        // Go's base64 decoding of []byte fields skips line breaks; kubeconfigs wrap long data.
        let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map_err(|_| ConfigError::Base64 { field, owner: owner.to_owned() })?;
        return Ok(Some(bytes));
    }
    match non_empty(file) {
        Some(file) => {
            let path = dir.join(file);
            std::fs::read(&path).map(Some).map_err(|source| ConfigError::Read { path, source })
        }
        None => Ok(None),
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests;
