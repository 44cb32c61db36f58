//! The cluster a scale run reads, and who reads it: the apiserver (the real one of
//! `scripts/realcluster`, reached with an admin kubeconfig, or the fake started here), the
//! identities the emulated nodes present (client certificates signed by the cluster's CA, as
//! kubelets and kube-proxies have them; bearer tokens on the fake, which has no TLS), and the
//! objects of the run: `nodes` Nodes, `pods_per_node` pods bound to each (as after the
//! scheduler's binding), `services` Services without a selector and one EndpointSlice each
//! whose endpoints spread over the nodes (written by the run's writer, as the EndpointSlice
//! controller would).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use http::{Method, StatusCode};
use kubeplex_net::scratch::Pki;
use kubeplex_sim::auth::{Subject, UserInfo, MASTERS};
use kubeplex_sim::{Sim, SimBuilder};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::node::cluster::{
    cni_token, kube_proxy_token, kubelet_token, node_name, node_tier_token, CNI_SA, POOL_TOKEN,
};
use crate::node::pki::{cert_user, token_user, write_kubeconfig};
use crate::target::Target;

mod cilium;
mod objects;
mod truth;

pub use self::cilium::{cilium_endpoint, CILIUM_RESOURCES, GROUP_VERSION as CILIUM};
pub use self::objects::{
    app_name, endpoint_slice, pending_status, pod, pod_name, running_status, service_name,
    started_status, Shape, APPS, LABEL, NAMESPACE, STAMP, TOKEN_VOLUME_CONFIGMAPS,
};
use self::objects::{node, service};
pub use self::truth::Truth;

/// The fake apiserver's admin token (`system:masters`).
const SIM_ADMIN_TOKEN: &str = "scale-admin";
/// Requests in flight while the objects are created.
const SETUP_CONCURRENCY: usize = 32;
/// The node tiers' ServiceAccount on the real apiserver: the harness's copy of deploy/'s
/// (`scripts/realcluster/agents.py`, which scale.sh applies the RBAC of).
pub const REAL_NODE_TIER_ACCOUNT: &str = "agents-harness-kubeplex-node";
/// kube-proxy's ServiceAccount on the real apiserver, for the kube-proxies a node tier passes
/// on with their token (kubeadm's `kube-system/kube-proxy`, bound to `system:node-proxier`).
const KUBE_PROXY_ACCOUNT: &str = "kube-proxy";

/// Who a kubeconfig is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Who {
    /// Node `i`'s kubelet: `system:node:NAME` in `system:nodes`.
    Kubelet(usize),
    /// Node `i`'s kube-proxy: `system:kube-proxy` (bound to `system:node-proxier`).
    KubeProxy(usize),
    /// Node `i`'s CNI-like agent: the ServiceAccount `kube-system/cni-agent` (a ClusterRole
    /// reading pods, nodes, namespaces, services, endpointslices; [`ensure`] makes it on the
    /// real apiserver, the fake's policy has it).
    Cni(usize),
    /// Node `i`'s node tier: its pod's ServiceAccount token, bound to node `i`
    /// (deploy/base/node; on the real apiserver the harness's copy of its ServiceAccount,
    /// [`REAL_NODE_TIER_ACCOUNT`]).
    NodeTier(usize),
    /// The pool replicas' identity toward the apiserver.
    Pool,
}

/// The apiserver of the run and the identities its clients present.
pub struct Cluster {
    /// The writer's and the set-up's client (cluster-admin).
    pub admin: Arc<Target>,
    /// The apiserver's URL, for the nodes (directly) and the pool.
    pub server: String,
    /// The apiserver's CA (PEM), when it serves TLS.
    server_ca: Option<String>,
    /// Signs the node identities on the real apiserver (its cluster CA), and the pool's serving
    /// certificate and the node tiers' client certificate in both cases.
    pub pki: Pki,
    /// The fake apiserver, when the run started one (its identities are bearer tokens).
    pub sim: Option<Arc<Sim>>,
    /// The pool's user on the real apiserver (its certificate's CN).
    pool_user: String,
    /// The control plane's processes whose CPU and memory the report shows (name, pid).
    pub control_plane: Vec<(String, u32)>,
    dir: PathBuf,
    /// Kubeconfigs written so far, by identity.
    written: std::sync::Mutex<HashMap<(Who, String), PathBuf>>,
    /// On the real apiserver: node `i`'s node tier's token, bound to its pod on node `i`, and
    /// the tokens kube-proxy and the CNI-like agent present through a node tier
    /// ([`Cluster::prepare_node_tiers`]).
    tokens: std::sync::Mutex<Tokens>,
}

