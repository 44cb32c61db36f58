//! Dependencies point one way (docs/architecture.md): wire ← cache, and wire ← the connection
//! to the upstream (`upstream/`, which knows nothing of caches) ← the live layer that keeps the
//! caches current over it (`live/`) ← the identity layer that asks the upstream who clients
//! are and what they may read (`auth/`) ← serve; `net` (the listener) under all of them. The
//! crates `kubeplex-wire`, `kubeplex-net` and `kubeplex-sim` are kept apart by Cargo itself, and
//! so are the load tool `kubeplex-bench` and `kubeplex-test-support`, which depend on
//! `kubeplex` (its sources cannot name them); inside the `kubeplex` crate this test reads the
//! modules' paths and fails on an edge that points up; and no library source names the fake
//! apiserver's crate (`kubeplex_sim`), which only the binary's `sim` and `demo` commands use.
//! Test code (`*tests.rs`, `testutil.rs`, files under a module's
//! `tests/` folder) may reach anything.

use std::path::{Path, PathBuf};

/// Each layer and the modules of the `kubeplex` crate it must not name.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("cache", &["upstream", "live", "auth", "serve", "net"]),
    ("upstream", &["cache", "live", "auth", "serve", "net"]),
    ("live", &["auth", "serve", "net"]),
    ("auth", &["serve", "net"]),
    ("net", &["cache", "upstream", "live", "auth", "serve"]),
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
fn the_library_names_nothing_of_the_fake_apiserver() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for layer in ["cache", "upstream", "live", "auth", "serve", "net"] {
        sources(&src.join(layer), &mut files);
    }
    files.push(src.join("lib.rs"));
    let named: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).expect("source");
            text.lines().any(|l| !l.trim_start().starts_with("//") && l.contains("kubeplex_sim"))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(files.len() > 20, "only {} files read", files.len());
    assert!(named.is_empty(), "library sources that name kubeplex_sim: {named:?}");
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

// ---- no import cycles between files ----
//
// Within each crate of the product (`kubeplex`'s library and binary, `kubeplex-wire`,
// `kubeplex-net`), no file names an item of a file that names it back, directly or through
// others: a module's root file declares and re-exports its children, and a child never reaches
// back into it (what the children share lives in a file of its own). Read from the sources as
// a newcomer reads them: a path `crate::a::b::C`, `super::x::Y`, `self::x::Y` or `x::Y` (`x` a
// child module) names the file of its longest module prefix. Test code is left out.

use std::collections::{BTreeMap, BTreeSet};

/// A crate's module files, by module path, found by following `mod x;` from its root file.
fn module_files(root: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = BTreeMap::new();
    let mut todo = vec![(Vec::new(), root.to_path_buf())];
    while let Some((path, file)) = todo.pop() {
        let text = std::fs::read_to_string(&file).expect("source");
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let dir = file.parent().expect("dir");
        let children_dir =
            if ["mod", "lib", "main"].contains(&stem) { dir.to_path_buf() } else { dir.join(stem) };
        for child in declared_modules(&text) {
            let as_file = children_dir.join(format!("{child}.rs"));
            let as_dir = children_dir.join(&child).join("mod.rs");
            let found = if as_file.exists() { as_file } else { as_dir };
            let mut child_path = path.clone();
            child_path.push(child);
            todo.push((child_path, found));
        }
        files.insert(path, file);
    }
    files
}

/// The `mod x;` declarations of a file, except test modules (`#[cfg(test)]`, `tests`,
/// `testutil`).
fn declared_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut test_attribute = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            test_attribute = true;
            continue;
        }
        let rest = line
            .strip_prefix("pub ")
            .or_else(|| line.strip_prefix("pub(crate) "))
            .or_else(|| line.strip_prefix("pub(super) "))
            .unwrap_or(line);
        if let Some(name) = rest.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            if !test_attribute && !["tests", "testutil", "testing"].contains(&name) {
                out.push(name.to_string());
            }
        }
        if !line.starts_with("#[") {
            test_attribute = false;
        }
    }
    out
}

