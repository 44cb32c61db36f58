//! kubeplex: a caching proxy and watch multiplexer for the Kubernetes API server.
//!
//! The tree is the architecture:
//! - [`wire`]: the Kubernetes wire formats and rules shared by everything (request parsing,
//!   selectors, continue tokens, Status errors, encoders and watch framing);
//! - [`sim`]: a fake kube-apiserver, faithful on the wire, for tests and the demo.
//!
//! - [`upstream`]: talks to the apiserver (credentials, TLS, HTTP/2) and runs the reflectors;
//! - [`cache`]: owns state — per resource and encoding, the objects' upstream bytes, snapshots;
//! - [`serve`]: answers clients — from the cache where exact, by passthrough otherwise.
#![forbid(unsafe_code)]

pub mod auth;
pub mod cache;
pub mod net;
pub mod serve;
pub mod upstream;
/// The fake apiserver: the `kubeplex-sim` crate (`crates/kubeplex-sim`), with the `sim` feature.
#[cfg(feature = "sim")]
pub use kubeplex_sim as sim;
/// The wire formats and rules: the `kubeplex-wire` crate (`crates/kubeplex-wire`).
pub use kubeplex_wire as wire;
