//! Caches' states on local disk (issue 13), so that a kubeplex restarted while the apiserver is
//! unreachable — a node rebooted during an outage — serves its last state until the upstream
//! answers, then reconciles like a relist.
//!
//! - Writing: every `interval`, each synced and whole cache whose resourceVersion moved since
//!   its last write is written to `DIR/<group>_<version>_<resource>_<encoding>.state`
//!   (`cache::persist`'s format), atomically (temporary file, fsync, rename, fsync of the
//!   directory), the directory 0700 and the files 0600: they hold what kubeplex's identity
//!   may read. Once more at graceful shutdown. Caches that would take the directory past
//!   `max_bytes` are not written (a log line and a metric).
//! - Reading, at start-up: every state file is read and checked; a bad one is skipped with a
//!   log line and a metric (and never panics). Each state seeds discovery with its resource
//!   (so that it can be routed before discovery answers), and its cache starts. A cache serves
//!   its disk state only when its first load fails because the upstream is unreachable; a
//!   load that succeeds first replaces it unseen, and a refusal (401/403) never serves it.
//!   A restored state is never taken as fresh: consistent reads still need the upstream.
//! - Resuming, at start-up: a state written within [`RESUME_WITHIN`] (a restart, as in a
//!   DaemonSet rollout) is resumed from rather than loaded again — the cache's reflector
//!   watches the upstream from its RV and takes the state as its first load once the upstream
//!   accepts that watch (`live::reflector::resume`); its clients resume from the same RV, which
//!   the last bookmark before the shutdown told them. No list, no freshness proof. An older
//!   state only stands by for an unreachable upstream.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

use super::feed::{self, Feed};
use crate::cache::clock::unix_now;
use crate::cache::persist::{self, DiskState};
use crate::cache::resource::ResourceCache;
use crate::cache::{Encoding, Scope};
use crate::wire::resource::ResourceInfo;

/// A state read from disk at start-up, shared between the stand-by for an unreachable upstream
/// ([`DiskStates::feed`]) and the reflector that resumes from it (`live::reflector::resume`):
/// whichever needs it first takes it.
pub type StandBy = Arc<Mutex<Option<DiskState>>>;

/// A state written at most this long ago is resumed from at start-up (a restart), rather than
/// only standing by for an unreachable upstream: long enough for a node's kubeplex to be
/// replaced, short enough that the upstream still has the history from its RV.
pub const RESUME_WITHIN: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether a state read at start-up is recent enough to resume from ([`RESUME_WITHIN`]).
pub fn resumable(state: &DiskState) -> bool {
    unix_now().saturating_sub(state.written_at) <= RESUME_WITHIN.as_secs()
}

/// Where and how often caches are written; `dir: None` turns it off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskConfig {
    pub dir: Option<PathBuf>,
    pub interval: Duration,
    /// At most this many bytes of state files in `dir`.
    pub max_bytes: u64,
}

impl DiskConfig {
    pub const INTERVAL: Duration = Duration::from_secs(60);
    pub const MAX_BYTES: u64 = 2 << 30;
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig { dir: None, interval: Self::INTERVAL, max_bytes: Self::MAX_BYTES }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{file}: {size} bytes would take the state directory past its {max} bytes")]
    OverBudget { file: String, size: u64, max: u64 },
}

/// The states' metrics.
#[derive(Clone)]
struct DiskMetrics {
    writes: IntCounterVec,
    loads: IntCounterVec,
    /// The bytes of the state files this process wrote (each cache's latest).
    bytes: IntGauge,
}

/// The state directory: writes caches, reads them back.
pub struct DiskStates {
    dir: PathBuf,
    interval: Duration,
    max_bytes: u64,
    metrics: DiskMetrics,
    /// Per file: the RV last written and the file's size.
    written: Mutex<HashMap<String, (u64, u64)>>,
    /// The namespace caches are limited to (`CachesConfig::namespace`), if any.
    namespace: Option<String>,
}

