//! The helpers kubeplex's integration tests share (`tests/*/`, as
//! `use kubeplex_test_support as support;`): everything of `kubeplex-test-client` (a raw HTTP/1.1
//! client over loopback, watch stream readers with timeouts, the captured kube-apiserver fixtures);
//! [`stack`]: the fake apiserver with kubeplex in front of it; [`watchers`]: churn, faults and a
//! checking informer for the watch tests; [`kubectl`]: the real kubectl against a kubeconfig.
//!
//! A crate rather than a `mod support;` in every test: compiled once, not once per test binary.
#![forbid(unsafe_code)]

pub mod informer_check;
pub mod kubectl;
pub mod node;
pub mod shapes;
pub mod stack;
pub mod tls;
pub mod watchers;

pub use kubeplex_test_client::*;

/// A directory removed, with everything in it, when dropped: the one test helper for files on
/// disk (kubeplex-net's `scratch`), shared by the integration tests and the `kubeplex` crate's
/// unit tests.
pub use kubeplex_net::scratch::TempDir;
