//! The connection to the upstream kube-apiserver (docs/design.md §3).
//!
//! - [`config`]: where the apiserver is and which credentials to use, resolved like Kubernetes
//!   components do (explicit kubeconfig, in-cluster, `$KUBECONFIG`, `~/.kube/config`);
//! - [`client`]: [`Upstream`], a streaming HTTP client over rustls that multiplexes long
//!   watches on one HTTP/2 connection and keeps credentials current (token file rotation,
//!   exec plugins);
//! - `failover`: which of the upstreams (a pool tier, then the apiserver) requests go to;
//! - [`compressed`]: reading an answer's body whatever its content encoding.
//!
//! What runs over it — the caches' list+watch loops, the proofs of their freshness — is the
//! live layer (`crate::live`), which depends on this one and never the reverse.

mod cert_files;
pub mod client;
pub mod compressed;
pub mod config;
mod credentials;
mod exec;
mod failover;
mod kubeconfig;
mod resolve;
pub mod streams;
mod tls;

#[cfg(test)]
pub(crate) mod testing;

pub use cert_files::CertFileError;
pub use client::{ClientError, ServedBy, Upstream, UpstreamBody};
pub use config::{
    AuthConfig, CertFiles, ClientCertPem, ConfigError, ConfigSource, Environment, ExecConfig,
    InClusterEnv, PreferredServer, ServerUrl, TlsConfig, UpstreamConfig,
};
pub use credentials::AuthError;
pub use exec::ExecError;
pub use streams::ResponseBody;
pub use tls::TlsError;