impl DiskStates {
    /// `None` when turned off.
    /// `namespace`: the one the caches are limited to, if any; it is part of a namespaced
    /// resource's file name, so that a state of one namespace is never read back as another's
    /// or as the whole cluster's.
    pub fn new(
        config: &DiskConfig,
        namespace: Option<&str>,
        registry: &Registry,
    ) -> Result<Option<Arc<Self>>, DiskError> {
        let Some(dir) = config.dir.clone() else { return Ok(None) };
        let io = |error| DiskError::Io { path: dir.clone(), error };
        create_private_dir(&dir).map_err(io)?;
        let writes = IntCounterVec::new(
            Opts::new(
                "kubeplex_disk_state_writes_total",
                "Caches written to the state directory, by result: ok, error, over_budget.",
            ),
            &["resource", "encoding", "result"],
        )
        .map_err(|e| io(std::io::Error::other(e)))?;
        let loads = IntCounterVec::new(
            Opts::new(
                "kubeplex_disk_state_loads_total",
                "State files read at start-up, by result: ok, invalid (corrupt, truncated, another format; skipped), served (a cache served it while the upstream was unreachable).",
            ),
            &["result"],
        )
        .map_err(|e| io(std::io::Error::other(e)))?;
        for r in ["ok", "invalid", "served"] {
            loads.with_label_values(&[r]);
        }
        let bytes = IntGauge::new(
            "kubeplex_disk_state_bytes",
            "The bytes of the state files this process wrote, each cache's latest (at most the state directory's maxBytes).",
        )
        .map_err(|e| io(std::io::Error::other(e)))?;
        // Registered once per process; a second DiskStates (tests) shares the first's.
        for m in [&writes, &loads] {
            let _ = registry.register(Box::new(m.clone()));
        }
        let _ = registry.register(Box::new(bytes.clone()));
        Ok(Some(Arc::new(DiskStates {
            dir,
            interval: config.interval,
            max_bytes: config.max_bytes,
            metrics: DiskMetrics { writes, loads, bytes },
            written: Mutex::new(HashMap::new()),
            namespace: namespace.map(str::to_string),
        })))
    }

    /// The state file of a cache: `persist::file_name`, by its scope.
    fn file_name(&self, info: &ResourceInfo, encoding: Encoding, scope: &Scope) -> String {
        persist::file_name(info, encoding, scope)
    }