/// Tokens made on the real apiserver ([`Cluster::prepare_node_tiers`]).
#[derive(Default)]
struct Tokens {
    node_tiers: HashMap<usize, String>,
    kube_proxy: Option<String>,
    cni: Option<String>,
}

impl Cluster {
    /// The real apiserver of `kubeconfig` (cluster-admin), whose client CA is `ca_cert` /
    /// `ca_key` (PEM, the key PKCS#8).
    pub fn real(
        kubeconfig: &Path,
        ca_cert: &Path,
        ca_key: &Path,
        pool_user: &str,
        dir: &Path,
    ) -> anyhow::Result<Cluster> {
        let admin = Target::open(None, Some(kubeconfig), false)?;
        let ca_pem = std::fs::read_to_string(ca_cert)
            .with_context(|| format!("reading {}", ca_cert.display()))?;
        let key_pem = std::fs::read_to_string(ca_key)
            .with_context(|| format!("reading {}", ca_key.display()))?;
        let Some(pki) = Pki::from_pem(&ca_pem, &key_pem) else {
            bail!(
                "{} / {}: not a CA certificate and PKCS#8 key",
                ca_cert.display(),
                ca_key.display()
            )
        };
        Ok(Cluster {
            server: admin.url.clone(),
            admin: Arc::new(admin),
            server_ca: Some(ca_pem),
            pki,
            sim: None,
            pool_user: pool_user.to_string(),
            control_plane: processes_named(&["kube-apiserver", "etcd"]),
            dir: dir.to_path_buf(),
            written: Default::default(),
            tokens: Default::default(),
        })
    }

    /// A fake apiserver started here with the Node and RBAC authorizers, the agents' and
    /// kubeplex's identities (as the node scenario's), and its Node authorizer's graph lagging
    /// each binding as a loaded real one's does.
    pub async fn sim(
        nodes: usize,
        daemonset: &Path,
        pool_manifest: &Path,
        dir: &Path,
    ) -> anyhow::Result<Cluster> {
        let policy = crate::node::cluster::policy(nodes, daemonset, pool_manifest)?
            .token(SIM_ADMIN_TOKEN, UserInfo::new("scale-admin").with_group(MASTERS))
            // The apiserver's bootstrap policy binds `system:node-proxier` to the user
            // `system:kube-proxy` (`bootstrappolicy.ClusterRoleBindings`), whom a node tier
            // impersonates for a kube-proxy with that certificate.
            .cluster_role_binding(
                "system:node-proxier",
                "system:node-proxier",
                vec![Subject::user("system:kube-proxy")],
            );
        let sim = SimBuilder::new()
            .auth(policy)
            .node_graph_lag_measured(std::time::Duration::from_millis(1000))
            .start()
            .await?;
        let url = sim.url();
        let path = write_kubeconfig(dir, "admin", &url, None, token_user(SIM_ADMIN_TOKEN))?;
        let admin = Target::open(None, Some(&path), false)?;
        Ok(Cluster {
            admin: Arc::new(admin),
            server: url,
            server_ca: None,
            pki: Pki::new("kubeplex-bench-scale-ca"),
            sim: Some(Arc::new(sim)),
            pool_user: String::new(),
            control_plane: vec![("kubeplex-bench (the fake apiserver)".into(), std::process::id())],
            dir: dir.to_path_buf(),
            written: Default::default(),
            tokens: Default::default(),
        })
    }

    /// The bearer token a node tier passes on as it is for node `i`'s kube-proxy (`cni`: its
    /// CNI-like agent): agents with tokens reach the apiserver with their own, whatever tier
    /// is between.
    pub fn agent_token(&self, i: usize, cni: bool) -> Option<String> {
        if self.sim.is_some() {
            return Some(if cni { cni_token(i) } else { kube_proxy_token(i) });
        }
        let tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if cni {
            tokens.cni.clone()
        } else {
            tokens.kube_proxy.clone()
        }
    }

