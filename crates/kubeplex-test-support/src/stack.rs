//! A fake apiserver with kubeplex in front of it, for the proxy's tests.

use std::time::Duration;

use kubeplex::cache::fanout::WatchConfig;
use kubeplex::cache::store::StoreLimits;
use kubeplex::live::caches::{CachesConfig, FreshnessConfig};
use kubeplex::live::discovery::DISCOVERY_TTL;
use kubeplex::serve::Proxy;
use kubeplex::upstream::{Upstream, UpstreamConfig};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};

use crate::get;

pub struct Stack {
    pub sim: Sim,
    /// The kubeplex clients talk to.
    pub proxy: Proxy,
    /// With `KUBEPLEX_TEST_TIERS=2`: the kubeplex between `proxy` and the fake apiserver (the
    /// pool tier of issue 21), with the same settings; the tests then run through two tiers.
    pub behind: Option<Proxy>,
    pub dir: std::path::PathBuf,
}

/// `KUBEPLEX_TEST_TIERS=2`: every [`Stack`] is two chained kubeplexes in front of the fake
/// apiserver, so that the suites comparing kubeplex's answers with the apiserver's run
/// unchanged through two tiers (`scripts/test-tiers.sh`).
pub fn tiers() -> usize {
    std::env::var("KUBEPLEX_TEST_TIERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Stack {
    pub async fn new(shape: ClusterShape, preload: &[&str]) -> Stack {
        Self::with_sim(SimBuilder::new(), shape, preload).await
    }

    pub async fn with_sim(builder: SimBuilder, shape: ClusterShape, preload: &[&str]) -> Stack {
        Self::build(builder, shape, preload, Duration::from_secs(600)).await
    }

    /// With caches stopped after `idle` without readers.
    pub async fn build(
        builder: SimBuilder,
        shape: ClusterShape,
        preload: &[&str],
        idle: Duration,
    ) -> Stack {
        Self::build_with(builder, shape, preload, idle, WatchConfig::default()).await
    }

    /// With the watch fan-out tuned by `watch`.
    pub async fn build_with(
        builder: SimBuilder,
        shape: ClusterShape,
        preload: &[&str],
        idle: Duration,
        watch: WatchConfig,
    ) -> Stack {
        Self::build_full(builder, shape, preload, idle, watch, FreshnessConfig::default()).await
    }

    /// With the fan-out tuned by `watch` and the cold-start and freshness waits by `freshness`.
    pub async fn build_full(
        builder: SimBuilder,
        shape: ClusterShape,
        preload: &[&str],
        idle: Duration,
        watch: WatchConfig,
        freshness: FreshnessConfig,
    ) -> Stack {
        Self::build_discovery(builder, shape, preload, idle, watch, freshness, DISCOVERY_TTL).await
    }

    /// [`Stack::build_full`] with discovery answers refreshed after `discovery_ttl` (and kept
    /// while refreshing them fails): outage tests use a short one.
    pub async fn build_discovery(
        builder: SimBuilder,
        shape: ClusterShape,
        preload: &[&str],
        idle: Duration,
        watch: WatchConfig,
        freshness: FreshnessConfig,
        discovery_ttl: Duration,
    ) -> Stack {
        let caches = CachesConfig {
            idle_timeout: idle,
            watch,
            freshness,
            discovery_ttl,
            ..default_caches(preload)
        };
        Self::with_caches(builder, shape, caches).await
    }

    /// The fake apiserver seeded with `shape`, and kubeplex with `caches`.
    pub async fn with_caches(
        builder: SimBuilder,
        shape: ClusterShape,
        caches: CachesConfig,
    ) -> Stack {
        let sim = builder.seed(seed::cluster(shape)).start().await.expect("sim");
        let dir = std::env::temp_dir().join(format!(
            "kubeplex-proxy-{}-{}",
            std::process::id(),
            sim.addr().port()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let kc = dir.join("upstream.kubeconfig");
        sim.write_kubeconfig(&kc).expect("kubeconfig");
        let behind = match tiers() {
            2 => {
                let proxy = start_proxy(&kc, caches.clone()).await;
                wait_ready(&proxy).await;
                let front = dir.join("behind.kubeconfig");
                let url = format!("http://{}", proxy.addr);
                std::fs::write(&front, kubeplex_sim::kubeconfig_for(&url, "behind"))
                    .expect("kubeconfig");
                Some((proxy, front))
            }
            _ => None,
        };
        let proxy = start_proxy(behind.as_ref().map_or(&kc, |(_, front)| front), caches).await;
        let stack = Stack { sim, proxy, behind: behind.map(|(p, _)| p), dir };
        stack.wait_ready().await;
        stack
    }

    pub fn addr(&self) -> String {
        self.proxy.addr.to_string()
    }

    pub fn upstream(&self) -> String {
        self.sim.addr().to_string()
    }

    pub async fn wait_ready(&self) {
        wait_ready(&self.proxy).await;
    }

    /// kubeplex's metrics as scraped from its admin listener.
    pub async fn metrics_text(&self) -> String {
        let admin = self.proxy.admin_addr.expect("admin").to_string();
        String::from_utf8_lossy(&get(&admin, "/metrics").await.body).into_owned()
    }

    /// The value of one series of kubeplex's metrics (`name{labels}` as scraped), 0 if absent.
    pub async fn metric(&self, series: &str) -> u64 {
        let text = self.metrics_text().await;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0)
    }

    /// A kubeplex metric summed over every series whose labels include all of `labels`
    /// (`source="cache"` and the like).
    pub async fn metric_sum(&self, name: &str, labels: &[&str]) -> u64 {
        let text = self.metrics_text().await;
        let prefix = format!("{name}{{");
        text.lines()
            .filter(|l| l.starts_with(&prefix) && labels.iter().all(|x| l.contains(x)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// `kubeplex_requests_total` for a source and verb (`LIST`, `GET`, `WATCH`), summed.
    pub async fn served_verb_from(&self, verb: &str, source: &str) -> u64 {
        let (verb, source) = (format!("verb=\"{verb}\""), format!("source=\"{source}\""));
        self.metric_sum("kubeplex_requests_total", &[&verb, &source]).await
    }

    /// `kubeplex_requests_total` for a source, summed.
    pub async fn served_from(&self, source: &str) -> u64 {
        let source = format!("source=\"{source}\"");
        self.metric_sum("kubeplex_requests_total", &[&source]).await
    }

    /// The fake apiserver's own count of successful `verb` requests for pods (a refused
    /// streaming-list attempt is not a list).
    pub fn upstream_calls(&self, verb: &str) -> u64 {
        self.upstream_calls_of("pods", verb)
    }

    /// The fake apiserver's own count of successful `verb` requests for a resource.
    pub fn upstream_calls_of(&self, resource: &str, verb: &str) -> u64 {
        self.sim
            .metrics_text()
            .lines()
            .filter(|l| {
                l.starts_with("apiserver_request_total{code=\"200\"")
                    && l.contains(&format!("resource=\"{resource}\""))
                    && l.contains(&format!("verb=\"{verb}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

/// kubeplex with `caches` in front of the server `kubeconfig` names, admin endpoints on.
pub async fn start_proxy(kubeconfig: &std::path::Path, caches: CachesConfig) -> Proxy {
    let config = UpstreamConfig::resolve(Some(kubeconfig), None).expect("config");
    let upstream = Upstream::new(config).expect("client");
    Proxy::builder(upstream, caches)
        .admin("127.0.0.1:0".parse().expect("addr"))
        .start()
        .await
        .expect("proxy")
}

/// `proxy`'s caches (`/debug/caches`) once every one has synced, or as they are after ~5 s: a
/// cache fed by the read that started it takes its state once its own watch is answered, a
/// moment after that read's answer.
pub async fn caches_once_synced(proxy: &Proxy) -> Vec<serde_json::Value> {
    let admin = proxy.admin_addr.expect("admin").to_string();
    let mut caches = Vec::new();
    for _ in 0..100 {
        let debug = get(&admin, "/debug/caches").await.json();
        caches = debug["caches"].as_array().cloned().unwrap_or_default();
        if !caches.is_empty() && caches.iter().all(|c| c["synced"] == true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    caches
}

/// Waits (bounded) until `proxy`'s `/readyz` answers 200.
pub async fn wait_ready(proxy: &Proxy) {
    let admin = proxy.admin_addr.expect("admin").to_string();
    for _ in 0..200 {
        if get(&admin, "/readyz").await.status == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "kubeplex never became ready: {}",
        String::from_utf8_lossy(&get(&admin, "/readyz").await.body)
    );
}

impl Stack {
    /// Moves the cluster's RV on with writes to another resource (three Secrets in `team-1`,
    /// named after `tag`), so that quiet resources' caches lag the upstream's RV. Returns the
    /// upstream's RV after them.
    pub fn move_cluster_on(&self, tag: &str) -> u64 {
        for i in 0..3 {
            let secret = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": format!("{tag}-{i}"), "namespace": "team-1"},
            });
            self.sim.create(secret).expect("secret");
        }
        self.sim.current_rv()
    }

    /// A kubeconfig for clients of kubeplex (no credentials: kubeplex's own identity).
    pub fn write_client_kubeconfig(&self) -> std::path::PathBuf {
        let path = self.dir.join("kubeplex.kubeconfig");
        std::fs::write(
            &path,
            kubeplex_sim::kubeconfig_for(&format!("http://{}", self.proxy.addr), "kubeplex"),
        )
        .expect("kubeconfig");
        path
    }
}

/// The caches' settings the tests start kubeplex with: `preload` started at once, the rest
/// the defaults.
pub fn default_caches(preload: &[&str]) -> CachesConfig {
    CachesConfig {
        limits: StoreLimits { max_snapshots: 1000, max_snapshot_age: Duration::from_secs(300) },
        idle_timeout: Duration::from_secs(600),
        preload: preload.iter().map(|s| s.to_string()).collect(),
        scopes: Vec::new(),
        watch: WatchConfig::default(),
        freshness: FreshnessConfig::default(),
        discovery_ttl: kubeplex::live::discovery::DISCOVERY_TTL,
        disk: Default::default(),
        memory_budget: None,
        namespace: None,
    }
}
