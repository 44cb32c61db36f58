//! The node-local mode's test cluster: the fake apiserver with RBAC, the Node authorizer,
//! TokenReview and SubjectAccessReview, and kubeplex in front of it with `--mode node` (TLS, a
//! cluster CA that signs its serving certificate and the clients' certificates).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubeplex::auth::ReviewConfig;
use kubeplex::live::caches::CachesConfig;
use kubeplex::live::disk::DiskConfig;
use kubeplex::serve::{Mode, NodeConfig, Proxy};
use kubeplex::upstream::{PreferredServer, ServerUrl, Upstream, UpstreamConfig};
use kubeplex_sim::auth::{Auth, Rule, Subject, UserInfo};
use kubeplex_sim::seed::{self, ClusterShape};
use kubeplex_sim::{Sim, SimBuilder};

use base64::Engine;
use serde_json::{json, Value};

use crate::stack::wait_ready;
use crate::tls::{Issued, Pki, TlsFront};

pub const KUBEPLEX_TOKEN: &str = "kubeplex-sa-token";
pub const READER_TOKEN: &str = "reader-sa-token";
pub const NOBODY_TOKEN: &str = "nobody-token";
pub const ADMIN_TOKEN: &str = "admin-token";
pub const VIEWER_TOKEN: &str = "viewer-token";
/// A node tier's credential: the token of the ServiceAccount `kube-system/kubeplex-node`,
/// bound to its pod on node-0 (`BOUND_NODE`).
pub const NODE_TIER_TOKEN: &str = "node-tier-token";
pub const NODE_TIER_ACCOUNT: &str = "kubeplex-node";
/// The node a node tier in front of a pool runs on.
pub const BOUND_NODE: &str = "node-0";

/// The group of the node tiers' client certificate a pool tier authenticates (`deploy/`'s
/// RBAC binds kubeplex's roles to it).
pub const NODE_TIERS_GROUP: &str = "kubeplex:node-tiers";

/// The cluster's identities: kubeplex's ServiceAccount, a namespace-scoped reader, a
/// cluster-wide viewer, a token with no rights, an admin (`system:masters`); the node tiers'
/// certificate group has kubeplex's roles (reads, reviews, impersonation), as deploy/ binds.
pub fn policy() -> Auth {
    // A namespace-scoped reader: configmaps and pods of team-0 only.
    policy_without_reader_grant().grant(
        Subject::service_account("team-0", "reader"),
        Some("team-0"),
        vec![Rule::read(&[""], &["configmaps", "pods"])],
    )
}

/// [`policy`] after the reader's RoleBinding was deleted (a revocation).
pub fn policy_without_reader_grant() -> Auth {
    Auth::new()
        .proxy_service_account(
            KUBEPLEX_TOKEN,
            "kube-system",
            "kubeplex",
            vec![Rule::read(
                &[""],
                &["pods", "configmaps", "nodes", "namespaces", "serviceaccounts"],
            )],
        )
        .service_account_token(READER_TOKEN, "team-0", "reader")
        // A cluster-wide reader of pods and configmaps (a ClusterRole).
        .token(VIEWER_TOKEN, UserInfo::new("viewer"))
        .grant(Subject::user("viewer"), None, vec![Rule::read(&[""], &["configmaps", "pods"])])
        // Authenticated, with no rights at all.
        .token(NOBODY_TOKEN, UserInfo::new("nobody"))
        .token(ADMIN_TOKEN, UserInfo::new("admin").with_group("system:masters"))
        .bound_service_account_token(
            NODE_TIER_TOKEN,
            "kube-system",
            NODE_TIER_ACCOUNT,
            "kubeplex-node-0",
            BOUND_NODE,
        )
        .cluster_role_binding(
            "node-tier-reads",
            "kubeplex",
            vec![Subject::service_account("kube-system", NODE_TIER_ACCOUNT)],
        )
        .cluster_role_binding(
            "node-tier-auth-delegator",
            "system:auth-delegator",
            vec![Subject::service_account("kube-system", NODE_TIER_ACCOUNT)],
        )
        .grant(
            Subject::service_account("kube-system", NODE_TIER_ACCOUNT),
            None,
            associated_node_impersonation(),
        )
        .cluster_role_binding("node-tiers", "kubeplex", vec![Subject::group(NODE_TIERS_GROUP)])
        .cluster_role_binding(
            "node-tiers-auth-delegator",
            "system:auth-delegator",
            vec![Subject::group(NODE_TIERS_GROUP)],
        )
        .cluster_role_binding(
            "node-tiers-impersonator",
            "kubeplex-impersonator",
            vec![Subject::group(NODE_TIERS_GROUP)],
        )
}