/// The text of a source file without comments and without `#[cfg(test)]` items at its end.
fn code(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    body.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// `a::{b, c::{d, e}}` spelled out as `a::b, a::c::d, a::c::e`.
fn expand_groups(text: &str) -> String {
    let mut text = text.to_string();
    while let Some(open) = text.find("::{") {
        // Its matching brace, and its items split at the commas of its own level.
        let mut depth = 0;
        let mut items = Vec::new();
        let mut item_start = open + 3;
        let mut close = None;
        for (i, c) in text[open + 2..].char_indices().map(|(i, c)| (open + 2 + i, c)) {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    items.push(text[item_start..i].trim().to_string());
                    close = Some(i);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 1 => {
                    items.push(text[item_start..i].trim().to_string());
                    item_start = i + 1;
                }
                _ => {}
            }
        }
        let Some(close) = close else { break };
        let prefix_start = text[..open]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |p| p + 1);
        let prefix = text[prefix_start..open].to_string();
        let spelled: Vec<String> = items
            .iter()
            .filter(|i| !i.is_empty())
            .map(|i| if i == "self" { prefix.clone() } else { format!("{prefix}::{i}") })
            .collect();
        text.replace_range(prefix_start..=close, &spelled.join(", "));
    }
    text
}

/// The files each file of a crate names.
fn file_edges(files: &BTreeMap<Vec<String>, PathBuf>) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let by_file: BTreeMap<&PathBuf, &Vec<String>> = files.iter().map(|(m, f)| (f, m)).collect();
    let resolve = |path: &[String]| {
        (0..=path.len()).rev().find_map(|n| files.get(&path[..n].to_vec()).cloned())
    };
    let mut edges = BTreeMap::new();
    for (file, module) in &by_file {
        let text = expand_groups(&code(&std::fs::read_to_string(file).expect("source")));
        let children = declared_modules(&text);
        let mut named = BTreeSet::new();
        let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut rest = text.as_str();
        while let Some(at) = rest.find("::") {
            let start = rest[..at].rfind(|c: char| !(is_ident(c) || c == ':')).map_or(0, |p| p + 1);
            let end = rest[at..]
                .find(|c: char| !(is_ident(c) || c == ':'))
                .map_or(rest.len(), |e| at + e);
            let segments: Vec<String> =
                rest[start..end].split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            rest = &rest[end..];
            let Some(first) = segments.first() else { continue };
            let target: Vec<String> = match first.as_str() {
                "crate" => segments[1..].to_vec(),
                "super" | "self" => {
                    let mut base = module.to_vec();
                    let mut i = 0;
                    while i < segments.len() && ["super", "self"].contains(&segments[i].as_str()) {
                        if segments[i] == "super" {
                            base.pop();
                        }
                        i += 1;
                    }
                    base.extend(segments[i..].iter().cloned());
                    base
                }
                name if children.iter().any(|c| c == name) => {
                    module.iter().cloned().chain(segments.iter().cloned()).collect()
                }
                _ => continue,
            };
            if let Some(target) = resolve(&target) {
                if &target != *file {
                    named.insert(target);
                }
            }
        }
        edges.insert((*file).clone(), named);
    }
    edges
}

