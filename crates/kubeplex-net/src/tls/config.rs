//! The TLS listener's settings, and why its files cannot be used.

use std::path::PathBuf;
use std::time::Duration;

/// How often the files are looked at for changes, at most (a stat of each, no read).
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);
/// How long a client has to complete the TLS handshake: a client that connects and says
/// nothing must not hold a task forever.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS listener's configuration (kube-apiserver's flags of the same names).
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// `--tls-cert-file`: the serving certificate chain, PEM, leaf first.
    pub cert_file: PathBuf,
    /// `--tls-private-key-file`: its key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// `--client-ca-file`: the CAs client certificates are verified against, PEM, one or
    /// more. Without it no client certificate is asked for.
    pub client_ca_file: Option<PathBuf>,
    /// The files are checked for changes at most this often.
    pub reload_interval: Duration,
    /// A handshake not done within this ends its connection.
    pub handshake_timeout: Duration,
}

impl TlsConfig {
    /// A certificate and key, no client certificates, the default intervals.
    pub fn new(cert_file: impl Into<PathBuf>, key_file: impl Into<PathBuf>) -> Self {
        Self {
            cert_file: cert_file.into(),
            key_file: key_file.into(),
            client_ca_file: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// Asks clients for certificates issued by the CAs of `client_ca_file`.
    pub fn with_client_ca(mut self, client_ca_file: impl Into<PathBuf>) -> Self {
        self.client_ca_file = Some(client_ca_file.into());
        self
    }
}

/// Why the TLS files cannot be used; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: invalid PEM: {source}", path.display())]
    Pem { path: PathBuf, source: std::io::Error },
    #[error("{}: no PEM certificate", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{}: no PEM private key", path.display())]
    NoKey { path: PathBuf },
    #[error("{}: bad client CA certificate: {source}", path.display())]
    ClientCa { path: PathBuf, source: rustls::Error },
    #[error("{}: client CA bundle unusable: {source}", path.display())]
    Verifier { path: PathBuf, source: rustls::server::VerifierBuilderError },
    #[error("certificate {} and key {}: {source}", cert.display(), key.display())]
    KeyPair { cert: PathBuf, key: PathBuf, source: rustls::Error },
    #[error("tls protocol versions: {0}")]
    Provider(#[source] rustls::Error),
}