/// The node tier's pod, `kube-system/kubeplex-node-0` on node-0 with the ServiceAccount
/// `kube-system/kubeplex-node`, created in `sim`, and a token bound to it as the kubelet
/// projects one: signed by the fake apiserver, naming the pod and node-0.
pub fn signed_node_tier_token(sim: &Sim) -> String {
    sim.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": NODE_TIER_ACCOUNT, "namespace": "kube-system"}}))
        .expect("the node tiers' ServiceAccount");
    sim.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kubeplex-node-0", "namespace": "kube-system"},
        "spec": {"nodeName": BOUND_NODE, "serviceAccountName": NODE_TIER_ACCOUNT,
            "containers": [{"name": "kubeplex", "image": "kubeplex:latest"}]}}))
        .expect("the node tier's pod");
    sim.issue_bound_token("kube-system", NODE_TIER_ACCOUNT, "kubeplex-node-0").expect("a token")
}

/// The rules that let a ServiceAccount bound to a node act as that node and no other
/// (kube-apiserver 1.36's constrained impersonation, as `deploy/base/node` grants the node tier):
/// `impersonate:associated-node` on `nodes`, and `impersonate-on:associated-node:VERB` on every
/// resource (and `get` on every path) for what a kubelet does.
pub fn associated_node_impersonation() -> Vec<Rule> {
    let verbs: Vec<String> = ["get", "list", "watch", "create", "update", "patch", "delete"]
        .iter()
        .map(|v| format!("impersonate-on:associated-node:{v}"))
        .collect();
    let verbs: Vec<&str> = verbs.iter().map(String::as_str).collect();
    vec![
        Rule::new(&["impersonate:associated-node"], &["authentication.k8s.io"], &["nodes"]),
        Rule::new(&verbs, &["*"], &["*"]),
        // Discovery documents the kubelet's clients read.
        Rule::non_resource(&["impersonate-on:associated-node:get"], &["*"]),
    ]
}

/// kubeplex in node mode with the files [`Node::start_with`] wrote in `dir`; with `pool`, its
/// first upstream is that pool tier. A node tier in front of a pool is bound to its node, as
/// `deploy/overlays/pool` runs it: its credential is a ServiceAccount token bound to a pod on
/// node-0 (for the pool and, when it falls back, the apiserver alike), and it acts only as
/// node-0 (`nodeImpersonation: associated-node`).
async fn start_proxy(dir: &Path, options: &NodeOptions, pool: Option<SocketAddr>) -> Proxy {
    let kubeconfig = match pool {
        Some(_) => dir.join("node-tier.kubeconfig"),
        None => dir.join("upstream.kubeconfig"),
    };
    let mut config = UpstreamConfig::resolve(Some(&kubeconfig), None).unwrap();
    if let Some(pool) = pool {
        config = config.with_preferred(vec![PreferredServer {
            server: ServerUrl::parse(&format!("https://{pool}"), true).unwrap(),
            ca_pem: Some(std::fs::read(dir.join("client-ca.crt")).unwrap()),
            client_cert: None,
        }]);
    }
    let upstream = Upstream::new(config).unwrap();
    let caches = CachesConfig {
        preload: options.caches.clone(),
        discovery_ttl: options.discovery_ttl,
        disk: options.disk.clone(),
        ..crate::stack::default_caches(&[])
    };
    let tls = kubeplex_net::TlsConfig::new(dir.join("serving.crt"), dir.join("serving.key"))
        .with_client_ca(dir.join("client-ca.crt"));
    let mode = Mode::Node(Box::new(NodeConfig {
        tls,
        anonymous: true,
        reviews: options.reviews,
        graph_lag: options.graph_lag,
        node_authorizer: options.node_authorizer,
        authorizers_grant_whole: options.authorizers_grant_whole,
        bound_node: pool.map(|_| BOUND_NODE.to_string()),
        verify_service_account_tokens: options.verify_service_account_tokens,
    }));
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    Proxy::builder(upstream, caches).listen(local).admin(local).mode(mode).start().await.unwrap()
}

