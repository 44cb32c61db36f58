//! The serving certificate, key and client-CA bundle, loaded from files and loaded again when
//! they change on disk (cert-manager, the kubelet's rotation, a Secret volume's symlink swap),
//! like kube-apiserver's `dynamiccertificates` file controllers: new handshakes get the new
//! files, established connections keep what they negotiated, a bad rewrite keeps the last good
//! configuration.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, TryLockError};
use std::time::Instant;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::config::{TlsConfig, TlsError};
use super::request_cert::RequestClientCert;
use crate::files::FileStamp;

/// What the apiserver offers by ALPN (`secure_serving.go`: `NextProtos: h2, http/1.1`):
/// HTTP/2 to a client that offers it, HTTP/1.1 otherwise.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// One loaded configuration: what a handshake uses, and what a request's client certificate is
/// verified against.
pub(crate) struct Loaded {
    pub(crate) server: Arc<ServerConfig>,
    /// The client-CA verifier (chain, validity, client-auth usage); `None` without a client-CA
    /// file, when no certificate is asked for.
    pub(crate) verifier: Option<Arc<dyn ClientCertVerifier>>,
    /// Bumped by every successful reload, so a connection knows its verification is stale.
    pub(crate) generation: u64,
}

/// The files' identity as last seen: a change in any of them means "load again".
type Stamps = Vec<Option<FileStamp>>;

/// The current configuration and the bookkeeping of the periodic check.
pub(crate) struct Reloader {
    files: Vec<PathBuf>,
    config: TlsConfig,
    current: RwLock<Arc<Loaded>>,
    check: Mutex<Check>,
}

struct Check {
    /// No stat before this: the files are looked at every `reload_interval` at most, not on
    /// every handshake.
    next: Instant,
    /// The stamps of the files `current` was loaded from.
    loaded: Stamps,
    /// The stamps of a failed load already warned about: one warning per bad state, retried
    /// at every check until the files load.
    warned: Option<Stamps>,
    generation: u64,
}

impl Reloader {
    /// Loads the files once; any that is missing or bad is an error naming it.
    pub(crate) fn new(config: TlsConfig) -> Result<Self, TlsError> {
        let mut files = vec![config.cert_file.clone(), config.key_file.clone()];
        files.extend(config.client_ca_file.clone());
        // Stamped before reading, so a write racing the read is seen at the next check.
        let stamps = stamps(&files);
        let loaded = load(&config, 0)?;
        Ok(Self {
            files,
            current: RwLock::new(Arc::new(loaded)),
            check: Mutex::new(Check {
                next: Instant::now() + config.reload_interval,
                loaded: stamps,
                warned: None,
                generation: 0,
            }),
            config,
        })
    }

    /// The configuration to use now, after loading the files again if the check is due and
    /// they changed.
    pub(crate) fn current(&self) -> Arc<Loaded> {
        self.maybe_reload();
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn maybe_reload(&self) {
        // One task checks; the others go on with the current configuration rather than wait
        // on file I/O.
        let mut check = match self.check.try_lock() {
            Ok(check) => check,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        let now = Instant::now();
        if now < check.next {
            return;
        }
        check.next = now + self.config.reload_interval;
        let seen = stamps(&self.files);
        if seen == check.loaded {
            return;
        }
        match load(&self.config, check.generation + 1) {
            Ok(loaded) => {
                check.generation += 1;
                check.loaded = seen;
                check.warned = None;
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(loaded);
                tracing::info!(cert = %self.config.cert_file.display(), "reloaded the TLS certificates");
            }
            Err(error) => {
                // A half-written file or a key not yet matching its new certificate: keep
                // serving with the previous files, say so once, try again next check.
                if check.warned.as_ref() != Some(&seen) {
                    tracing::warn!(%error, "keeping the previous TLS certificates");
                    check.warned = Some(seen);
                }
            }
        }
    }
}

fn stamps(files: &[PathBuf]) -> Stamps {
    files.iter().map(|f| FileStamp::of(f)).collect()
}

/// Reads and checks every file and builds the server configuration.
fn load(config: &TlsConfig, generation: u64) -> Result<Loaded, TlsError> {
    let provider = super::provider::provider();
    let chain = read_certs(&config.cert_file)?;
    let key = read_key(&config.key_file)?;
    let verifier = match &config.client_ca_file {
        None => None,
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certs(path)? {
                roots
                    .add(cert)
                    .map_err(|source| TlsError::ClientCa { path: path.clone(), source })?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    // Requested, never required: a client without a certificate goes on to
                    // token or anonymous authentication (the apiserver's --client-ca-file).
                    .allow_unauthenticated()
                    .build()
                    .map_err(|source| TlsError::Verifier { path: path.clone(), source })?;
            Some(verifier)
        }
    };
    let builder = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Provider)?;
    let builder = match &verifier {
        Some(v) => builder.with_client_cert_verifier(Arc::new(RequestClientCert::new(v.clone()))),
        None => builder.with_no_client_auth(),
    };
    // Fails when the key is not the certificate's: a rotation caught between its two writes.
    let mut server = builder.with_single_cert(chain, key).map_err(|source| TlsError::KeyPair {
        cert: config.cert_file.clone(),
        key: config.key_file.clone(),
        source,
    })?;
    server.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Loaded { server: Arc::new(server), verifier, generation })
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source })
}

/// Every certificate of a PEM bundle, in order (a chain, leaf first; or a CA bundle).
fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = super::pem::certs(&pem)
        .map_err(|source| TlsError::Pem { path: path.to_owned(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(certs)
}

/// The first private key of a PEM file: PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or
/// SEC1 (`EC PRIVATE KEY`), like Go's `tls.X509KeyPair`.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    super::pem::private_key(&pem)
        .map_err(|source| TlsError::Pem { path: path.to_owned(), source })?
        .ok_or_else(|| TlsError::NoKey { path: path.to_owned() })
}
