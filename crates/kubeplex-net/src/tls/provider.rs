//! The one crypto provider kubeplex's TLS uses, the listener's and the upstream client's alike
//! (ring, as the rustls build is configured): built once and shared.

use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;

/// The process's crypto provider for every TLS configuration it builds.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}