/// With `KUBEPLEX_TEST_TIERS=2`: a pool tier (kubeplex in node mode, with the same settings
/// and files) in front of the fake apiserver, which node tiers authenticate to with a
/// node-bound token ([`NODE_TIER_TOKEN`]), and its address.
async fn start_pool(dir: &Path, options: &NodeOptions) -> Option<Proxy> {
    if crate::stack::tiers() != 2 && !options.pool {
        return None;
    }

    let options = NodeOptions { disk: DiskConfig::default(), ..options.clone() };
    let pool = start_proxy(dir, &options, None).await;
    wait_ready(&pool).await;
    Some(pool)
}

/// The cluster [`Node::start`] seeds: 3 nodes, namespaces team-0..2, 30 pods, 12 configmaps.
pub const SHAPE: ClusterShape =
    ClusterShape { nodes: 3, namespaces: 3, pods: 30, configmaps: 12, services: 0 };

/// kubeplex's settings in a [`Node`].
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub reviews: ReviewConfig,
    /// `nodeGraphLag` (the product's default: 1.5 s).
    pub graph_lag: Duration,
    /// How far the fake apiserver's Node authorizer lags its store (its default: 900 ms, the
    /// most measured on 1.36).
    pub apiserver_graph_lag: Duration,
    /// `nodeAuthorizer` (the product's default: off).
    pub node_authorizer: bool,
    /// `authorizersGrantWhole` (the product's default: off).
    pub authorizers_grant_whole: bool,
    /// A pool tier between kubeplex and the fake apiserver, whatever `KUBEPLEX_TEST_TIERS`
    /// says: kubeplex is then a node tier bound to node-0.
    pub pool: bool,
    /// The caches started at start-up (`caches:`), every tier's: by default all pods and
    /// ConfigMaps.
    pub caches: Vec<String>,
    /// The fake apiserver's policy instead of [`policy`].
    pub policy: Option<Auth>,
    /// The node tier's token is one the fake apiserver signed, bound to the pod
    /// `kube-system/kubeplex-node-0` on node-0 ([`signed_node_tier_token`]), rather than
    /// [`NODE_TIER_TOKEN`].
    pub signed_node_tier_token: bool,
    /// `verifyServiceAccountTokens` (the product's default: off).
    pub verify_service_account_tokens: bool,
    pub discovery_ttl: Duration,
    /// Caches' states, and review answers, on disk (off by default).
    pub disk: DiskConfig,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            reviews: ReviewConfig::default(),
            graph_lag: Duration::from_millis(1500),
            apiserver_graph_lag: kubeplex_sim::SimConfig::default().node_graph_lag,
            node_authorizer: false,
            authorizers_grant_whole: false,
            pool: false,
            caches: vec!["pods".into(), "configmaps".into()],
            policy: None,
            signed_node_tier_token: false,
            verify_service_account_tokens: false,
            discovery_ttl: kubeplex::live::discovery::DISCOVERY_TTL,
            disk: DiskConfig::default(),
        }
    }
}

/// The fake apiserver (with [`policy`]) and kubeplex in node mode in front of it.
pub struct Node {
    pub sim: Sim,
    pub proxy: Proxy,
    /// With `KUBEPLEX_TEST_TIERS=2`: the pool tier between `proxy` and the fake apiserver.
    pub behind: Option<Proxy>,
    /// The cluster CA: it signs kubeplex's serving certificate and client certificates.
    pub pki: Pki,
    /// The fake apiserver behind TLS with the cluster CA's certificate: where real clients
    /// read directly, with their token (see [`TlsFront`]).
    pub direct: TlsFront,
    /// Where the test's files are (certificates, kubeconfigs).
    pub dir: PathBuf,
    options: NodeOptions,
    _dir: crate::TempDir,
}

