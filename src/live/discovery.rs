//! What the upstream serves, learned from its discovery documents: resource ↔ kind,
//! group/version, scope, verbs. Fetched per group-version on first use and refreshed once its
//! TTL has passed, so resources added to the cluster (CRDs) are found without a restart. The
//! documents' bytes are kept too: they answer clients' GETs of them ([`Resources::document`]).
//!
//! Outages (issue 13): the cache can only answer for a resource discovery knows, so discovery
//! must outlive the upstream. An entry past its TTL is **stale-while-error**: it keeps being
//! used while its refresh fails (the upstream unreachable, a 5xx, a 429 — anything but an
//! answer), for as long as the outage lasts, and is replaced as soon as the upstream answers
//! again. A 404 is an answer: the group-version is gone (a CRD deleted), and so are its
//! resources. A stale entry is refreshed in the background, one refresh per group-version at a
//! time; its readers never wait for it. A group-version seen for the first time is fetched
//! while its first reader waits, and readers arriving meanwhile share that one fetch.
//!
//! Bounded: at most [`MAX_GROUP_VERSIONS`] group-versions are remembered. Paths can name any
//! group-version (`/apis/x1/v1/foo`, `/apis/x2/v1/foo`, …) and each unknown one is remembered
//! as empty (one discovery call per TTL, not one per request), so when the map is full the
//! least recently used entry that serves nothing is dropped first: a flood of made-up
//! group-versions cannot push out what the cache serves from during an outage.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

use crate::upstream::{Upstream, UpstreamBody};

/// How long a group-version's discovery document is trusted before it is fetched again (the
/// default of [`Resources::new`]'s `ttl`).
pub const DISCOVERY_TTL: Duration = Duration::from_secs(300);
/// Group-versions remembered at most (a cluster serves a few dozen; CRD-heavy ones hundreds).
pub const MAX_GROUP_VERSIONS: usize = 1024;
/// Discovery documents are small; refuse anything absurd.
const MAX_DISCOVERY_BYTES: usize = 16 * 1024 * 1024;
/// One discovery fetch may take this long (the upstream client has no overall timeout:
/// watches are long); a hung upstream then counts as failing and the stale entry is kept.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A group-version's document is answered from memory while younger than this share of the
/// TTL (30 s of the default 300 s); an older one is fetched again first (or, while the upstream
/// does not answer, the last one is answered). So a CRD created, changed or no longer served
/// shows in the documents clients read within it, as the apiserver's own discovery shows it
/// within seconds; a burst of node tiers starting still costs one fetch.
const DOCUMENT_FRESH_SHARE: u32 = 10;
/// How long a reader of a document older than that waits for it to be fetched again, before
/// it is answered with the last one (an upstream that does not answer).
const DOCUMENT_WAIT: Duration = Duration::from_secs(2);
/// A read naming a resource that its served group-version's answer lacks (a CRD created since)
/// refreshes that answer when it is older than this share of the TTL (10 s of 300 s): one
/// fetch per group-version in that time, however many such reads.
const MISS_REFRESH_SHARE: u32 = 30;
/// A failed refresh of a stale entry is retried no sooner than this (or the TTL, if shorter):
/// during an outage, readers of a stale entry must not each make a connection attempt.
const RETRY_FAILED: Duration = Duration::from_secs(5);

pub use crate::wire::resource::ResourceInfo;

/// A group-version's resources, by name.
type Found = Arc<HashMap<String, Arc<ResourceInfo>>>;
type GroupVersion = (String, String);

/// What one discovery fetch came to.
enum Fetched {
    /// The upstream's answer: the group-version's resources (none when it answered 404), and
    /// the document they were read from.
    Answer(Found, Option<Bytes>),
    /// No answer (transport error, timeout, 5xx, 429, a refusal, an unreadable body).
    Failed(String),
}

/// One group-version.
struct Slot {
    /// The upstream's last answer, and when it came; `None` until it first answered.
    answer: Option<(Instant, Found)>,
    /// That answer's document as the upstream sent it (JSON); `None` for a 404, or when the
    /// answer was seeded.
    document: Option<Bytes>,
    /// When the last fetch failed, if it did (a stale answer is being served meanwhile).
    failed: Option<Instant>,
    /// Held while this group-version is fetched: one fetch at a time.
    flight: Arc<tokio::sync::Mutex<()>>,
    /// Fetches finished: a reader that waited for another's fetch takes its result.
    attempts: u64,
    /// Last read, for eviction.
    used: Instant,
    /// The answer was not fetched but seeded from caches' states on disk (`seed`): used, as a
    /// stale answer, only until the upstream answers; refreshed on first use.
    seeded: bool,
}

