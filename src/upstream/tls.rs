//! The rustls client configuration for the upstream connection.
//!
//! The crypto provider (ring) is passed explicitly with `builder_with_provider`: a library must
//! not depend on, or install, a process-wide default provider.

use std::sync::Arc;

use kubeplex_net::tls::pem;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::config::{ClientCertPem, TlsConfig};

/// Why the TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(
        "https server {0} has no certificate-authority and insecure-skip-tls-verify is not set; \
         kubeplex trusts only a configured CA"
    )]
    NoCa(String),
    // client-go's message for the same conflict.
    #[error("specifying a root certificates file with the insecure flag is not allowed")]
    CaWithInsecure,
    #[error("invalid certificate-authority PEM: {0}")]
    CaPem(#[source] std::io::Error),
    #[error("no usable certificate in the certificate-authority PEM")]
    NoCaCert,
    #[error("invalid client certificate PEM: {0}")]
    ClientCertPem(#[source] std::io::Error),
    #[error("no certificate in the client certificate PEM")]
    NoClientCert,
    #[error("invalid client key PEM: {0}")]
    ClientKeyPem(#[source] std::io::Error),
    #[error("no private key in the client key PEM")]
    NoClientKey,
    #[error("client certificate and key rejected: {0}")]
    ClientAuth(#[source] rustls::Error),
    #[error("invalid tls-server-name {0:?}")]
    ServerName(String),
    #[error("tls protocol versions: {0}")]
    Versions(#[source] rustls::Error),
}

/// The one crypto provider kubeplex's TLS uses, shared with the listener's (`kubeplex-net`).
pub(super) fn provider() -> Arc<CryptoProvider> {
    kubeplex_net::tls::provider()
}

/// Builds the client config: trust only the configured CA (or nothing, when insecure), present
/// `identity` if any. ALPN is left to hyper-rustls. `server` names the upstream in errors; a
/// plain http upstream needs no CA, since the config is never used.
pub(super) fn client_config(
    tls: &TlsConfig,
    https: bool,
    server: &str,
    identity: Option<&ClientCertPem>,
) -> Result<ClientConfig, TlsError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Versions)?;
    let builder = match (&tls.ca_pem, tls.insecure_skip_tls_verify) {
        (Some(_), true) => return Err(TlsError::CaWithInsecure),
        (None, true) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(provider))),
        (Some(ca), false) => builder.with_root_certificates(roots(ca)?),
        (None, false) if https => return Err(TlsError::NoCa(server.to_owned())),
        (None, false) => builder.with_root_certificates(RootCertStore::empty()),
    };
    let config = match identity {
        Some(identity) => {
            let (certs, key) = client_identity(identity)?;
            builder.with_client_auth_cert(certs, key).map_err(TlsError::ClientAuth)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(config)
}

/// The name the server certificate is checked against, when `tls-server-name` overrides the
/// URL's host.
pub(super) fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    ServerName::try_from(bare.to_owned()).map_err(|_| TlsError::ServerName(name.to_owned()))
}

fn roots(ca_pem: &[u8]) -> Result<RootCertStore, TlsError> {
    let certs = pem::certs(ca_pem).map_err(TlsError::CaPem)?;
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsError::NoCaCert);
    }
    Ok(roots)
}

type Identity = (Vec<CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>);

fn client_identity(identity: &ClientCertPem) -> Result<Identity, TlsError> {
    let certs = pem::certs(&identity.cert_pem).map_err(TlsError::ClientCertPem)?;
    if certs.is_empty() {
        return Err(TlsError::NoClientCert);
    }
    let key = pem::private_key(&identity.key_pem)
        .map_err(TlsError::ClientKeyPem)?
        .ok_or(TlsError::NoClientKey)?;
    Ok((certs, key))
}

/// `insecure-skip-tls-verify`: any certificate is accepted, but the handshake signatures are
/// still checked so the session is at least bound to the presented key.
#[derive(Debug)]
struct AcceptAnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
