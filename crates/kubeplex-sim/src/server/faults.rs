//! Faults the tests switch on through the `Sim` handle: a stall, throttling, slow lists and
//! slow reviews — each modelled on what a real kube-apiserver 1.36 did under load.

use std::sync::atomic::AtomicU32;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use crate::kinds::Kind;
use crate::wire::request::ListOptions;
use crate::wire::selector::FieldSelector;
use crate::wire::status::Status;

/// Injected faults, switched by tests through the `Sim` handle.
#[derive(Debug, Default)]
pub struct Faults {
    /// While set, every request waits before it is handled.
    pub stalled: watch::Sender<bool>,
    /// The next this-many resource requests are refused with 429 and `Retry-After`, as
    /// priority-and-fairness does under load.
    pub throttle: Mutex<Option<(u32, u32)>>,
    /// The next this-many TokenReviews and SubjectAccessReviews are refused with 429 and
    /// `Retry-After: 1`, as priority-and-fairness refuses them when a burst of reviews exceeds
    /// their flow's share (kube-apiserver 1.36 did so for a pool replica reviewing 1,000 node
    /// tiers that moved to it at once).
    pub throttle_reviews: AtomicU32,
    /// Lists and watches of a resource not pinned to one name, held this long before they are
    /// handled: a large resource's (kube-apiserver 1.36 took 1.6 s to list 100,000 ConfigMaps
    /// of ~1 KB, while a read of one of them took milliseconds). `(group, resource, delay)`.
    pub slow_wide_reads: Mutex<Option<(String, String, Duration)>>,
    /// TokenReviews and SubjectAccessReviews held this long before they are answered: an
    /// apiserver too busy to answer them in time (kube-apiserver 1.36 left ~31,000 reviews of
    /// 1,000 node tiers' kubelets unanswered for 10 s while they all started).
    pub slow_reviews: Mutex<Option<Duration>>,
    /// Resources whose watch cache is (re)initializing, `(group, resource)`: kube-apiserver
    /// 1.36's cacher after its own watch on etcd broke (`cacher.go`, with
    /// `ResilientWatchCacheInitialization`, on since 1.31) answers their watches, and lists at a
    /// resourceVersion, 429 `storage is (re)initializing` with `Retry-After`, while consistent
    /// lists and gets go to etcd. For as long as it lasts a client's watch of that resource
    /// cannot come back, whatever other resources do.
    pub reinitializing: Mutex<Vec<(String, String)>>,
    /// Custom resources whose storage is being set up again (a CRD's storage version or
    /// schema changed), until when: every request of them is answered 429 meanwhile.
    pub storage_initializing: Mutex<Vec<(String, String, std::time::Instant)>>,
}

impl Faults {
    /// Consumes one throttled request, if any are armed; returns its Retry-After.
    pub fn take_throttle(&self) -> Option<u32> {
        let mut t = self.throttle.lock().unwrap_or_else(|p| p.into_inner());
        match t.as_mut() {
            Some((left, retry_after)) if *left > 0 => {
                *left -= 1;
                let r = *retry_after;
                if *left == 0 {
                    *t = None;
                }
                Some(r)
            }
            _ => None,
        }
    }

    /// The 429 every request of a custom resource gets while its storage is set up again
    /// (`Sim::reinitialize_custom_resource_storage`): on kube-apiserver 1.36, for ~0.1 s after
    /// its CRD's storage version changed, a consistent list answered
    /// `429 storage is (re)initializing` with `retryAfterSeconds: 1`
    /// (tests/fixtures/realcluster/custom/lifecycle.storage.reads).
    pub fn storage_initializing(&self, kind: &Kind) -> Option<Status> {
        let mut unready = self.storage_initializing.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        unready.retain(|(_, _, until)| *until > now);
        unready
            .iter()
            .any(|(g, r, _)| {
                (g.as_str(), r.as_str()) == (kind.group.as_str(), kind.resource.as_str())
            })
            .then(|| Status::too_many_requests_because("storage is (re)initializing", 1))
    }

    /// The 429 a watch of `kind`, or a list of it at a resourceVersion, gets while its watch
    /// cache is (re)initializing (`Faults::reinitializing`); `None` when it is served.
    pub fn unready_cache(&self, kind: &Kind, opts: &ListOptions) -> Option<Status> {
        let unready = self.reinitializing.lock().unwrap_or_else(|p| p.into_inner());
        let hit = unready.iter().any(|(g, r)| {
            (g.as_str(), r.as_str()) == (kind.group.as_str(), kind.resource.as_str())
        });
        let at_rv = opts.resource_version.as_deref().is_some_and(|rv| !rv.is_empty());
        // `errors.NewTooManyRequests(err.Error(), calculateRetryAfterForUnreadyCache(..))`: 1 s
        // for a cache down a few seconds (`exp(0.06 × downtime)`, at least 1).
        (hit && (opts.watch || at_rv))
            .then(|| Status::too_many_requests_because("storage is (re)initializing", 1))
    }

    /// How long a list or watch of `kind` waits under the slow-wide-reads fault: not at all
    /// when it is pinned to one name by a `metadata.name=` field selector.
    pub fn wide_read_delay(&self, kind: &Kind, opts: &ListOptions) -> Option<Duration> {
        let fault = self.slow_wide_reads.lock().unwrap_or_else(|p| p.into_inner());
        let (group, resource, delay) = fault.as_ref()?;
        if (group.as_str(), resource.as_str()) != (kind.group.as_str(), kind.resource.as_str()) {
            return None;
        }
        let named = opts
            .field_selector
            .as_deref()
            .and_then(|s| FieldSelector::parse(s).ok())
            .is_some_and(|f| f.exact_value("metadata.name").is_some_and(|n| !n.is_empty()));
        (!named).then_some(*delay)
    }
}
