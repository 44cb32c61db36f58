//! Dependencies point one way (docs/architecture.md): wire ← cache ← the live layer that feeds
//! it from the upstream (`upstream/`) ← the identity layer that asks the upstream who clients
//! are and what they may read (`auth/`) ← serve; `net` (the listener) under all of them. The
//! crates `kubeplex-wire`, `kubeplex-net` and `kubeplex-sim` are kept apart by Cargo itself, and
//! so are the load tool `kubeplex-bench` and `kubeplex-test-support`, which depend on
//! `kubeplex` (its sources cannot name them); inside the `kubeplex` crate this test reads the
//! modules' paths and fails on an edge that points up (`sim` is the fake apiserver's crate
//! re-exported as `crate::sim`). Test code (`*tests.rs`, `testutil.rs`, files under a module's
//! `tests/` folder) may reach anything.

use std::path::{Path, PathBuf};

/// Each layer and the modules of the `kubeplex` crate it must not name.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("cache", &["upstream", "auth", "serve", "net", "sim"]),
    ("upstream", &["auth", "serve", "net", "sim"]),
    ("auth", &["serve", "net", "sim"]),
    ("net", &["cache", "upstream", "auth", "serve", "sim"]),
    ("serve", &["sim"]),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source dir").flatten() {
        let path = entry.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            // `x/tests/` holds the children of the unit tests `x/tests.rs` (docs/style.md).
            if name != "tests" {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let test_code = name.ends_with("tests.rs") || name == "testutil.rs";
            if !test_code {
                out.push(path);
            }
        }
    }
}

/// The modules of the crate a source line names: `crate::x`, or `super::super::x` climbing to
/// the crate root from a module's file.
fn named_modules(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for marker in ["crate::", "super::super::"] {
        let mut rest = line;
        while let Some(at) = rest.find(marker) {
            let after = &rest[at + marker.len()..];
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            found.push(&after[..end]);
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn no_module_imports_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    let mut read = 0;
    for (layer, forbidden) in FORBIDDEN {
        let mut files = Vec::new();
        sources(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "no sources under src/{layer}");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("source");
            read += 1;
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for module in named_modules(line) {
                    if forbidden.contains(&module) {
                        violations.push(format!(
                            "{}:{}: {layer} names {module}",
                            file.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(read > 20, "only {read} files read");
    assert!(violations.is_empty(), "imports that point up:\n{}", violations.join("\n"));
}

#[test]
fn the_check_sees_an_upward_import() {
    assert_eq!(named_modules("use crate::serve::metrics::Metrics;"), ["serve"]);
    assert_eq!(named_modules("    let x = super::super::upstream::Upstream::new();"), ["upstream"]);
    assert_eq!(
        named_modules("use crate::wire::{meta, proto}; use crate::cache::Store;"),
        ["wire", "cache"]
    );
}
