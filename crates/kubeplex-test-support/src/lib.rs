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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory removed, with everything in it, when dropped: the one test helper for files on
/// disk, shared by the integration tests and the `kubeplex` crate's unit tests.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `kubeplex-NAME-PID-N` in the system's temporary directory (N counts the calls, so each is
    /// a directory of its own), emptied first.
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kubeplex-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `contents` to `name` in it (creating parent dirs) and returns the full path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