impl Slot {
    fn new(now: Instant) -> Slot {
        Slot {
            answer: None,
            document: None,
            failed: None,
            flight: Arc::new(tokio::sync::Mutex::new(())),
            attempts: 0,
            used: now,
            seeded: false,
        }
    }

    /// Serves no resource: never answered, or answered with none.
    fn serves_nothing(&self) -> bool {
        self.answer.as_ref().is_none_or(|(_, found)| found.is_empty())
    }

    /// Whether the entry is served although its TTL passed, because refreshing it failed.
    fn stale(&self) -> bool {
        self.answer.is_some() && self.failed.is_some()
    }
}

/// Discovery's metrics: how many group-versions are remembered, how many are served stale
/// because the upstream cannot be reached, and how fetches went.
#[derive(Clone)]
pub struct DiscoveryMetrics {
    /// Fetches of a discovery document by result: `ok`, `gone` (404), `error` (no answer).
    pub fetches: IntCounterVec,
    /// Group-versions answered from their last discovery document because refreshing it
    /// failed: non-zero means the upstream is unreachable and reads come from the last state.
    pub stale: IntGauge,
    /// Group-versions remembered (at most [`MAX_GROUP_VERSIONS`]).
    pub entries: IntGauge,
}

impl DiscoveryMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = DiscoveryMetrics {
            fetches: IntCounterVec::new(
                Opts::new(
                    "kubeplex_discovery_fetches_total",
                    "Fetches of a group-version's discovery document from the upstream, by result: ok, gone (404: the group-version is not served), error (no answer: unreachable, timeout, 5xx, 429; the last answer stays in use).",
                ),
                &["result"],
            )?,
            stale: IntGauge::new(
                "kubeplex_discovery_stale_entries",
                "Group-versions whose discovery document is past its TTL and could not be refreshed, so the last one the upstream gave is still used (the upstream is unreachable; cached reads go on from the last state).",
            )?,
            entries: IntGauge::new(
                "kubeplex_discovery_entries",
                "Group-versions whose discovery the proxy remembers (bounded).",
            )?,
        };
        registry.register(Box::new(m.fetches.clone()))?;
        registry.register(Box::new(m.stale.clone()))?;
        registry.register(Box::new(m.entries.clone()))?;
        Ok(m)
    }
}

/// Discovery cache over the upstream (a handle: clones share it).
#[derive(Clone)]
pub struct Resources {
    inner: Arc<Inner>,
}

struct Inner {
    upstream: Arc<Upstream>,
    /// How long an answer is used before it is refreshed.
    ttl: Duration,
    metrics: DiscoveryMetrics,
    by_gv: Mutex<HashMap<GroupVersion, Slot>>,
}

impl Resources {
    /// Discovery of `upstream`, each answer refreshed after `ttl` ([`DISCOVERY_TTL`] by
    /// default).
    pub fn new(upstream: Arc<Upstream>, ttl: Duration, metrics: DiscoveryMetrics) -> Self {
        let by_gv = Mutex::new(HashMap::new());
        Resources { inner: Arc::new(Inner { upstream, ttl, metrics, by_gv }) }
    }

    /// The resource, if the upstream serves it — or, while the upstream cannot be reached,
    /// served it when it last answered. `None` for a resource it does not serve, and when its
    /// group-version was never answered (the request is then passed through, which is always
    /// safe).
    pub async fn lookup(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<ResourceInfo>> {
        let key = (group.to_string(), version.to_string());
        let found = self.inner.clone().resources(key.clone()).await?;
        let info = found.get(resource).cloned();
        // A group-version that serves other resources but not this one may have gained it
        // since (a CRD created): its answer is refreshed, and this read passes through.
        if info.is_none() && !found.is_empty() {
            self.inner.refresh_older(&key, self.inner.ttl / MISS_REFRESH_SHARE);
        }
        info
    }

    /// Whether the upstream serves the resource, for checking configured caches at start-up:
    /// `Some(false)` only when discovery answered and does not list it (a misspelled name, an
    /// API group-version the cluster lacks); `None` when discovery could not be asked.
    pub async fn serves(&self, group: &str, version: &str, resource: &str) -> Option<bool> {
        let key = (group.to_string(), version.to_string());
        let found = self.inner.clone().resources(key.clone()).await?;
        // Seeded from disk is not the upstream's word on what it serves.
        let map = self.inner.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&key).is_none_or(|slot| slot.seeded) {
            return None;
        }
        Some(found.contains_key(resource))
    }

