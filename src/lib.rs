//! kubeplex: a caching proxy and watch multiplexer for the Kubernetes API server.
//!
//! The tree is the architecture:
//! - [`wire`]: the Kubernetes wire formats and rules shared by everything (request parsing,
//!   selectors, continue tokens, Status errors, encoders and watch framing);
//! - [`cache`]: owns state — per resource and encoding, the objects' upstream bytes, snapshots;
//! - [`upstream`]: the connection to the apiserver (where it is, credentials, TLS, HTTP/2,
//!   failover between upstreams);
//! - [`live`]: the live caches over that connection — their reflectors (list+watch), the
//!   proofs of their freshness, their states on disk;
//! - [`auth`]: node mode's identity layer — who a client is, what it may read from the cache;
//! - [`serve`]: answers clients — from the cache where exact, by passthrough otherwise;
//! - [`net`]: the client listener's lean HTTP/1.1 server.
//!
//! The fake kube-apiserver the tests and the demo run against is a crate of its own
//! (`kubeplex-sim`), which this library neither depends on nor re-exports: only the `kubeplex`
//! binary's `sim` and `demo` commands take it in, with the default `sim` feature.
#![forbid(unsafe_code)]

pub mod auth;
pub mod cache;
pub mod live;
pub mod net;
pub mod serve;
pub mod upstream;
/// The wire formats and rules: the `kubeplex-wire` crate (`crates/kubeplex-wire`).
pub use kubeplex_wire as wire;
