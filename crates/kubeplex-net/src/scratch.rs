//! A throwaway PKI and scratch directories, for tests and the load tool; never part of the
//! proxy (the kubeplex binary does not enable this feature). Compiled for this crate's own
//! tests and with the `scratch` feature, which kubeplex-test-support and kubeplex-bench enable.
//!
//! [`Pki`] is a certificate authority as a cluster's is (it signs serving certificates and
//! client certificates whose CN and O are the user and groups, as the apiserver's x509
//! authenticator reads them); [`TempDir`] is a directory removed with everything in it when
//! dropped. Their functions panic on failure (rcgen refusing a certificate, a file that cannot
//! be written), as a test does: what they make is fixed by the caller, so a failure is a bug or
//! a broken machine, not an answer to handle.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;

/// A directory removed, with everything in it, when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `kubeplex-NAME-PID-N` in the system's temporary directory (N counts the calls, so each is
    /// a directory of its own), emptied first.
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kubeplex-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `contents` to `name` in it (creating parent dirs) and returns the full path: in
    /// place, truncating an existing file, as a careless tool does (see [`TempDir::replace`]).
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::fs::write(&path, contents).expect("write file");
        path
    }

    /// Writes `contents` beside `name` and renames it over, as the kubelet and other atomic
    /// writers do: a reader sees the old file or the new one, never a part.
    pub fn replace(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        let file_name = path.file_name().expect("a file name").to_string_lossy();
        let tmp = path.with_file_name(format!(".{file_name}.tmp"));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::fs::write(&tmp, contents).expect("write file");
        std::fs::rename(&tmp, &path).expect("rename over");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A certificate authority and what it signs. Its name is its certificate's CN: CAs that must
/// not trust each other's certificates need names of their own, so that a certificate of the
/// other has an unknown issuer rather than a known issuer with a bad signature.
pub struct Pki {
    ca: Issuer<'static, KeyPair>,
    /// The CA's certificate, PEM.
    pub ca_pem: String,
}

/// A certificate and its key, PEM, and the certificate's DER.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Pki {
    /// A new self-signed CA, CN `name`.
    pub fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().expect("key");
        let ca_pem = params.self_signed(&key).expect("ca certificate").pem();
        Pki { ca: Issuer::new(params, key), ca_pem }
    }

    /// An existing CA (a real test cluster's, whose apiserver trusts it for client
    /// certificates): its certificate and its PKCS#8 private key, PEM. `None` if either does
    /// not parse or the key is of a kind rcgen cannot sign with.
    pub fn from_pem(ca_cert_pem: &str, ca_key_pem: &str) -> Option<Pki> {
        let key = KeyPair::from_pem(ca_key_pem).ok()?;
        let ca = Issuer::from_ca_cert_pem(ca_cert_pem, key).ok()?;
        Some(Pki { ca, ca_pem: ca_cert_pem.to_string() })
    }

    /// A serving certificate for the loopback addresses (127.0.0.1 and localhost).
    pub fn server(&self) -> Issued {
        self.server_for(&["127.0.0.1", "localhost"])
    }

    /// A serving certificate for `names` (DNS names and IP addresses), with a new key.
    pub fn server_for(&self, names: &[&str]) -> Issued {
        self.server_with_key(names, KeyPair::generate().expect("key"))
    }

    /// A serving certificate for `names` and the given `key`.
    pub fn server_with_key(&self, names: &[&str], key: KeyPair) -> Issued {
        let names = names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).expect("server params");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params, key)
    }

    /// A client certificate: user = `cn`, groups = `orgs` (the apiserver's x509 mapping). An
    /// empty `cn` leaves the CN out; at most two `orgs`.
    pub fn client(&self, cn: &str, orgs: &[&str]) -> Issued {
        self.client_with(cn, orgs, |_| {})
    }

    /// Like [`Pki::client`], with `tweak` applied to the parameters before signing (validity,
    /// key usages).
    pub fn client_with(
        &self,
        cn: &str,
        orgs: &[&str],
        tweak: impl FnOnce(&mut CertificateParams),
    ) -> Issued {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name = DistinguishedName::new();
        if !cn.is_empty() {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        // rcgen keeps one value per attribute type; the second O goes in under its OID
        // spelled as a custom type (the same 2.5.4.10 in the certificate). A third would
        // replace the second, so there is none.
        assert!(orgs.len() <= 2, "at most two organizations");
        let org_types = [DnType::OrganizationName, DnType::CustomDnType(vec![2, 5, 4, 10])];
        for (o, ty) in orgs.iter().zip(org_types) {
            params.distinguished_name.push(ty, *o);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        tweak(&mut params);
        self.sign(params, KeyPair::generate().expect("key"))
    }

    fn sign(&self, params: CertificateParams, key: KeyPair) -> Issued {
        let cert = params.signed_by(&key, &self.ca).expect("sign certificate");
        Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem(), der: cert.der().clone() }
    }
}

impl Issued {
    /// Writes `NAME.crt` and `NAME.key` into `dir`; their paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        self.try_write(dir, name).expect("write certificate and key")
    }

    /// [`Issued::write`], with the error returned (for the load tool, whose directory is the
    /// user's).
    pub fn try_write(&self, dir: &Path, name: &str) -> std::io::Result<(PathBuf, PathBuf)> {
        let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
        std::fs::write(&cert, &self.cert_pem)?;
        std::fs::write(&key, &self.key_pem)?;
        Ok((cert, key))
    }
}

#[cfg(test)]
mod tests;
