//! Client certificates the way kube-apiserver takes them: asked for in the handshake but not
//! verified there (`secure_serving.go`: `ClientAuth = tls.RequestClientCert`, "don't reject
//! connections without certificates … certificates to be validated by authenticators"), then
//! verified against the current client-CA bundle for every request by the x509 authenticator
//! (`request/x509`: `AuthenticateRequest`). A certificate that fails is an authentication error
//! (401 unless a bearer token authenticates), not a refused handshake, so a client with a stale
//! certificate and a good token is served as the apiserver serves it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Extensions;
use rustls::pki_types::{CertificateDer, UnixTime};

use super::reload::Reloader;
use crate::identity::{self, ClientCert, RejectedClientCert};

/// The client certificate of one TLS connection, checked for each of its requests.
pub struct Peer {
    reloader: Arc<Reloader>,
    /// The presented chain, leaf first; `None` when the client sent no certificate.
    chain: Option<Box<[CertificateDer<'static>]>>,
    /// The last successful verification, reused while the client-CA bundle is the same and
    /// every certificate of the chain is still valid: a verification costs a signature check
    /// per chain link, and an HTTP/2 connection carries many requests.
    verified: Mutex<Option<Verified>>,
}

struct Verified {
    generation: u64,
    until: SystemTime,
    user: Option<ClientCert>,
}

impl Peer {
    pub(crate) fn new(reloader: Arc<Reloader>, chain: Option<&[CertificateDer<'_>]>) -> Self {
        let chain = chain
            .filter(|c| !c.is_empty())
            .map(|c| c.iter().map(|c| c.clone().into_owned()).collect());
        Self { reloader, chain, verified: Mutex::new(None) }
    }

    /// Whether the client presented a certificate (verified or not).
    pub fn presented_certificate(&self) -> bool {
        self.chain.is_some()
    }

    /// Puts what the client certificate says into a request's extensions: a [`ClientCert`]
    /// when it verifies against the current client-CA bundle now and names a user, a
    /// [`RejectedClientCert`] when it does not verify, nothing when there is no certificate or
    /// a verified one without a common name (the apiserver then tries other authenticators).
    pub fn annotate(&self, extensions: &mut Extensions) {
        match self.identify() {
            Some(Ok(user)) => {
                extensions.insert(user);
            }
            Some(Err(rejected)) => {
                extensions.insert(rejected);
            }
            None => {}
        }
    }

    /// The outcome of the x509 authenticator for a request made now.
    pub fn identify(&self) -> Option<Result<ClientCert, RejectedClientCert>> {
        let chain = self.chain.as_deref()?;
        let loaded = self.reloader.current();
        let now = SystemTime::now();
        let mut cached = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = cached.as_ref() {
            if v.generation == loaded.generation && now < v.until {
                return v.user.clone().map(Ok);
            }
        }
        *cached = None;
        let Some(verifier) = loaded.verifier.as_ref() else {
            // No client CA configured (the apiserver: "intentionally no CA bundle contents,
            // then we cannot authenticate this request"); not reached, as no certificate is
            // asked for then.
            return None;
        };
        let unix_now =
            UnixTime::since_unix_epoch(now.duration_since(UNIX_EPOCH).unwrap_or_default());
        if let Err(e) = verifier.verify_client_cert(&chain[0], &chain[1..], unix_now) {
            return Some(Err(RejectedClientCert { reason: format!("verifying certificate: {e}") }));
        }
        match identity::from_leaf(&chain[0]) {
            Err(reason) => Some(Err(RejectedClientCert { reason })),
            Ok(user) => {
                *cached = Some(Verified {
                    generation: loaded.generation,
                    until: until(chain),
                    user: user.clone(),
                });
                user.map(Ok)
            }
        }
    }
}

/// The earliest `notAfter` of the presented chain: past it the chain no longer verifies.
fn until(chain: &[CertificateDer<'_>]) -> SystemTime {
    chain
        .iter()
        .filter_map(|c| x509_parser::parse_x509_certificate(c).ok())
        .map(|(_, c)| c.validity().not_after.timestamp())
        .min()
        .and_then(|secs| u64::try_from(secs).ok())
        .map_or(UNIX_EPOCH, |secs| UNIX_EPOCH + Duration::from_secs(secs))
}