impl Node {
    pub async fn start() -> Node {
        Node::start_with(NodeOptions::default()).await
    }

    /// [`Node::start`] with kubeplex's settings (short TTLs, for outages that outlast them; a
    /// state directory).
    pub async fn start_with(options: NodeOptions) -> Node {
        let sim = SimBuilder::new()
            .seed(seed::cluster(SHAPE))
            .auth(options.policy.clone().unwrap_or_else(policy))
            .node_graph_lag(options.apiserver_graph_lag)
            .start()
            .await
            .unwrap();
        let dir = std::env::temp_dir().join(format!(
            "kubeplex-node-{}-{}",
            std::process::id(),
            sim.addr().port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("upstream.kubeconfig"), sim.kubeconfig_with_token(KUBEPLEX_TOKEN))
            .unwrap();
        let node_tier_token = match options.signed_node_tier_token {
            false => NODE_TIER_TOKEN.to_string(),
            true => signed_node_tier_token(&sim),
        };
        std::fs::write(
            dir.join("node-tier.kubeconfig"),
            sim.kubeconfig_with_token(&node_tier_token),
        )
        .unwrap();
        let pki = Pki::new("test-cluster-ca");
        pki.server().write(&dir, "serving");
        std::fs::write(dir.join("client-ca.crt"), &pki.ca_pem).unwrap();
        let behind = start_pool(&dir, &options).await;
        let proxy = start_proxy(&dir, &options, behind.as_ref().map(|p| p.addr)).await;
        let direct = TlsFront::start(&pki, sim.addr()).await;
        let node = Node {
            sim,
            proxy,
            behind,
            pki,
            direct,
            dir: dir.clone(),
            options,
            _dir: crate::TempDir(dir),
        };
        node.wait_ready().await;
        node
    }

    /// Shuts kubeplex down gracefully and starts it again with the same settings and files
    /// (a node's reboot), without waiting for it to be ready: the apiserver may be down.
    pub async fn restart_proxy(self) -> Node {
        let Node { sim, proxy, behind, pki, direct, dir, options, _dir } = self;
        assert!(proxy.shutdown(Duration::from_secs(5)).await, "kubeplex drained");
        let proxy = start_proxy(&dir, &options, behind.as_ref().map(|p| p.addr)).await;
        Node { sim, proxy, behind, pki, direct, dir, options, _dir }
    }

    async fn wait_ready(&self) {
        wait_ready(&self.proxy).await;
    }

    pub fn addr(&self) -> String {
        self.proxy.addr.to_string()
    }

    fn metrics(&self) -> String {
        self.proxy.state.metrics.render().into_iter().map(char::from).collect()
    }

    /// Requests counted by kubeplex with `source`, and with `source` and a code other than 200.
    pub fn served(&self, source: &str) -> (u64, u64) {
        let (mut all, mut not_ok) = (0, 0);
        for line in self.metrics().lines().filter(|l| l.starts_with("kubeplex_requests_total{")) {
            if !line.contains(&format!("source=\"{source}\"")) {
                continue;
            }
            let n: u64 =
                line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) as u64;
            all += n;
            if !line.contains("code=\"200\"") {
                not_ok += n;
            }
        }
        (all, not_ok)
    }

