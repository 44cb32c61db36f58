//! A client certificate and key read from files and read again when they change: a pool tier's
//! client certificate that cert-manager renews into a Secret, which the kubelet swaps in the
//! pod's volume. Connections made after a change present the new certificate; those open
//! finish with the old one (`Endpoint::own_pools`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kubeplex_net::FileStamp;

use super::config::{CertFiles, ClientCertPem};

/// How often the files' modification times are looked at (a stat each, on a request).
const CHECK_EVERY: Duration = Duration::from_secs(10);

/// Why the certificate files could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading the client certificate {path}: {source}")]
pub struct CertFileError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

pub(super) struct ReloadingCert {
    files: CertFiles,
    state: Mutex<State>,
}

struct State {
    cert: Arc<ClientCertPem>,
    modified: (Option<FileStamp>, Option<FileStamp>),
    checked: Instant,
}

impl ReloadingCert {
    /// Reads the files; an error here stops start-up.
    pub(super) fn new(files: CertFiles) -> Result<Self, CertFileError> {
        let modified = modified(&files);
        let cert = Arc::new(read(&files)?);
        let state = Mutex::new(State { cert, modified, checked: Instant::now() });
        Ok(ReloadingCert { files, state })
    }

    /// The certificate to present now: read again if the files changed since the last look
    /// (at most every [`CHECK_EVERY`]). A change that cannot be read (a half-written pair)
    /// keeps the last one, and is tried again at the next look.
    pub(super) fn current(&self) -> Arc<ClientCertPem> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.checked.elapsed() >= CHECK_EVERY {
            state.checked = Instant::now();
            let now = modified(&self.files);
            if now != state.modified {
                match read(&self.files) {
                    Ok(cert) => {
                        tracing::info!(cert = %self.files.cert.display(), "client certificate for the upstreams changed; new connections present it");
                        state.cert = Arc::new(cert);
                        state.modified = now;
                    }
                    Err(e) => tracing::warn!(error = %e, "keeping the last client certificate"),
                }
            }
        }
        state.cert.clone()
    }
}

fn modified(files: &CertFiles) -> (Option<FileStamp>, Option<FileStamp>) {
    (FileStamp::of(&files.cert), FileStamp::of(&files.key))
}

fn read(files: &CertFiles) -> Result<ClientCertPem, CertFileError> {
    let read = |path: &PathBuf| {
        std::fs::read(path).map_err(|source| CertFileError { path: path.clone(), source })
    };
    Ok(ClientCertPem { cert_pem: read(&files.cert)?, key_pem: read(&files.key)? })
}

#[cfg(test)]
mod tests;