    /// On the real apiserver: for each of `nodes` nodes, its node tier's pod (in kube-system,
    /// bound to the node, of the node tiers' ServiceAccount, labelled for the cleanup) and a
    /// token bound to it, as the kubelet projects into a DaemonSet's pod — the apiserver writes
    /// the node into it, and the node tier can act as that node alone; and a token each for
    /// kube-proxy's and the CNI-like agent's ServiceAccounts. The fake's are in its policy.
    pub async fn prepare_node_tiers(&self, nodes: usize) -> anyhow::Result<()> {
        if self.sim.is_some() {
            return Ok(());
        }
        let admin = &self.admin;
        let sa = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": "kube-system", "labels": {LABEL: "true"}}})
        };
        create(admin, "/api/v1/namespaces/kube-system/serviceaccounts", sa(KUBE_PROXY_ACCOUNT))
            .await?;
        create(admin, "/api/v1/namespaces/kube-system/serviceaccounts", sa(CNI_SA)).await?;
        let rbac = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
        create(
            admin,
            rbac,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "kubeplex-scale:node-proxier", "labels": {LABEL: "true"}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:node-proxier"},
                "subjects": [{"kind": "ServiceAccount", "name": KUBE_PROXY_ACCOUNT,
                    "namespace": "kube-system"}]}),
        )
        .await?;
        let kube_proxy = token_request(admin, KUBE_PROXY_ACCOUNT, None).await?;
        let cni = token_request(admin, CNI_SA, None).await?;
        let gate = Arc::new(Semaphore::new(SETUP_CONCURRENCY));
        let mut tasks = JoinSet::new();
        for i in 0..nodes {
            let (admin, gate) = (admin.clone(), gate.clone());
            tasks.spawn(async move {
                let _slot = gate.acquire().await?;
                let node = node_name(i);
                let name = format!("kubeplex-scale-tier-{node}");
                let pod = json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "kube-system", "labels": {LABEL: "true"}},
                    "spec": {"nodeName": node, "serviceAccountName": REAL_NODE_TIER_ACCOUNT,
                        "automountServiceAccountToken": false,
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{"name": "kubeplex", "image": "kubeplex:latest"}]}});
                create(&admin, "/api/v1/namespaces/kube-system/pods", pod).await?;
                let path = format!("/api/v1/namespaces/kube-system/pods/{name}");
                let (status, body) = admin.fetch(Method::GET, &path, &[], None).await?;
                anyhow::ensure!(status.is_success(), "GET {path}: {status}");
                let uid: Value = serde_json::from_slice(&body)?;
                let uid = uid.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
                let token =
                    token_request(&admin, REAL_NODE_TIER_ACCOUNT, Some((&name, uid))).await?;
                anyhow::Ok((i, token))
            });
        }
        let mut made = HashMap::new();
        while let Some(done) = tasks.join_next().await {
            let (i, token) = done??;
            made.insert(i, token);
        }
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        tokens.node_tiers = made;
        tokens.kube_proxy = Some(kube_proxy);
        tokens.cni = Some(cni);
        Ok(())
    }

    /// A kubeconfig for `who` toward `server` (the apiserver, or a pool replica whose serving
    /// certificate [`Cluster::pki`] signed).
    pub fn kubeconfig(&self, who: Who, server: &str) -> anyhow::Result<PathBuf> {
        self.kubeconfig_to(who, server, server == self.server)
    }

    /// A kubeconfig for `who` toward the apiserver through a relay at `server` (its
    /// certificate, for the relay's loopback address as for the apiserver's).
    pub fn kubeconfig_relayed(&self, who: Who, server: &str) -> anyhow::Result<PathBuf> {
        self.kubeconfig_to(who, server, true)
    }

    fn kubeconfig_to(&self, who: Who, server: &str, to_apiserver: bool) -> anyhow::Result<PathBuf> {
        let key = (who, server.to_string());
        if let Some(p) = self.written.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(p.clone());
        }
        let ca = if to_apiserver { self.server_ca.clone() } else { Some(self.pki.ca_pem.clone()) };
        let user = match (who, &self.sim) {
            (Who::NodeTier(i), Some(_)) => token_user(&node_tier_token(i)),
            (Who::NodeTier(i), None) => {
                let tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
                let token = tokens.node_tiers.get(&i).cloned();
                drop(tokens);
                token_user(&token.context("no token for the node tier (prepare_node_tiers)")?)
            }
            (Who::Kubelet(i), None) => cert_user(
                &self.pki.client(&format!("system:node:{}", node_name(i)), &["system:nodes"]),
            ),
            (Who::KubeProxy(_), None) => cert_user(&self.pki.client("system:kube-proxy", &[])),
            // A certificate in the ServiceAccount's name and groups: RBAC binds the user name
            // (`system:serviceaccount:NS:NAME`), whatever authenticated it.
            (Who::Cni(_), None) => cert_user(&self.pki.client(
                &format!("system:serviceaccount:kube-system:{CNI_SA}"),
                &["system:serviceaccounts", "system:serviceaccounts:kube-system"],
            )),
            (Who::Cni(i), Some(_)) => token_user(&cni_token(i)),
            (Who::Pool, None) => cert_user(&self.pki.client(&self.pool_user, &[])),
            (Who::Kubelet(i), Some(_)) => token_user(&kubelet_token(i)),
            (Who::KubeProxy(i), Some(_)) => token_user(&kube_proxy_token(i)),
            (Who::Pool, Some(_)) => token_user(POOL_TOKEN),
        };
        let name = match who {
            Who::Kubelet(i) => format!("kubelet-{i}"),
            Who::KubeProxy(i) => format!("kube-proxy-{i}"),
            Who::Cni(i) => format!("cni-{i}"),
            Who::NodeTier(i) => format!("node-tier-{i}"),
            Who::Pool => "pool".into(),
        };
        let name =
            format!("{name}-{}", if to_apiserver { "apiserver".into() } else { file_part(server) });
        let path = write_kubeconfig(&self.dir, &name, server, ca.as_deref(), user)?;
        self.written.lock().unwrap_or_else(|p| p.into_inner()).insert(key, path.clone());
        Ok(path)
    }

    /// The apiserver's `/metrics`.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        if let Some(sim) = &self.sim {
            return Ok(sim.metrics_text());
        }
        let (status, body) = self.admin.fetch(Method::GET, "/metrics", &[], None).await?;
        if !status.is_success() {
            bail!("the apiserver's /metrics: {status}");
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

fn file_part(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// The pids of the processes whose command is one of `names` (`/proc/PID/comm`).
pub(crate) fn processes_named(names: &[&str]) -> Vec<(String, u32)> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return found };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if let Some(name) = names.iter().find(|n| comm.trim() == **n) {
            found.push((name.to_string(), pid));
        }
    }
    found.sort();
    found
}

