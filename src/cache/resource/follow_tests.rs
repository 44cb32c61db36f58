//! Clients that watch a cache as client-go does — resuming from the last RV they saw when a
//! stream ends, listing again on 410 — while the upstream writes, the cache's watch delivers
//! or misses those writes, and relists close the gaps. Whatever happens, each client ends
//! holding exactly the upstream's state, having seen no RV twice or backwards in a stream: no
//! event lost (the soak's lost deletions, 5a9c431), none invented. Clients may start ahead of
//! the cache (with a state at an RV they got elsewhere, as a node tier back from a failover).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::cache::fanout::{Filter, Next};
use crate::cache::testutil::{cm, configmaps_info};

/// What happens next.
#[derive(Debug, Clone)]
enum Step {
    /// The upstream writes object `i` (or deletes it); each write is an etcd revision.
    Put(u8),
    Delete(u8),
    /// Another resource's write: the revision moves.
    Elsewhere,
    /// The cache's watch delivers every write so far.
    Deliver,
    /// The cache's watch missed the writes so far; it relists at the upstream's revision.
    Relist,
    /// Client `c` reads what is queued for it (resuming or listing again as needed).
    Poll(u8),
    /// Client `c` starts over with the upstream's state at its current revision, ahead of the
    /// cache if the cache is behind, and watches the cache from there.
    Ahead(u8),
    /// Client `c` starts over with the cache's state, which a proof showed to be the upstream's
    /// at its current revision (possible when the cache missed no write of its own:
    /// `WatchFrom::StateAhead`).
    Proven(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..5u8).prop_map(Step::Put),
        2 => (0..5u8).prop_map(Step::Delete),
        1 => Just(Step::Elsewhere),
        2 => Just(Step::Deliver),
        1 => Just(Step::Relist),
        3 => (0..3u8).prop_map(Step::Poll),
        1 => (0..3u8).prop_map(Step::Ahead),
        1 => (0..3u8).prop_map(Step::Proven),
    ]
}

type State = BTreeMap<String, u64>;

/// The upstream: its objects, revision, and the changes its cache's watch has not delivered.
struct Upstream {
    state: State,
    rv: u64,
    pending: Vec<(EventKind, String, u64)>,
}

impl Upstream {
    fn write(&mut self, step: &Step) {
        match step {
            Step::Put(i) => {
                self.rv += 1;
                let name = format!("o{i}");
                let kind = match self.state.insert(name.clone(), self.rv) {
                    Some(_) => EventKind::Modified,
                    None => EventKind::Added,
                };
                self.pending.push((kind, name, self.rv));
            }
            Step::Delete(i) => {
                let name = format!("o{i}");
                if self.state.remove(&name).is_some() {
                    self.rv += 1;
                    self.pending.push((EventKind::Deleted, name, self.rv));
                }
            }
            Step::Elsewhere => self.rv += 1,
            _ => {}
        }
    }

    fn objects(&self) -> Vec<CachedObject> {
        self.state.iter().map(|(n, rv)| (*cm("a", n, *rv, &[])).clone()).collect()
    }
}

/// A client: what it holds, the watch it reads, and the RV it has seen up to.
struct Client {
    held: State,
    reg: Option<Registration>,
    last: u64,
    violations: Vec<String>,
}

impl Client {
    fn start(cache: &ResourceCache) -> Client {
        let mut c = Client { held: State::new(), reg: None, last: 0, violations: Vec::new() };
        c.list(cache);
        c
    }

    /// Lists (the cache's state) and watches from it.
    fn list(&mut self, cache: &ResourceCache) {
        self.watch_state(cache, WatchFrom::State);
    }

    /// Holds the state a watch starts with, and reads the watch.
    fn watch_state(&mut self, cache: &ResourceCache, from: WatchFrom) {
        let reg = cache.register_watch(from, Filter::default(), false).expect("state");
        let initial = reg.initial.as_ref().expect("a state");
        self.held = initial
            .items()
            .values()
            .map(|o| (o.key.trim_start_matches("a/").to_string(), o.resource_version))
            .collect();
        self.last = reg.position;
        self.reg = Some(reg);
    }

    /// Holds `state` at `rv` (read elsewhere) and watches the cache after `rv`.
    fn ahead(&mut self, cache: &ResourceCache, state: State, rv: u64) {
        self.held = state;
        self.last = rv;
        self.resume(cache);
    }

