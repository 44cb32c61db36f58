//! client-go credential plugins: run the kubeconfig's `exec` command, read the
//! `ExecCredential` it prints, cache it until `expirationTimestamp`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Deserialize;

use super::config::{ClientCertPem, ExecConfig};

/// What a plugin run produced.
#[derive(Debug)]
pub(super) struct ExecCredentials {
    pub(super) token: Option<String>,
    pub(super) client_cert: Option<Arc<ClientCertPem>>,
    /// `None`: valid until the apiserver answers 401 (client-go's zero expiry).
    pub(super) expires: Option<SystemTime>,
}

/// Why a plugin run gave no credential. Messages follow client-go's where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("exec: executable {0} not found")]
    NotFound(String),
    #[error("exec: running {command}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("exec: executable {command} failed with exit code {code}")]
    Failed { command: String, code: i32 },
    #[error("exec: executable {0} was killed by a signal")]
    Killed(String),
    #[error("decoding stdout: {0}")]
    Decode(String),
    #[error("exec plugin is configured to use API version {configured}, plugin returned version {returned}")]
    Version { configured: String, returned: String },
    #[error("exec plugin didn't return a status field")]
    NoStatus,
    #[error("exec plugin didn't return a token or cert/key pair")]
    Empty,
    #[error("exec plugin returned only certificate or key, not both")]
    HalfPair,
    #[error("exec plugin returned an invalid expirationTimestamp {0:?}")]
    Expiry(String),
}

#[derive(Deserialize)]
struct ExecCredential {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    expiration_timestamp: Option<String>,
    token: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

/// A plugin with its cached credential. The lock is held while the plugin runs, so concurrent
/// requests wait for one run instead of starting one each.
pub(super) struct ExecAuth {
    config: ExecConfig,
    cached: tokio::sync::Mutex<Option<Arc<ExecCredentials>>>,
}

impl ExecAuth {
    pub(super) fn new(config: ExecConfig) -> Self {
        Self { config, cached: tokio::sync::Mutex::new(None) }
    }

    /// The cached credential, or a fresh one when there is none or it has expired.
    pub(super) async fn get(&self) -> Result<Arc<ExecCredentials>, ExecError> {
        let mut cached = self.cached.lock().await;
        if let Some(creds) = cached.as_ref() {
            if creds.expires.is_none_or(|exp| SystemTime::now() <= exp) {
                return Ok(creds.clone());
            }
        }
        let fresh = Arc::new(run(&self.config).await?);
        tracing::info!(command = %self.config.command, "exec credential plugin returned a credential");
        *cached = Some(fresh.clone());
        Ok(fresh)
    }

    /// The apiserver refused `used` (401): like client-go, drop it so the next request runs the
    /// plugin again, unless another request already replaced it.
    pub(super) async fn invalidate(&self, used: &Arc<ExecCredentials>) {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|c| Arc::ptr_eq(c, used)) {
            *cached = None;
        }
    }
}

/// Runs the plugin once: kubeplex's environment plus the configured one, and
/// `KUBERNETES_EXEC_INFO` holding the request `ExecCredential`. stdin is closed (kubeplex is
/// never interactive); stderr goes to kubeplex's stderr, as in client-go.
pub(super) async fn run(config: &ExecConfig) -> Result<ExecCredentials, ExecError> {
    let mut spec = serde_json::Map::new();
    if let Some(cluster) = &config.cluster_info {
        spec.insert("cluster".into(), cluster.clone());
    }
    spec.insert("interactive".into(), false.into());
    let info = serde_json::json!({
        "kind": "ExecCredential",
        "apiVersion": config.api_version,
        "spec": spec,
    });
    let output = tokio::process::Command::new(&config.command)
        .args(&config.args)
        .envs(config.env.iter().map(|(k, v)| (k, v)))
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => ExecError::NotFound(config.command.clone()),
            _ => ExecError::Spawn { command: config.command.clone(), source },
        })?;
    if !output.status.success() {
        return Err(match output.status.code() {
            Some(code) => ExecError::Failed { command: config.command.clone(), code },
            None => ExecError::Killed(config.command.clone()),
        });
    }
    parse(&output.stdout, &config.api_version)
}

/// Checks a plugin's stdout the way client-go's `refreshCredsLocked` does.
fn parse(stdout: &[u8], api_version: &str) -> Result<ExecCredentials, ExecError> {
    let cred: ExecCredential =
        serde_json::from_slice(stdout).map_err(|err| ExecError::Decode(err.to_string()))?;
    if cred.kind != "ExecCredential" {
        return Err(ExecError::Decode(format!("kind {:?} is not ExecCredential", cred.kind)));
    }
    if cred.api_version != api_version {
        return Err(ExecError::Version {
            configured: api_version.to_owned(),
            returned: cred.api_version,
        });
    }
    let status = cred.status.ok_or(ExecError::NoStatus)?;
    let token = status.token.filter(|t| !t.is_empty());
    let cert = status.client_certificate_data.filter(|c| !c.is_empty());
    let key = status.client_key_data.filter(|k| !k.is_empty());
    let client_cert = match (cert, key) {
        (Some(cert), Some(key)) => {
            Some(Arc::new(ClientCertPem { cert_pem: cert.into_bytes(), key_pem: key.into_bytes() }))
        }
        (None, None) if token.is_none() => return Err(ExecError::Empty),
        (None, None) => None,
        _ => return Err(ExecError::HalfPair),
    };
    let expires = match status.expiration_timestamp.filter(|t| !t.is_empty()) {
        Some(ts) => Some(
            chrono::DateTime::parse_from_rfc3339(&ts)
                .map(SystemTime::from)
                .map_err(|_| ExecError::Expiry(ts))?,
        ),
        None => None,
    };
    Ok(ExecCredentials { token, client_cert, expires })
}

#[cfg(test)]
mod tests;
