//! The clients' kubeconfigs. Their certificates are issued by the run's cluster CA, kubeplex-net's
//! throwaway PKI (`kubeplex_net::scratch::Pki`): kubeplex's serving certificate (for 127.0.0.1)
//! and each kubelet's client certificate (CN `system:node:NAME`, O `system:nodes`, as the
//! apiserver's x509 authenticator reads it).

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine as _;
use kubeplex_net::scratch::Issued;
use serde_json::{json, Value};

/// A kubeconfig `user` entry presenting `cert`.
pub fn cert_user(cert: &Issued) -> Value {
    json!({"client-certificate-data": b64(&cert.cert_pem), "client-key-data": b64(&cert.key_pem)})
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A kubeconfig `user` entry with a bearer token.
pub fn token_user(token: &str) -> Value {
    json!({"token": token})
}

/// Writes a one-context kubeconfig for `server` (trusting `ca_pem` when it is https) with
/// `user`; its path.
pub fn write_kubeconfig(
    dir: &Path,
    name: &str,
    server: &str,
    ca_pem: Option<&str>,
    user: Value,
) -> anyhow::Result<PathBuf> {
    let mut cluster = json!({"server": server});
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] = json!(b64(ca));
    }
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    });
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
