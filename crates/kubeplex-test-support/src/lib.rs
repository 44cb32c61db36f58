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

use std::path::PathBuf;

/// A directory removed, with everything in it, when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `kubeplex-NAME-PID` in the system's temporary directory, emptied first.
    pub fn fresh(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("kubeplex-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