    /// The fake apiserver's `apiserver_request_total` for `resource` and `verb` (`LIST`,
    /// `WATCH`, `GET`), every status.
    pub fn sim_requests(&self, resource: &str, verb: &str) -> u64 {
        let (resource, verb) = (format!("resource=\"{resource}\""), format!("verb=\"{verb}\""));
        self.sim
            .metrics_text()
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
            .filter(|l| l.contains(&resource) && l.contains(&verb))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// The reviews the fake apiserver answered, of `kind` (`tokenreview`, `subjectaccessreview`).
    pub fn sim_reviews(&self, kind: &str) -> u64 {
        self.sim
            .metrics_text()
            .lines()
            .filter(|l| l.starts_with("kubeplex_sim_reviews_total{") && l.contains(kind))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// Sum of kubeplex's `kubeplex_requests_total` series that have every one of `labels`
    /// (`("resource", "pods")`, `("verb", "LIST")`, `("source", "cache")`, ...).
    pub fn requests(&self, labels: &[(&str, &str)]) -> u64 {
        self.metric("kubeplex_requests_total", labels)
    }

    /// Sum of kubeplex's `name` series that have every one of `labels`.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        sum_series(&self.metrics(), name, labels)
    }

    /// [`Node::metric`] summed over every kubeplex of the chain (the node tier, and the pool
    /// tier with `KUBEPLEX_TEST_TIERS=2`): for what whichever tier meets it handles.
    pub fn tiers_metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let pool = self.behind.as_ref().map_or(0, |pool| {
            let text: String = pool.state.metrics.render().into_iter().map(char::from).collect();
            sum_series(&text, name, labels)
        });
        self.metric(name, labels) + pool
    }

    /// The fake apiserver's requests for `resource` with `verb` (`LIST`, `WATCH`, `GET`), whatever
    /// they were answered: which reads reached the upstream.
    pub fn upstream_requests(&self, resource: &str, verb: &str) -> u64 {
        sum_series(
            &self.sim.metrics_text(),
            "apiserver_request_total",
            &[("resource", resource), ("verb", verb)],
        )
    }

    /// The fake apiserver's answers with `code` to requests for `resource`.
    pub fn upstream_answered(&self, resource: &str, code: &str) -> u64 {
        sum_series(
            &self.sim.metrics_text(),
            "apiserver_request_total",
            &[("resource", resource), ("code", code)],
        )
    }

    /// Writes a kubeconfig for kubeplex's TLS listener as an agent on the node has it
    /// (`server: https://127.0.0.1:PORT`, the cluster CA as `certificate-authority-data`) with
    /// `user` (a kubeconfig `user` entry); its path.
    pub fn write_kubeconfig(&self, name: &str, user: Value) -> PathBuf {
        let path = self.dir.join(format!("{name}.kubeconfig"));
        write_kubeconfig(&path, name, self.tls_cluster(&self.addr()), user)
    }

    /// A kubeconfig `cluster` entry for `https://ADDR` trusting the cluster CA.
    fn tls_cluster(&self, addr: &str) -> Value {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.pki.ca_pem);
        json!({"server": format!("https://{addr}"), "certificate-authority-data": ca})
    }

    /// [`Node::write_kubeconfig`] with a client certificate (`client-certificate-data`,
    /// `client-key-data`).
    pub fn cert_kubeconfig(&self, name: &str, cert: &Issued) -> PathBuf {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let user = json!({
            "client-certificate-data": b64(&cert.cert_pem),
            "client-key-data": b64(&cert.key_pem),
        });
        self.write_kubeconfig(name, user)
    }

    /// [`Node::write_kubeconfig`] with a bearer token.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        self.write_kubeconfig(name, json!({"token": token}))
    }

    /// A kubeconfig for the fake apiserver itself (through [`Node::direct`], TLS) with a
    /// bearer token: the direct read a test compares kubeplex's answers with.
    pub fn direct_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.join(format!("{name}.direct.kubeconfig"));
        let cluster = self.tls_cluster(&self.direct.addr.to_string());
        write_kubeconfig(&path, name, cluster, json!({"token": token}))
    }
}

/// Sum of the `name{...}` series of Prometheus text whose labels include all of `labels`.
pub fn sum_series(text: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    text.lines()
        // `name{labels} value`, or `name value` for a series without labels.
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            rest.strip_prefix('{').or_else(|| rest.starts_with(' ').then_some(rest))
        })
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A one-context kubeconfig (JSON, which kubectl and client libraries read as YAML).
fn write_kubeconfig(path: &std::path::Path, name: &str, cluster: Value, user: Value) -> PathBuf {
    let v = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
    });
    std::fs::write(path, serde_json::to_string_pretty(&v).expect("json"))
        .expect("write kubeconfig");
    path.to_path_buf()
}
