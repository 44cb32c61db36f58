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
mod setup;
mod truth;

pub use self::cilium::{cilium_endpoint, CILIUM_RESOURCES, GROUP_VERSION as CILIUM};
pub use self::objects::{
    app_name, endpoint_slice, pending_status, pod, pod_name, running_status, service_name,
    started_status, Shape, APPS, LABEL, NAMESPACE, STAMP, TOKEN_VOLUME_CONFIGMAPS,
};
use self::objects::{node, service};
use self::setup::{create, token_request};
pub use self::setup::{ensure, remove};
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