    /// The resource if its discovery document is already known, fresh or not (never fetches:
    /// for labelling metrics, where a request's path must not cause upstream calls).
    pub fn known(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        let map = self.inner.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        let slot = map.get(&(group.to_string(), version.to_string()))?;
        slot.answer.as_ref()?.1.get(resource).cloned()
    }

    /// The group-version's discovery document as the upstream last sent it (JSON): the one
    /// kubeplex's own decisions rest on, got as a [`Resources::lookup`] gets it — fetched while
    /// its first reader waits (readers arriving meanwhile share that fetch) — and fetched again
    /// before it is answered once a tenth of the TTL old ([`DOCUMENT_FRESH_SHARE`]), kept while
    /// refreshing fails. `None` when
    /// the upstream does not serve the group-version (404), has not answered, or the entry is
    /// seeded from disk: the client's request then goes upstream. As for a read of any
    /// resource path, a group-version the upstream does not serve costs one fetch per TTL.
    pub async fn document(&self, group: &str, version: &str) -> Option<Bytes> {
        let key = (group.to_string(), version.to_string());
        self.inner.clone().resources(key.clone()).await?;
        let fresh = self.inner.ttl / DOCUMENT_FRESH_SHARE;
        if self.inner.older(&key, fresh) {
            // Fetched again before it is answered (readers meanwhile share that fetch); while
            // the upstream does not answer within DOCUMENT_WAIT, the last document is.
            let refetch = self.inner.clone().refetch(key.clone(), fresh);
            let _ = tokio::time::timeout(DOCUMENT_WAIT, refetch).await;
        }
        let map = self.inner.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&key).filter(|slot| !slot.seeded).and_then(|slot| slot.document.clone())
    }

    /// Seeds discovery with resources known from caches' states on disk, for a start-up while
    /// the upstream cannot be reached: their group-versions answer with them (and only them)
    /// until the upstream's discovery answers, which replaces them at the first read. Never
    /// overrides an answer the upstream gave.
    pub fn seed(&self, infos: impl IntoIterator<Item = ResourceInfo>) {
        let now = Instant::now();
        let mut map = self.inner.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        for info in infos {
            let key = (info.group.clone(), info.version.clone());
            let slot = self.inner.slot(&mut map, &key, now);
            if slot.answer.as_ref().is_some_and(|_| !slot.seeded) {
                continue;
            }
            let mut found = slot.answer.take().map(|(_, f)| (*f).clone()).unwrap_or_default();
            found.insert(info.resource.clone(), Arc::new(info));
            slot.answer = Some((now, Arc::new(found)));
            slot.seeded = true;
        }
    }

    /// Forgets what the upstream said of a group-version (a cache found a resource of it no
    /// longer served): its next reader asks again, and waits for the answer.
    pub fn forget(&self, group: &str, version: &str) {
        let mut map = self.inner.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&(group.to_string(), version.to_string()));
        self.inner.metrics.entries.set(map.len() as i64);
    }

    /// Group-versions served from a stale answer because refreshing it failed.
    pub fn stale_entries(&self) -> usize {
        let map = self.inner.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        map.values().filter(|s| s.stale()).count()
    }
}

impl Inner {
    /// The group-version's resources: its answer while fresh; a stale one while a background
    /// refresh runs (or failed recently); otherwise fetched now, one fetch at a time.
    async fn resources(self: Arc<Self>, key: GroupVersion) -> Option<Found> {
        let now = Instant::now();
        let (flight, seen) = {
            let mut map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
            let slot = self.slot(&mut map, &key, now);
            slot.used = now;
            if let Some((fetched, found)) = &slot.answer {
                let found = found.clone();
                let due = slot.seeded || now.duration_since(*fetched) >= self.ttl;
                if due {
                    // Stale: its readers are answered from the last answer meanwhile.
                    self.refresh_in_background(slot, &key, now);
                }
                return Some(found);
            }
            (slot.flight.clone(), slot.attempts)
        };
        // Never answered: this reader waits for a fetch — its own, or one under way.
        let _turn = flight.lock_owned().await;
        {
            let map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(slot) = map.get(&key).filter(|s| s.attempts != seen) {
                return slot.answer.as_ref().map(|(_, found)| found.clone());
            }
        }
        let fetched = self.fetch(&key).await;
        self.record(&key, fetched)
    }