/// One cycle of `edges`, if there is one: the files around it.
fn a_cycle(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    // Depth-first, with the path so far: an edge back into it closes a cycle.
    fn visit(
        file: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        path: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(at) = path.iter().position(|p| p == file) {
            return Some(path[at..].to_vec());
        }
        if !done.insert(file.clone()) {
            return None;
        }
        path.push(file.clone());
        for next in edges.get(file).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|f| visit(f, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_file_names_one_that_names_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates = [
        "src/lib.rs",
        "src/bin/kubeplex/main.rs",
        "crates/kubeplex-wire/src/lib.rs",
        "crates/kubeplex-net/src/lib.rs",
    ];
    let mut cycles = Vec::new();
    let mut read = 0;
    for krate in crates {
        let files = module_files(&root.join(krate));
        read += files.len();
        let mut edges = file_edges(&files);
        // Every cycle, one at a time: each found is cut at its first edge and reported.
        while let Some(cycle) = a_cycle(&edges) {
            let names: Vec<String> = cycle
                .iter()
                .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
                .collect();
            cycles.push(format!("{} → (back)", names.join(" → ")));
            let next = cycle.get(1).unwrap_or(&cycle[0]).clone();
            edges.get_mut(&cycle[0]).map(|e| e.remove(&next));
        }
    }
    assert!(read > 100, "only {read} files read");
    assert!(cycles.is_empty(), "files that name each other:\n{}", cycles.join("\n"));
}

#[test]
fn the_cycle_check_reads_paths_as_rust_does() {
    assert_eq!(expand_groups("use a::{b, c::{d, e}};"), "use a::b, a::c::d, a::c::e;");
    assert_eq!(expand_groups("use a::{self, b};"), "use a, a::b;");
    let declared = declared_modules("mod a;\npub mod b;\n#[cfg(test)]\nmod tests;\nmod c { }");
    assert_eq!(declared, ["a", "b"]);
    let mut edges = BTreeMap::new();
    let (a, b, c) = (PathBuf::from("a"), PathBuf::from("b"), PathBuf::from("c"));
    edges.insert(a.clone(), BTreeSet::from([b.clone()]));
    edges.insert(b.clone(), BTreeSet::from([c.clone()]));
    edges.insert(c.clone(), BTreeSet::new());
    assert_eq!(a_cycle(&edges), None);
    edges.get_mut(&c).unwrap().insert(a.clone());
    assert_eq!(a_cycle(&edges), Some(vec![a, b, c]));
}

// ---- the map matches the tree ----

/// Every source path docs/architecture.md and the README's source map name (in backticks, as
/// the first word of a source-map line, or in the data-flow drawing) is a file or folder of the
/// tree: the map is read by newcomers before the code, so a moved file must move there too.
/// Paths in the rules table are under `src/`, except `wire/...` (`crates/kubeplex-wire/src/`)
/// and `sim/...` (`crates/kubeplex-sim/src/`); a path relative to the part the text is about
/// (`caches/budget.rs` under `upstream/`) is found by its ending.
#[test]
fn the_docs_name_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let located = |path: &str| -> PathBuf {
        let top =
            ["src/", "crates/", "tests/", "scripts/", "docs/", "deploy/", "tools/", "benches/"];
        if top.iter().any(|t| path.starts_with(t)) {
            root.join(path)
        } else if let Some(rest) = path.strip_prefix("wire/") {
            root.join("crates/kubeplex-wire/src").join(rest)
        } else if let Some(rest) = path.strip_prefix("sim/") {
            root.join("crates/kubeplex-sim/src").join(rest)
        } else {
            root.join("src").join(path)
        }
    };
    let looks_like_source = |p: &str| {
        !p.contains(' ')
            && !p.contains("://")
            && (p.ends_with(".rs") || (p.ends_with('/') && p.len() > 1))
            && p.chars().all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    };
    // Exactly where it says: under `src/` unless it names another top folder, `wire/` or
    // `sim/` (the crates the table's note names), or the shared fixtures.
    let exists =
        |path: &str| located(path).exists() || root.join("..").join("shared").join(path).exists();
    // Placeholders, not paths: `tests/AREA/main.rs`, `x/tests.rs`.
    let placeholder = |p: &str| p.contains("AREA") || p.starts_with("x/");
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in ["docs/architecture.md", "README.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect("doc");
        let mut paths: Vec<String> = text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|p| looks_like_source(p))
            .map(String::from)
            .collect();
        // The source map: a line that starts with a path names it (continuation lines are
        // indented).
        if let Some(map) = text.split("## Source map").nth(1) {
            let entries = map.lines().filter(|l| !l.starts_with(' '));
            let first_words = entries.filter_map(|l| l.split_whitespace().next());
            paths.extend(first_words.filter(|w| looks_like_source(w)).map(String::from));
        }
        // Paths in the data-flow drawing of the architecture page.
        if doc == "docs/architecture.md" {
            let drawing = text.split("```").nth(1).unwrap_or("");
            let words = drawing.split(|c: char| c.is_whitespace() || "─│├└▲▼(),;:".contains(c));
            paths.extend(
                words.filter(|w| w.contains('/') && looks_like_source(w)).map(String::from),
            );
        }
        for path in paths.iter().filter(|p| !placeholder(p)) {
            checked += 1;
            if !exists(path) {
                missing.push(format!("{doc}: {path}"));
            }
        }
    }
    // The other pages cite files by their path from the root: each that names a top folder.
    for doc in ["docs/operations.md", "docs/design.md", "BENCHMARKS.md", "deploy/README.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect("doc");
        let top = ["src/", "crates/", "tests/", "scripts/", "deploy/", "config/", "benches/"];
        let cited = text.split('`').skip(1).step_by(2).filter(|p| {
            let p = p.split_whitespace().next().unwrap_or("");
            looks_like_source(p) || (top.iter().any(|t| p.starts_with(t)) && !p.contains('*'))
        });
        for cited in cited {
            let path = cited.split_whitespace().next().unwrap_or("");
            if !top.iter().any(|t| path.starts_with(t)) || placeholder(path) {
                continue;
            }
            checked += 1;
            if !root.join(path).exists() {
                missing.push(format!("{doc}: {path}"));
            }
        }
    }
    assert!(checked > 50, "only {checked} paths read");
    assert!(missing.is_empty(), "the docs name paths that do not exist:\n{}", missing.join("\n"));
}

