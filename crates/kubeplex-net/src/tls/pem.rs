//! PEM files as Go's `crypto/tls` reads them (`tls.X509KeyPair`, `x509.CertPool.
//! AppendCertsFromPEM`): the one reader of certificates and keys for every TLS configuration
//! kubeplex builds — its listener's, its upstream client's, and its tests'.

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Every certificate of a PEM bundle, in order (a chain, leaf first; or a CA bundle). Blocks of
/// other types are skipped.
pub fn certs(pem: &[u8]) -> std::io::Result<Vec<CertificateDer<'static>>> {
    rustls_pemfile::certs(&mut &pem[..]).collect()
}

/// The first private key of a PEM file: PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or
/// SEC1 (`EC PRIVATE KEY`); `None` when there is none.
pub fn private_key(pem: &[u8]) -> std::io::Result<Option<PrivateKeyDer<'static>>> {
    rustls_pemfile::private_key(&mut &pem[..])
}