    /// Whether the group-version's answer (fetched, not seeded) is older than `age`.
    fn older(&self, key: &GroupVersion, age: Duration) -> bool {
        let map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key).is_some_and(|slot| {
            !slot.seeded && slot.answer.as_ref().is_some_and(|(at, _)| at.elapsed() >= age)
        })
    }

    /// If the group-version's answer is older than `age`, a refresh in the background (unless
    /// one is under way or failed just now).
    fn refresh_older(self: &Arc<Self>, key: &GroupVersion, age: Duration) {
        let now = Instant::now();
        let mut map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        let Some(slot) = map.get_mut(key) else { return };
        let Some((fetched, _)) = &slot.answer else { return };
        if !slot.seeded && now.duration_since(*fetched) >= age {
            self.refresh_in_background(slot, key, now);
        }
    }

    /// Fetches the group-version again if its answer is still older than `age` once no other
    /// fetch of it is under way, and the last did not fail just now: one fetch for a burst of
    /// readers. Spawned, so that a reader that stops waiting leaves it to finish.
    fn refetch(self: Arc<Self>, key: GroupVersion, age: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let flight = {
                let map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
                let Some(slot) = map.get(&key) else { return };
                slot.flight.clone()
            };
            let _turn = flight.lock_owned().await;
            let due = {
                let map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
                map.get(&key).is_some_and(|slot| self.may_retry(slot, Instant::now()))
            };
            if due && self.older(&key, age) {
                let fetched = self.fetch(&key).await;
                self.record(&key, fetched);
            }
        })
    }

    /// Fetches the group-version again in the background, unless a fetch is under way or the
    /// last one failed just now ([`Inner::may_retry`]).
    fn refresh_in_background(self: &Arc<Self>, slot: &Slot, key: &GroupVersion, now: Instant) {
        if !self.may_retry(slot, now) {
            return;
        }
        if let Ok(turn) = slot.flight.clone().try_lock_owned() {
            let (this, key) = (self.clone(), key.clone());
            tokio::spawn(async move {
                let fetched = this.fetch(&key).await;
                this.record(&key, fetched);
                drop(turn);
            });
        }
    }

    /// Whether a stale entry's refresh may be tried now: not within [`RETRY_FAILED`] (or the
    /// TTL, if shorter) of a failed one.
    fn may_retry(&self, slot: &Slot, now: Instant) -> bool {
        slot.failed.is_none_or(|at| now.duration_since(at) >= RETRY_FAILED.min(self.ttl))
    }

    /// The key's slot, created if need be — after dropping another when the map is full.
    fn slot<'m>(
        &self,
        map: &'m mut HashMap<GroupVersion, Slot>,
        key: &GroupVersion,
        now: Instant,
    ) -> &'m mut Slot {
        if !map.contains_key(key) {
            if map.len() >= MAX_GROUP_VERSIONS {
                evict(map);
            }
            map.insert(key.clone(), Slot::new(now));
            self.metrics.entries.set(map.len() as i64);
        }
        map.entry(key.clone()).or_insert_with(|| Slot::new(now))
    }

    /// Applies a fetch's result; the group-version's resources as now known.
    fn record(&self, key: &GroupVersion, fetched: Fetched) -> Option<Found> {
        let now = Instant::now();
        let mut map = self.by_gv.lock().unwrap_or_else(|p| p.into_inner());
        let slot = self.slot(&mut map, key, now);
        slot.attempts += 1;
        match fetched {
            Fetched::Answer(found, document) => {
                let result = if found.is_empty() { "gone" } else { "ok" };
                slot.document = document;
                self.metrics.fetches.with_label_values(&[result]).inc();
                if slot.failed.take().is_some() && slot.answer.is_some() {
                    tracing::info!(group = %key.0, version = %key.1, "discovery answers again; stale entry replaced");
                }
                slot.answer = Some((now, found));
                slot.seeded = false;
            }
            Fetched::Failed(error) => {
                self.metrics.fetches.with_label_values(&["error"]).inc();
                let first = slot.failed.is_none();
                slot.failed = Some(now);
                match &slot.answer {
                    Some((fetched, _)) if first => tracing::warn!(
                        group = %key.0, version = %key.1, %error,
                        answered_secs_ago = now.duration_since(*fetched).as_secs(),
                        "discovery refresh failed; serving its last answer until the upstream answers"
                    ),
                    Some(_) => {
                        tracing::debug!(group = %key.0, version = %key.1, %error, "discovery refresh failed again")
                    }
                    None => {
                        tracing::debug!(group = %key.0, version = %key.1, %error, "discovery fetch failed")
                    }
                }
            }
        }
        let answer = slot.answer.as_ref().map(|(_, found)| found.clone());
        self.metrics.stale.set(map.values().filter(|s| s.stale()).count() as i64);
        answer
    }

    async fn fetch(&self, key: &GroupVersion) -> Fetched {
        match tokio::time::timeout(FETCH_TIMEOUT, self.fetch_once(key)).await {
            Ok(fetched) => fetched,
            Err(_) => Fetched::Failed(format!("no answer within {FETCH_TIMEOUT:?}")),
        }
    }

    async fn fetch_once(&self, (group, version): &GroupVersion) -> Fetched {
        let path = document_path(group, version);
        let body: UpstreamBody = Empty::new().map_err(|never| match never {}).boxed();
        let req = match Request::builder()
            .method(Method::GET)
            .uri(&path)
            .header(header::ACCEPT, "application/json")
            .body(body)
        {
            Ok(req) => req,
            // A group or version that makes no URI: nothing the upstream could serve.
            Err(_) => return Fetched::Answer(Found::default(), None),
        };
        let resp = match self.upstream.send(req).await {
            Ok(resp) => resp,
            Err(e) => return Fetched::Failed(e.to_string()),
        };
        // 404: the group-version is not served (never was, or its CRD was deleted).
        if resp.status() == StatusCode::NOT_FOUND {
            return Fetched::Answer(Found::default(), None);
        }
        // Anything else but 200 (5xx, 429, a 401/403 while credentials rotate) is no answer:
        // what was known stays in use.
        if resp.status() != StatusCode::OK {
            return Fetched::Failed(format!("upstream answered {}", resp.status()));
        }
        let bytes = match http_body_util::Limited::new(resp.into_body(), MAX_DISCOVERY_BYTES)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(e) => return Fetched::Failed(format!("reading the discovery document: {e}")),
        };
        match parse_resource_list(group, version, &bytes) {
            Some(found) => Fetched::Answer(Arc::new(found), Some(bytes)),
            None => Fetched::Failed("malformed discovery document".to_string()),
        }
    }
}

