//! What a run's clients share: their counts by class, the writes they made, when each pod was
//! bound (for the kubelet's latency), and every informer whose view is checked at the end.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::time::Instant;

use crate::hist::Histogram;
use crate::informer::{Tally, Watched};

/// Successful and failed requests of one kind of write (or named read).
#[derive(Default)]
pub struct Outcomes {
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    /// Answered 403 (counted in `failed` too unless a retry then succeeded).
    pub refused: AtomicU64,
}

impl Outcomes {
    pub fn record(&self, ok: bool) {
        let counter = if ok { &self.ok } else { &self.failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn report(&self) -> OutcomeReport {
        OutcomeReport {
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct OutcomeReport {
    pub ok: u64,
    pub failed: u64,
    pub refused: u64,
}

/// The agents' writes and named reads.
#[derive(Default)]
pub struct Writes {
    /// The kubelet's Lease: its create, then an update every 10 s.
    pub lease: Outcomes,
    /// `PATCH nodes/NODE/status`.
    pub node_status: Outcomes,
    /// The status manager's consistent GET of a pod before each status patch.
    pub pod_get: Outcomes,
    /// `PATCH pods/NAME/status`.
    pub pod_status: Outcomes,
    /// `POST events`.
    pub events: Outcomes,
    /// A new pod's ConfigMaps and Secrets read (their watches synced) in time.
    pub pod_sources: Outcomes,
    /// The log agent's GET of each new pod.
    pub log_agent_get: Outcomes,
}

/// One class of informers (a resource read one way by one agent on every node).
pub struct Class {
    pub name: &'static str,
    pub clients: AtomicU64,
    pub tally: Arc<Tally>,
}

pub struct Shared {
    /// The run's start: every sync time is measured from it.
    pub since: Instant,
    classes: Mutex<BTreeMap<&'static str, Arc<Class>>>,
    pub writes: Writes,
    /// When each pod was bound (`namespace/name`), until its kubelet sees it.
    pub bound: Mutex<HashMap<String, Instant>>,
    /// Binding → the kubelet's informer holds the pod.
    pub binding_latency: Mutex<Histogram>,
    /// Binding → the kubelet reported the pod Running (its ConfigMaps and Secrets read, its
    /// container started).
    pub pod_start: Mutex<Histogram>,
    /// The kubelet saw a new pod → its status manager's first status write for it.
    pub first_status: Mutex<Histogram>,
    /// Every informer open now whose view is compared with the apiserver's at the end.
    views: Mutex<BTreeMap<u64, (&'static str, Arc<Watched>)>>,
    next_view: AtomicU64,
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared {
            since: Instant::now(),
            classes: Mutex::new(BTreeMap::new()),
            writes: Writes::default(),
            bound: Mutex::new(HashMap::new()),
            binding_latency: Mutex::new(Histogram::default()),
            pod_start: Mutex::new(Histogram::default()),
            first_status: Mutex::new(Histogram::default()),
            views: Mutex::new(BTreeMap::new()),
            next_view: AtomicU64::new(0),
        })
    }

    /// The class `name`, with one more client.
    pub fn join(&self, name: &'static str) -> Arc<Class> {
        let mut classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        let class = classes
            .entry(name)
            .or_insert_with(|| {
                Arc::new(Class {
                    name,
                    clients: AtomicU64::new(0),
                    tally: Arc::new(Tally::default()),
                })
            })
            .clone();
        class.clients.fetch_add(1, Ordering::Relaxed);
        class
    }

    /// One client of class `name` stopped before it synced, on purpose.
    pub fn abandon(&self, name: &'static str) {
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(class) = classes.get(name) {
            class.clients.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Clients of class `name` that have synced.
    pub fn synced(&self, name: &str) -> u64 {
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        classes.get(name).map_or(0, |c| c.tally.synced.load(Ordering::Relaxed))
    }

    /// Whether every client of every class but `except` has synced.
    pub fn all_synced_but(&self, except: &str) -> bool {
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        classes
            .values()
            .filter(|c| c.name != except)
            .all(|c| c.tally.synced.load(Ordering::Relaxed) >= c.clients.load(Ordering::Relaxed))
    }

    pub fn classes(&self) -> Vec<Arc<Class>> {
        self.classes.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// Registers an informer for the final comparison; its id, to [`Shared::forget`] it.
    pub fn watch_view(&self, class: &'static str, w: Arc<Watched>) -> u64 {
        let id = self.next_view.fetch_add(1, Ordering::Relaxed);
        self.views.lock().unwrap_or_else(|p| p.into_inner()).insert(id, (class, w));
        id
    }

    /// An informer stopped (the kubelet's watch of a ConfigMap no pod of it uses any more).
    pub fn forget(&self, id: u64) {
        self.views.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }

    pub fn views(&self) -> Vec<(&'static str, Arc<Watched>)> {
        self.views.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// A pod was bound just now.
    pub fn bound(&self, key: String) {
        self.bound.lock().unwrap_or_else(|p| p.into_inner()).insert(key, Instant::now());
    }

    /// A kubelet's informer now holds pod `key`: the binding latency, for a pod bound during the
    /// run; when it was bound.
    pub fn seen(&self, key: &str) -> Option<Instant> {
        let at = self.bound.lock().unwrap_or_else(|p| p.into_inner()).remove(key)?;
        self.binding_latency.lock().unwrap_or_else(|p| p.into_inner()).record(at.elapsed());
        Some(at)
    }

    /// A kubelet that saw a new pod at `seen` wrote its first status just now.
    pub fn first_status(&self, seen: Instant) {
        self.first_status.lock().unwrap_or_else(|p| p.into_inner()).record(seen.elapsed());
    }

    /// Pod bound at `at` has been reported Running by its kubelet.
    pub fn started(&self, at: Instant) {
        self.pod_start.lock().unwrap_or_else(|p| p.into_inner()).record(at.elapsed());
    }
}