/// Creates what the run reads (what exists already is left as it is): the namespace, the
/// Nodes, the apps' ConfigMaps and Secrets, the pods, the Services and their EndpointSlices. Pods of slots beyond the shape
/// (an earlier, larger run) are deleted.
pub async fn ensure(cluster: &Cluster, shape: &Shape) -> anyhow::Result<usize> {
    let admin = &cluster.admin;
    namespace_gone_if_terminating(admin).await?;
    create(
        admin,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {LABEL: "true"}}}),
    )
    .await?;
    let ns = format!("/api/v1/namespaces/{NAMESPACE}");
    // The pods' projected token volume is the `default` ServiceAccount's: the apiserver refuses
    // a pod whose account does not exist yet (a namespace just made, before the controller
    // manager has made its account), so it is made here if missing (409: the controller's).
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": NAMESPACE}});
    let body = serde_json::to_vec(&account)?;
    let (status, _) =
        admin.fetch(Method::POST, &format!("{ns}/serviceaccounts"), &[], Some(body)).await?;
    if !status.is_success() && status != StatusCode::CONFLICT {
        tracing::warn!(%status, "the default ServiceAccount could not be made");
    }
    if shape.cni && cluster.sim.is_none() {
        cni_rbac(admin, shape.cilium).await?;
    }
    let mut creates: Vec<(String, Value)> = Vec::new();
    for a in 0..APPS {
        let meta = json!({"name": app_name(a), "namespace": NAMESPACE});
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {"app.conf": format!("app {a}")}});
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta,
            "type": "Opaque", "stringData": {"token": format!("app-{a}-token")}});
        creates.push((format!("{ns}/configmaps"), config));
        creates.push((format!("{ns}/secrets"), secret));
    }
    // The realcluster's apiserver is OpenShift's fork: its ServiceAccount admission puts this
    // ConfigMap in every pod's projected token volume, and a real kubelet starts no pod
    // before it can mount it (scripts/realcluster/calibrate.py runs real kubelets here).
    creates.push((
        format!("{ns}/configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": TOKEN_VOLUME_CONFIGMAPS[1], "namespace": NAMESPACE},
            "data": {"service-ca.crt": ""}}),
    ));
    creates.extend((0..shape.nodes).map(|i| ("/api/v1/nodes".to_string(), node(i))));
    for s in 0..shape.services {
        creates.push((format!("{ns}/services"), service(s)));
        creates.push((
            format!("/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"),
            endpoint_slice(shape, s),
        ));
    }
    for i in 0..shape.nodes {
        for k in 0..shape.pods_per_node {
            creates.push((format!("{ns}/pods"), pod(i, k, None)));
        }
    }
    if shape.cilium {
        // Cilium's CRDs are installed already (scripts/realcluster/scale.sh --cilium; the
        // fake serves them).
        creates.extend(cilium::objects(shape.nodes, shape.pods_per_node));
    }
    let created = create_all(admin, creates).await?;
    // Pods an earlier run left beyond this shape.
    let (status, body) = admin.fetch(Method::GET, &format!("{ns}/pods"), &[], None).await?;
    if !status.is_success() {
        bail!("listing the run's pods: {status}");
    }
    let list: Value = serde_json::from_slice(&body)?;
    let wanted: std::collections::HashSet<String> = (0..shape.nodes)
        .flat_map(|i| (0..shape.pods_per_node).map(move |k| pod_name(i, k)))
        .collect();
    for p in list["items"].as_array().into_iter().flatten() {
        let name = p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        if !wanted.contains(name) {
            let path = format!("{ns}/pods/{name}?gracePeriodSeconds=0");
            let _ = admin.fetch(Method::DELETE, &path, &[], None).await;
        }
    }
    Ok(created)
}

