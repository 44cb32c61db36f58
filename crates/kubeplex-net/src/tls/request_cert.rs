//! The handshake's side of client certificates: asked for, the client's key proven, the chain
//! left for the x509 authenticator ([`super::verify`]).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// The handshake's verifier: asks for a certificate (naming the client CAs), proves the client
/// holds its key (the CertificateVerify signature, checked by the webpki verifier), and leaves
/// the chain to [`super::verify::Peer::annotate`].
#[derive(Debug)]
pub(crate) struct RequestClientCert(Arc<dyn ClientCertVerifier>);

impl RequestClientCert {
    pub(crate) fn new(webpki: Arc<dyn ClientCertVerifier>) -> Self {
        Self(webpki)
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    /// Accepts the chain for the handshake only: no identity is ever derived from it until
    /// [`super::verify::Peer::annotate`] has verified it with the webpki verifier (Go's `RequestClientCert`
    /// followed by the x509 authenticator).
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