/// Where a group-version's discovery document is: `/api/v1` for the core group,
/// `/apis/{group}/{version}` for the others.
pub fn document_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// Drops one entry of a full map: the least recently used of those that serve nothing (unknown
/// group-versions, made-up paths), else the least recently used of all. An entry whose fetch
/// is under way is passed over when possible (its result would recreate it at once).
fn evict(map: &mut HashMap<GroupVersion, Slot>) {
    let idle = |s: &Slot| Arc::strong_count(&s.flight) == 1;
    let victim = map
        .iter()
        .filter(|(_, s)| s.serves_nothing() && idle(s))
        .min_by_key(|(_, s)| s.used)
        .or_else(|| map.iter().filter(|(_, s)| idle(s)).min_by_key(|(_, s)| s.used))
        .or_else(|| map.iter().min_by_key(|(_, s)| s.used))
        .map(|(k, _)| k.clone());
    if let Some(k) = victim {
        map.remove(&k);
    }
}

/// Parses an `APIResourceList`; subresources (`pods/status`) are not resources of their own.
/// `None` when the body is not one.
pub fn parse_resource_list(
    group: &str,
    version: &str,
    body: &[u8],
) -> Option<HashMap<String, Arc<ResourceInfo>>> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        resources: Vec<Res>,
    }
    #[derive(serde::Deserialize)]
    struct Res {
        name: String,
        #[serde(default)]
        kind: String,
        #[serde(default)]
        namespaced: bool,
        #[serde(default)]
        verbs: Vec<String>,
    }
    let list = serde_json::from_slice::<List>(body).ok()?;
    let found = list
        .resources
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| {
            let info = ResourceInfo {
                group: group.to_string(),
                version: version.to_string(),
                resource: r.name.clone(),
                kind: r.kind,
                namespaced: r.namespaced,
                verbs: r.verbs,
            };
            (r.name, Arc::new(info))
        })
        .collect();
    Some(found)
}

#[cfg(test)]
mod tests;