/// Waits while the run's namespace is being deleted (a run's cleanup just before: the apiserver
/// refuses anything new in a terminating namespace, 403 `NamespaceTerminating`), at most 5
/// minutes.
async fn namespace_gone_if_terminating(admin: &Target) -> anyhow::Result<()> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}");
    for i in 0..300 {
        let (status, body) = admin.fetch(Method::GET, &path, &[], None).await?;
        let namespace: Value = serde_json::from_slice(&body).unwrap_or_default();
        let terminating = status.is_success()
            && namespace.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating");
        if !terminating {
            return Ok(());
        }
        if i % 10 == 0 {
            tracing::info!("waiting for the last run's namespace to be deleted");
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    bail!("the namespace {NAMESPACE} is still being deleted after 5 minutes")
}

/// The CNI-like agents' ClusterRole and its binding to their ServiceAccount, as the fake's
/// policy has them (`node::cluster::policy`), labelled as the run's; a Cilium agent's reads
/// network policies and Cilium's resources too.
async fn cni_rbac(admin: &Target, cilium: bool) -> anyhow::Result<()> {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let name = format!("kubeplex-scale:{CNI_SA}");
    let meta = json!({"name": name, "labels": {LABEL: "true"}});
    let read = json!(["get", "list", "watch"]);
    let mut rules = vec![
        json!({"apiGroups": [""], "resources": ["pods", "nodes", "namespaces", "services"],
            "verbs": read}),
        json!({"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read}),
    ];
    if cilium {
        rules.push(json!({"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
            "verbs": read}));
        rules.push(
            json!({"apiGroups": ["cilium.io"], "resources": CILIUM_RESOURCES, "verbs": read}),
        );
    }
    create(
        admin,
        &format!("{rbac}/clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": meta, "rules": rules}),
    )
    .await?;
    create(
        admin,
        &format!("{rbac}/clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": CNI_SA, "namespace": "kube-system"}]}),
    )
    .await?;
    Ok(())
}

