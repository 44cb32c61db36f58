//! The node tier's certificates and the clients' kubeconfigs: a throwaway cluster CA that
//! signs kubeplex's serving certificate (for 127.0.0.1) and each kubelet's client certificate
//! (CN `system:node:NAME`, O `system:nodes`, as the apiserver's x509 authenticator reads it).

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::{json, Value};

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
    pub ca_pem: String,
}

impl Pki {
    pub fn new() -> anyhow::Result<Pki> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "kubeplex-bench-cluster-ca");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let ca_pem = ca.pem();
        Ok(Pki { ca, ca_pem })
    }

    /// kubeplex's serving certificate: the node's loopback addresses.
    pub fn server(&self) -> anyhow::Result<Issued> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.ca)?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// A client certificate: user `cn`, group `org`.
    pub fn client(&self, cn: &str, org: &str) -> anyhow::Result<Issued> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.distinguished_name.push(DnType::OrganizationName, org);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.ca)?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

impl Issued {
    /// Writes `NAME.crt` and `NAME.key` into `dir`; their paths.
    pub fn write(&self, dir: &Path, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
        std::fs::write(&cert, &self.cert_pem)?;
        std::fs::write(&key, &self.key_pem)?;
        Ok((cert, key))
    }

    /// A kubeconfig `user` entry presenting this certificate.
    pub fn user(&self) -> Value {
        json!({"client-certificate-data": b64(&self.cert_pem), "client-key-data": b64(&self.key_pem)})
    }
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