/// Every file of a crate's sources, test code included.
fn all_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            all_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// docs/style.md, "Unit tests": a module's tests are in `x/tests.rs`, never inline, and no
/// `#[path]` attribute bends the module tree away from the folder tree.
#[test]
fn unit_tests_live_in_their_modules_tests_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    all_sources(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).expect("crates").flatten() {
        all_sources(&krate.path().join("src"), &mut files);
    }
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source");
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("mod tests {") || line.starts_with("#[path") {
                found.push(format!(
                    "{}:{}: {line}",
                    file.strip_prefix(root).unwrap().display(),
                    n + 1
                ));
            }
        }
    }
    assert!(files.len() > 200, "only {} files read", files.len());
    assert!(found.is_empty(), "tests kept inline, or a #[path]:\n{}", found.join("\n"));
}

/// Every folder of `src/` and every crate is on the architecture map (`docs/architecture.md`):
/// a folder `x/y/` by a path in it or its module's file (`x/y.rs`), a crate by its path.
/// Folders that hold only unit tests (`x/tests.rs`, `x/tests/`) are their module's.
#[test]
fn the_architecture_map_names_every_folder_and_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("doc");
    fn folders(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("dir").flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "tests") {
                out.push(path.clone());
                folders(&path, out);
            }
        }
    }
    let only_tests = |dir: &Path| {
        std::fs::read_dir(dir).expect("dir").flatten().all(|e| {
            let name = e.file_name();
            name == "tests.rs" || name == "tests"
        })
    };
    let mut all = Vec::new();
    folders(&root.join("src"), &mut all);
    let mut missing = Vec::new();
    for dir in all.iter().filter(|d| !only_tests(d)) {
        let rel = dir.strip_prefix(root.join("src")).unwrap().display().to_string();
        if !map.contains(&format!("{rel}/")) && !map.contains(&format!("{rel}.rs")) {
            missing.push(format!("src/{rel}/"));
        }
    }
    let crates: Vec<_> =
        std::fs::read_dir(root.join("crates")).expect("crates").flatten().collect();
    for krate in &crates {
        let name = format!("crates/{}", krate.file_name().to_string_lossy());
        if !map.contains(&name) {
            missing.push(name);
        }
    }
    assert!(
        all.len() > 20 && crates.len() >= 6,
        "only {} folders, {} crates",
        all.len(),
        crates.len()
    );
    assert!(missing.is_empty(), "not on the architecture map:\n{}", missing.join("\n"));
}
