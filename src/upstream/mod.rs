//! The connection to the upstream kube-apiserver (docs/design.md §3).
//!
//! - [`config`]: where the apiserver is and which credentials to use, resolved like Kubernetes
//!   components do (explicit kubeconfig, in-cluster, `$KUBECONFIG`, `~/.kube/config`);
//! - [`client`]: [`Upstream`], a streaming HTTP client over rustls that multiplexes long
//!   watches on one HTTP/2 connection and keeps credentials current (token file rotation,
//!   exec plugins);
//! - `failover`: which of the upstreams (a pool tier, then the apiserver) requests go to;
//! - [`reflector`]: the list+watch loop toward the upstream for one resource, which yields
//!   what it learns as [`feed::Feed`] events;
//! - [`feed`]: those events, and how the live layer applies them to a cache;
//! - [`metrics`]: the upstream calls and relists, by cache;
//! - [`caches`]: the running caches (state, reflector, sweeper, proofs), started on first use;
//! - [`freshness`]: proving a cache current for consistent reads (a `limit=1` list and a
//!   bookmark probe).

pub mod caches;
mod cert_files;
pub mod client;
pub mod compressed;
pub mod config;
mod credentials;
pub mod disk;
mod exec;
mod failover;
pub mod feed;
pub mod freshness;
mod kubeconfig;
pub mod metrics;
pub mod reflector;
mod resolve;
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
pub use tls::TlsError;
