//! How the fake apiserver's Node authorizer graph lags the store (measured on the real one).

use std::time::Duration;

/// How the Node authorizer's graph lags the store, pod by pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphLag {
    /// Every pod's binding reaches the graph `node_graph_lag` after it was written.
    Fixed,
    /// Each pod's lag is drawn, by its key, from [`MEASURED_GRAPH_LAG`] scaled to
    /// `node_graph_lag`.
    Measured,
}

/// The Node authorizer's lag behind a binding on a real kube-apiserver 1.36 carrying 10 hollow
/// nodes' kubelets and kube-proxies and 200 pods of churn on 2 cores, as fractions of the
/// largest seen: `(q, lag)` — a share `q` of the bindings reach the graph within `lag` (a
/// fraction of `node_graph_lag`), linear in between. The kubelet GETs a new pod ~3 ms after
/// its watch brings it (kubelet logs), and about three pods in four are granted at that first
/// read: here those lag not at all. The rest spread up to about a second (median 0.3 s of the
/// refusals kubelets met). Idle, the graph has every binding within ~25 ms
/// (`scripts/realcluster/graph-lag.py`).
pub const MEASURED_GRAPH_LAG: &[(f64, f64)] =
    &[(0.0, 0.0), (0.72, 0.0), (0.80, 0.12), (0.90, 0.33), (0.97, 0.66), (1.0, 1.0)];

/// The lag of the graph behind the pod `key` (`namespace/name`) under `spread`, at most `max`.
pub fn pod_graph_lag(spread: GraphLag, max: Duration, key: &str) -> Duration {
    match spread {
        GraphLag::Fixed => max,
        GraphLag::Measured => {
            // FNV-1a, then SplitMix64's finalizer to spread similar keys: the same pod always
            // draws the same lag.
            let mut hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            hash ^= hash >> 31;
            let q = (hash >> 11) as f64 / (1u64 << 53) as f64;
            let fraction = MEASURED_GRAPH_LAG.windows(2).find(|w| q <= w[1].0).map_or(1.0, |w| {
                let ((q0, l0), (q1, l1)) = (w[0], w[1]);
                l0 + (l1 - l0) * (q - q0) / (q1 - q0).max(f64::EPSILON)
            });
            max.mul_f64(fraction.clamp(0.0, 1.0))
        }
    }
}