    /// Lists the cache's state, shown to be the upstream's at `rv`, and watches after `rv`.
    fn proven(&mut self, cache: &ResourceCache, rv: u64) {
        let cache_at = cache.read().resource_version();
        self.watch_state(cache, WatchFrom::StateAhead { rv, cache_at });
    }

    /// Ends its watch (it starts over).
    fn stop(&mut self, cache: &ResourceCache) {
        if let Some(reg) = self.reg.take() {
            cache.unregister_watch(reg.id);
        }
    }

    fn resume(&mut self, cache: &ResourceCache) {
        match cache.register_watch(WatchFrom::After(self.last), Filter::default(), false) {
            Ok(reg) => self.reg = Some(reg),
            // 410: list again.
            Err(_) => self.list(cache),
        }
    }

    /// Reads everything queued; resumes a stream that ended. Returns whether anything moved.
    fn poll(&mut self, cache: &ResourceCache) -> bool {
        let Some(reg) = &self.reg else { return false };
        match reg.queue.take(usize::MAX, futures_util::task::noop_waker_ref()) {
            Next::Frames(frames) => {
                for q in frames {
                    self.apply(&q.frame);
                }
                true
            }
            Next::Closed(_) => {
                cache.unregister_watch(reg.id);
                self.resume(cache);
                true
            }
            Next::Empty => false,
        }
    }

    fn apply(&mut self, frame: &[u8]) {
        let e: serde_json::Value = serde_json::from_slice(frame).expect("a JSON event");
        let name = e["object"]["metadata"]["name"].as_str().expect("name").to_string();
        let rv: u64 = e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("rv");
        if rv <= self.last {
            self.violations.push(format!("{} {name}@{rv} after {}", e["type"], self.last));
        }
        self.last = self.last.max(rv);
        match e["type"].as_str() {
            Some("DELETED") => {
                self.held.remove(&name);
            }
            _ => {
                self.held.insert(name, rv);
            }
        }
    }
}

fn cache() -> ResourceCache {
    let metrics = Metrics::new(&prometheus::Registry::new()).unwrap();
    ResourceCache::new(
        configmaps_info(),
        Encoding::Json,
        StoreLimits::default(),
        WatchConfig::default(),
        metrics,
    )
}

fn deliver(cache: &ResourceCache, upstream: &mut Upstream) {
    for (kind, name, rv) in upstream.pending.drain(..) {
        cache.apply(kind, (*cm("a", &name, rv, &[])).clone());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn clients_following_a_cache_through_relists_end_at_the_upstreams_state(
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let mut upstream = Upstream { state: State::new(), rv: 1, pending: Vec::new() };
        let cache = cache();
        cache.replace(Vec::new(), upstream.rv);
        let mut clients: Vec<Client> = (0..3).map(|_| Client::start(&cache)).collect();
        // The upstream's state at each revision, for clients that read it elsewhere.
        for step in &steps {
            match step {
                Step::Put(_) | Step::Delete(_) | Step::Elsewhere => upstream.write(step),
                Step::Deliver => deliver(&cache, &mut upstream),
                Step::Relist => {
                    upstream.pending.clear();
                    cache.replace(upstream.objects(), upstream.rv);
                }
                Step::Poll(c) => {
                    clients[*c as usize].poll(&cache);
                }
                Step::Ahead(c) => {
                    let c = &mut clients[*c as usize];
                    c.stop(&cache);
                    c.ahead(&cache, upstream.state.clone(), upstream.rv);
                }
                Step::Proven(c) if upstream.pending.is_empty() => {
                    let c = &mut clients[*c as usize];
                    c.stop(&cache);
                    c.proven(&cache, upstream.rv);
                }
                Step::Proven(_) => {}
            }
        }
        deliver(&cache, &mut upstream);
        for (i, c) in clients.iter_mut().enumerate() {
            let mut rounds = 0;
            while c.poll(&cache) {
                rounds += 1;
                prop_assert!(rounds < 100, "client {i} never settles");
            }
            prop_assert!(c.violations.is_empty(), "client {i}: {:?}", c.violations);
            prop_assert_eq!(&c.held, &upstream.state, "client {}", i);
        }
    }
}