/// A token of the ServiceAccount `kube-system/account` (`TokenRequest`), bound to the pod
/// `bound` (name, uid) when given, for two hours.
async fn token_request(
    admin: &Target,
    account: &str,
    bound: Option<(&str, &str)>,
) -> anyhow::Result<String> {
    let mut spec = json!({"expirationSeconds": 7200});
    if let Some((name, uid)) = bound {
        spec["boundObjectRef"] =
            json!({"kind": "Pod", "apiVersion": "v1", "name": name, "uid": uid});
    }
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": spec});
    let path = format!("/api/v1/namespaces/kube-system/serviceaccounts/{account}/token");
    let (status, body) =
        admin.fetch(Method::POST, &path, &[], Some(serde_json::to_vec(&request)?)).await?;
    anyhow::ensure!(
        status.is_success(),
        "POST {path}: {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let answer: Value = serde_json::from_slice(&body)?;
    answer
        .pointer("/status/token")
        .and_then(Value::as_str)
        .map(str::to_string)
        .context("no token in the TokenRequest's answer")
}

async fn create(admin: &Target, path: &str, object: Value) -> anyhow::Result<bool> {
    let (status, body) =
        admin.fetch(Method::POST, path, &[], Some(serde_json::to_vec(&object)?)).await?;
    match status {
        s if s.is_success() => Ok(true),
        StatusCode::CONFLICT => Ok(false),
        s => bail!("POST {path}: {s}: {}", String::from_utf8_lossy(&body)),
    }
}

/// Creates every object, `SETUP_CONCURRENCY` at a time; how many were new.
async fn create_all(admin: &Arc<Target>, objects: Vec<(String, Value)>) -> anyhow::Result<usize> {
    let gate = Arc::new(Semaphore::new(SETUP_CONCURRENCY));
    let mut tasks = JoinSet::new();
    let mut created = 0;
    for (path, object) in objects {
        let permit = gate.clone().acquire_owned().await?;
        let admin = admin.clone();
        tasks.spawn(async move {
            let _permit = permit;
            create(&admin, &path, object).await
        });
        while let Some(done) = tasks.try_join_next() {
            created += usize::from(done??);
        }
    }
    while let Some(done) = tasks.join_next().await {
        created += usize::from(done??);
    }
    Ok(created)
}

/// Deletes the run's namespace and Nodes (and their Leases and CSINodes), and the CNI-like
/// agents' RBAC.
pub async fn remove(cluster: &Cluster) -> anyhow::Result<()> {
    let admin = &cluster.admin;
    let _ =
        admin.fetch(Method::DELETE, &format!("/api/v1/namespaces/{NAMESPACE}"), &[], None).await?;
    for kind in ["clusterrolebindings", "clusterroles"] {
        let path = format!("/apis/rbac.authorization.k8s.io/v1/{kind}/kubeplex-scale:{CNI_SA}");
        let _ = admin.fetch(Method::DELETE, &path, &[], None).await;
    }
    // A Cilium run's CiliumNodes and CiliumIdentities (a 404 where Cilium's CRDs are not).
    for resource in cilium::CLUSTER_SCOPED {
        let path = format!("{CILIUM}/{resource}?labelSelector={LABEL}%3Dtrue");
        let _ = admin.fetch(Method::DELETE, &path, &[], None).await;
    }
    let binding =
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeplex-scale:node-proxier";
    let _ = admin.fetch(Method::DELETE, binding, &[], None).await;
    // The node tiers' pods (their tokens are bound to them).
    let _ = admin
        .fetch(
            Method::DELETE,
            &format!("/api/v1/namespaces/kube-system/pods?labelSelector={LABEL}%3Dtrue"),
            &[],
            None,
        )
        .await;
    let (status, body) = admin
        .fetch(Method::GET, &format!("/api/v1/nodes?labelSelector={LABEL}%3Dtrue"), &[], None)
        .await?;
    if !status.is_success() {
        bail!("listing the run's nodes: {status}");
    }
    let list: Value = serde_json::from_slice(&body)?;
    for n in list["items"].as_array().into_iter().flatten() {
        let name = n.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let _ = admin.fetch(Method::DELETE, &format!("/api/v1/nodes/{name}"), &[], None).await;
        let lease =
            format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}");
        let _ = admin.fetch(Method::DELETE, &lease, &[], None).await;
        // Its kubelet's CSINode: left for the garbage collector, a next run's kubelet could
        // meet it first (and delete and make it again, which a first start does not).
        let csinode = format!("/apis/storage.k8s.io/v1/csinodes/{name}");
        let _ = admin.fetch(Method::DELETE, &csinode, &[], None).await;
    }
    Ok(())
}
