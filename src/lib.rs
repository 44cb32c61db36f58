//! kubeplex: a caching proxy and watch multiplexer for the Kubernetes API server.
//!
//! The tree is the architecture:
//! - [`wire`]: the Kubernetes wire formats and rules shared by everything (request parsing,
//!   selectors, continue tokens, Status errors, encoders and watch framing);
//! - [`sim`]: a fake kube-apiserver, faithful on the wire, for tests and the demo.
//!
//! The proxy itself (`upstream`, `cache`, `serve`) is built on these.
#![forbid(unsafe_code)]

pub mod sim;
pub mod wire;