    /// A state read back from `name`, checked to be the file of its own cache. A file written
    /// before states carried their scope, named for the namespace caches are limited to, is
    /// that namespace's.
    fn own_file(&self, name: &str, mut state: DiskState) -> Option<DiskState> {
        if name == self.file_name(&state.info, state.encoding, &state.scope) {
            return Some(state);
        }
        let ns = self.namespace.as_deref().filter(|_| state.info.namespaced)?;
        let legacy = Scope::new(Some(ns), None, None);
        if state.scope != Scope::everything()
            || name != self.file_name(&state.info, state.encoding, &legacy)
        {
            return None;
        }
        state.scope = legacy;
        Some(state)
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Every valid state in the directory (blocking I/O: run it off the runtime's threads).
    /// Invalid files are skipped and left for the next write to replace.
    pub fn load_all(&self) -> Vec<DiskState> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut states = Vec::new();
        let mut total = 0u64;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("state") {
                continue;
            }
            let size = entry.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            if total.saturating_add(size) > self.max_bytes {
                tracing::warn!(path = %path.display(), size, "state file over the state directory's budget; not read");
                self.metrics.loads.with_label_values(&["invalid"]).inc();
                continue;
            }
            total += size;
            let read = std::fs::read(&path).map_err(|e| e.to_string()).and_then(|bytes| {
                persist::decode(Bytes::from(bytes), None).map_err(|e| e.to_string())
            });
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            match read.map(|state| self.own_file(name, state)) {
                Ok(Some(state)) => {
                    tracing::info!(path = %path.display(), objects = state.objects.len(), rv = state.resource_version, "cache state read from disk");
                    self.metrics.loads.with_label_values(&["ok"]).inc();
                    states.push(state);
                }
                Ok(None) => {
                    tracing::warn!(path = %path.display(), "state file holds another cache's state; skipped");
                    self.metrics.loads.with_label_values(&["invalid"]).inc();
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "state file unreadable; skipped");
                    self.metrics.loads.with_label_values(&["invalid"]).inc();
                }
            }
        }
        states
    }

    /// Writes `cache` if it is synced, whole, not itself from disk, and has moved since its
    /// last write; whether it wrote (blocking I/O).
    pub fn write(&self, cache: &ResourceCache) -> Result<bool, DiskError> {
        if !cache.is_synced() || !cache.is_complete() || cache.disk_state_written().is_some() {
            return Ok(false);
        }
        let name = self.file_name(cache.info(), cache.encoding(), cache.scope());
        let state = cache.current();
        let rv = state.resource_version();
        let (others, last) = {
            let written = self.written.lock().unwrap_or_else(|p| p.into_inner());
            let others: u64 = written.iter().filter(|(k, _)| **k != name).map(|(_, v)| v.1).sum();
            (others, written.get(&name).map(|v| v.0))
        };
        if last == Some(rv) {
            return Ok(false);
        }
        let bytes = persist::encode(
            cache.info(),
            cache.encoding(),
            cache.scope(),
            rv,
            unix_now(),
            state.len(),
            state.items().values().map(|o| o.as_ref()),
        );
        let labels = |result| [cache.label(), cache.encoding().as_str(), result];
        let size = bytes.len() as u64;
        if others.saturating_add(size) > self.max_bytes {
            self.metrics.writes.with_label_values(&labels("over_budget")).inc();
            return Err(DiskError::OverBudget { file: name, size, max: self.max_bytes });
        }
        let path = self.dir.join(&name);
        match write_atomically(&self.dir, &path, &bytes) {
            Ok(()) => {
                self.metrics.writes.with_label_values(&labels("ok")).inc();
                let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
                written.insert(name, (rv, size));
                let total: u64 = written.values().map(|v| v.1).sum();
                self.metrics.bytes.set(i64::try_from(total).unwrap_or(i64::MAX));
                Ok(true)
            }
            Err(error) => {
                self.metrics.writes.with_label_values(&labels("error")).inc();
                Err(DiskError::Io { path, error })
            }
        }
    }

    /// Writes each of `caches` that is due; errors are logged (a full disk must not stop the
    /// proxy). Blocking I/O.
    pub fn write_all(&self, caches: &[Arc<ResourceCache>]) -> usize {
        let mut wrote = 0;
        for cache in caches {
            match self.write(cache) {
                Ok(true) => wrote += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(resource = %cache.describe(), error = %e, "cache state not written")
                }
            }
        }
        wrote
    }

    /// Writes `bytes` as the file `name` of the directory, atomically and 0600 (node mode's
    /// last review answers, `decisions.json`). Blocking I/O.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<(), DiskError> {
        let path = self.dir.join(name);
        write_atomically(&self.dir, &path, bytes).map_err(|error| DiskError::Io { path, error })
    }

    /// The file `name` of the directory, if it is there and at most `max` bytes. Blocking I/O.
    pub fn read_file(&self, name: &str, max: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let path = self.dir.join(name);
        let file = std::fs::File::open(&path).ok()?;
        let mut bytes = Vec::new();
        match file.take(max + 1).read_to_end(&mut bytes) {
            Ok(n) if n as u64 <= max => Some(bytes),
            Ok(_) => {
                tracing::warn!(path = %path.display(), max, "file larger than expected; not read");
                None
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "file unreadable; not read");
                None
            }
        }
    }

    /// The reflector's feed for `cache`, serving `state` if (and only if) the cache's first
    /// load fails because the upstream cannot be reached.
    pub fn feed(
        self: &Arc<Self>,
        cache: Arc<ResourceCache>,
        pending: StandBy,
    ) -> impl Fn(Feed) + Send + Sync + 'static {
        let served = self.metrics.loads.with_label_values(&["served"]);
        move |event| {
            let outcome = match &event {
                Feed::LoadFailed { unreachable, .. } => Some(*unreachable),
                Feed::Loaded { .. } => Some(false),
                _ => None,
            };
            // The first load decides: an unreachable upstream brings the disk state into
            // service (before the failure is applied, so that readers waiting for the cache
            // find it synced); an answer (a state, or a refusal) drops it.
            let state =
                outcome.and_then(|_| pending.lock().unwrap_or_else(|p| p.into_inner()).take());
            if let (Some(true), Some(state)) = (outcome, state) {
                let (rv, age) =
                    (state.resource_version, unix_now().saturating_sub(state.written_at));
                if cache.restore(state.objects, state.resource_version, state.written_at) {
                    served.inc();
                    tracing::warn!(resource = %cache.describe(), rv, age_seconds = age, "upstream unreachable: serving the cache's state from disk until it answers");
                }
            }
            feed::apply(&cache, event);
        }
    }
}

/// Makes `dir` a state directory for the user `uid`:`gid` — created if missing, mode 0700,
/// owned by them, as are the regular files in it (`kubeplex state-dir`: a root init container
/// prepares a `hostPath` for a kubeplex that does not run as root). A symbolic link is refused:
/// the directory is reached by whoever can write its parent.
pub fn prepare_dir(dir: &Path, uid: u32, gid: u32) -> std::io::Result<usize> {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(std::io::Error::other(format!("{} is a symbolic link", dir.display())));
    }
    create_private_dir(dir)?;
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid))?;
    let mut files = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::os::unix::fs::lchown(entry.path(), Some(uid), Some(gid))?;
            files += 1;
        }
    }
    Ok(files)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    // An existing directory is narrowed too: the states hold what kubeplex's identity reads.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Temporary file (0600), fsync, rename over `path`, fsync of the directory: a crash leaves
/// the old file or the new one, never half of one.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests;
