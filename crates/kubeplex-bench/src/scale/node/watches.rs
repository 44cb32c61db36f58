//! What node `i`'s agents watch, directly or through its node tier ([`watches`]), and with
//! which headers a node tier passes them on ([`PassOn`]).

use super::super::cluster::{app_name, Shape, NAMESPACE, TOKEN_VOLUME_CONFIGMAPS};
use super::super::watcher::{Scope, WatchSpec};
use crate::node::agents::KUBE_PROXY_SELECTOR;
use crate::node::cluster::node_name;

pub(super) const KUBELET: &str = "kubelet/v1.36.2 (linux/amd64) kubernetes/0000000";
pub(super) const KUBE_PROXY: &str = "kube-proxy/v1.36.2 (linux/amd64) kubernetes/0000000";
const NODE_TIER: &str = "kubeplex/node-tier";
const CNI_AGENT: &str = "cni-agent/v1.0.0";
const CILIUM_AGENT: &str = "cilium-agent/v1.20.0 (linux/amd64) kubernetes/0000000";
/// What a Cilium agent reads of endpointslices: kube-proxy's selector, and not its own mesh
/// controller's (`pkg/loadbalancer/reflectors/k8s.go`; its services selector is kube-proxy's).
const CILIUM_SLICES: &str = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name,endpointslice.kubernetes.io/managed-by!=endpointslice-mesh-controller.cilium.io";

/// The headers with which a node tier passes its agents' requests on: the kubelet's as its
/// node, by user name alone (constrained impersonation's associated-node mode; the node tier's
/// credential is bound to the node); kube-proxy's and the CNI-like agent's with their own
/// tokens. Empty directly.
#[derive(Clone, Default)]
pub struct PassOn {
    pub kubelet: Vec<(&'static str, String)>,
    pub kube_proxy: Vec<(&'static str, String)>,
    pub cni: Vec<(&'static str, String)>,
}

/// The resources a node reads: pods, nodes, services, endpointslices (a node tier's caches),
/// runtimeclasses, csidrivers, servicecidrs, configmaps and secrets (passed on); and namespaces
/// when it runs a CNI-like agent, and Cilium's four besides when that agent is Cilium's.
pub fn resources(shape: &Shape) -> usize {
    match (shape.cni, shape.cilium) {
        (_, true) => 10 + super::super::cluster::CILIUM_RESOURCES.len(),
        (true, false) => 10,
        (false, false) => 9,
    }
}

/// The ConfigMaps and Secrets a node's pods mount (`shape.apps_per_node()` apps) in the run's
/// namespace, watched by name.
const NAMED: [(&str, &str, &str); 2] = [
    ("kubelet: a ConfigMap by name", "/api/v1/namespaces/kubeplex-scale/configmaps", "configmaps"),
    ("kubelet: a Secret by name", "/api/v1/namespaces/kubeplex-scale/secrets", "secrets"),
];

/// Whose connection a watch is sent on (directly; through the pool, all are its node tier's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Agent {
    Kubelet,
    KubeProxy,
    Cni,
}

/// The watches of node `i` in this mode, for a cluster of `shape` (its pods mount
/// `shape.apps_per_node()` apps' ConfigMaps and Secrets): (who sends it, spec).
pub(super) fn watches(
    i: usize,
    pool: bool,
    shape: &Shape,
    pass: &PassOn,
) -> Vec<(Agent, WatchSpec)> {
    let apps = shape.apps_per_node();
    let node = node_name(i);
    let imp_kubelet = pass.kubelet.clone();
    let imp_proxy = pass.kube_proxy.clone();
    let kp = || vec![("labelSelector", KUBE_PROXY_SELECTOR.to_string())];
    let path = with_query;
    let spec = |class,
                collection: &'static str,
                selectors: Vec<(&'static str, String)>,
                scope,
                imp: &Vec<_>,
                ua| WatchSpec {
        class,
        collection,
        selectors,
        scope,
        impersonate: if pool { imp.clone() } else { Vec::new() },
        user_agent: if pool && imp.is_empty() { NODE_TIER } else { ua },
        node_tier: pool,
        protobuf: true,
    };
    let none = Vec::new();
    let pods = vec![("fieldSelector", format!("spec.nodeName={node}"))];
    let own = vec![("fieldSelector", format!("metadata.name={node}"))];
    let quiet = |class, collection: &'static str, imp: &Vec<_>, ua| {
        spec(class, collection, vec![], Scope::Whole(collection.to_string()), imp, ua)
    };
    let mut all = vec![
        (
            Agent::Kubelet,
            // Through the pool, the node tier's cache of its node's pods, loaded as the node.
            spec(
                "kubelet: its pods",
                "/api/v1/pods",
                pods.clone(),
                Scope::NodePods(node.clone()),
                &imp_kubelet,
                if pool { NODE_TIER } else { KUBELET },
            ),
        ),
        (
            Agent::Kubelet,
            quiet(
                "kubelet: runtimeclasses",
                "/apis/node.k8s.io/v1/runtimeclasses",
                &imp_kubelet,
                KUBELET,
            ),
        ),
        (
            Agent::Kubelet,
            quiet(
                "kubelet: csidrivers",
                "/apis/storage.k8s.io/v1/csidrivers",
                &imp_kubelet,
                KUBELET,
            ),
        ),
        (
            Agent::KubeProxy,
            quiet(
                "kube-proxy: servicecidrs",
                "/apis/networking.k8s.io/v1/servicecidrs",
                &imp_proxy,
                KUBE_PROXY,
            ),
        ),
        (
            Agent::KubeProxy,
            spec(
                "kube-proxy: endpointslices",
                "/apis/discovery.k8s.io/v1/endpointslices",
                kp(),
                Scope::Whole(path("/apis/discovery.k8s.io/v1/endpointslices", &kp())),
                &none,
                KUBE_PROXY,
            ),
        ),
    ];
    // The kubelet's watches of what its pods mount, one per object (a node tier has no cache
    // for one object by name: it passes them on).
    for (class, collection, resource) in NAMED {
        debug_assert!(collection.starts_with(&format!("/api/v1/namespaces/{NAMESPACE}/")));
        let token_volume = TOKEN_VOLUME_CONFIGMAPS
            .iter()
            .filter(|_| resource == "configmaps" && apps > 0)
            .map(|name| name.to_string());
        for name in (0..apps).map(app_name).chain(token_volume) {
            let named = vec![("fieldSelector", format!("metadata.name={name}"))];
            let scope = Scope::Whole(path(collection, &named));
            all.push((
                Agent::Kubelet,
                spec(class, collection, named, scope, &imp_kubelet, KUBELET),
            ));
        }
    }
    if pool {
        // The node tier's caches: one Node and one services watch for both agents.
        all.push((
            Agent::Kubelet,
            // Loaded as the node, as its pods are.
            spec(
                "node tier: its Node",
                "/api/v1/nodes",
                own,
                Scope::Node(node.clone()),
                &imp_kubelet,
                NODE_TIER,
            ),
        ));
        all.push((
            Agent::Kubelet,
            spec(
                "node tier: services",
                "/api/v1/services",
                vec![],
                Scope::Whole("/api/v1/services".into()),
                &none,
                NODE_TIER,
            ),
        ));
    } else {
        let ip = vec![("fieldSelector", "spec.clusterIP!=None".to_string())];
        all.push((
            Agent::Kubelet,
            spec(
                "kubelet: its Node",
                "/api/v1/nodes",
                own.clone(),
                Scope::Node(node.clone()),
                &none,
                KUBELET,
            ),
        ));
        all.push((
            Agent::Kubelet,
            spec(
                "kubelet: services",
                "/api/v1/services",
                ip.clone(),
                Scope::Whole(path("/api/v1/services", &ip)),
                &none,
                KUBELET,
            ),
        ));
        all.push((
            Agent::KubeProxy,
            spec(
                "kube-proxy: its Node",
                "/api/v1/nodes",
                own,
                Scope::Node(node.clone()),
                &none,
                KUBE_PROXY,
            ),
        ));
        all.push((
            Agent::KubeProxy,
            spec(
                "kube-proxy: services",
                "/api/v1/services",
                kp(),
                Scope::Whole(path("/api/v1/services", &kp())),
                &none,
                KUBE_PROXY,
            ),
        ));
    }
    if shape.cilium {
        let cilium = cilium_watches(pool, node, pods, pass);
        all.extend(cilium.into_iter().map(|w| (Agent::Cni, w)));
    } else if shape.cni {
        all.extend(cni_watches(pool, node, pods, pass).into_iter().map(|w| (Agent::Cni, w)));
    }
    all
}

/// A Cilium agent's watches (scripts/realcluster/crds/CILIUM.md, from `daemon/k8s/resources.go`
/// and `pkg/k8s/resource_ctors.go`: client-go informers, protobuf for built-in kinds, JSON for
/// Cilium's own): its node's pods, its Node, every namespace, service and endpointslice of
/// kube-proxy's selection (slices of Cilium's mesh controller left out), and every CiliumNode,
/// CiliumEndpoint, CiliumIdentity and CiliumNetworkPolicy. Left out: Kubernetes
/// NetworkPolicies, clusterwide policies and CIDR groups (the fake does not serve them; few
/// objects, rarely changed), the one-off reads at start-up (the CRDs' metadata, its ConfigMap).
///
/// Through the pool, what its node tier sends upstream for them: its pods, Node, services and
/// endpointslices are read from the node tier's caches of the same or a wider scope (the
/// kubelet's and kube-proxy's), namespaces from a cache of its own loaded as the node tier;
/// Cilium's resources, which the node tier's credential does not read, go on with the agent's
/// own token.
fn cilium_watches(
    pool: bool,
    node: String,
    pods: Vec<(&'static str, String)>,
    pass: &PassOn,
) -> Vec<WatchSpec> {
    let spec = |class, collection: &'static str, selectors: Vec<_>, protobuf, passed: bool| {
        let scope = match class {
            "cilium: its pods" => Scope::NodePods(node.clone()),
            "cilium: its Node" => Scope::Node(node.clone()),
            _ => Scope::Whole(with_query(collection, &selectors)),
        };
        WatchSpec {
            class,
            collection,
            selectors,
            scope,
            impersonate: if pool && passed { pass.cni.clone() } else { Vec::new() },
            user_agent: if pool && !passed { NODE_TIER } else { CILIUM_AGENT },
            node_tier: pool,
            protobuf,
        }
    };
    let mut all = vec![spec("cilium: namespaces", "/api/v1/namespaces", vec![], true, false)];
    if !pool {
        let own = vec![("fieldSelector", format!("metadata.name={node}"))];
        let proxied = || vec![("labelSelector", KUBE_PROXY_SELECTOR.to_string())];
        let slices = vec![("labelSelector", CILIUM_SLICES.to_string())];
        all.extend([
            spec("cilium: its pods", "/api/v1/pods", pods, true, false),
            spec("cilium: its Node", "/api/v1/nodes", own, true, false),
            spec("cilium: services", "/api/v1/services", proxied(), true, false),
            spec(
                "cilium: endpointslices",
                "/apis/discovery.k8s.io/v1/endpointslices",
                slices,
                true,
                false,
            ),
        ]);
    }
    all.extend([
        spec("cilium: ciliumnodes (JSON)", "/apis/cilium.io/v2/ciliumnodes", vec![], false, true),
        spec(
            "cilium: ciliumendpoints (JSON)",
            "/apis/cilium.io/v2/ciliumendpoints",
            vec![],
            false,
            true,
        ),
        spec(
            "cilium: ciliumidentities (JSON)",
            "/apis/cilium.io/v2/ciliumidentities",
            vec![],
            false,
            true,
        ),
        spec(
            "cilium: ciliumnetworkpolicies (JSON)",
            "/apis/cilium.io/v2/ciliumnetworkpolicies",
            vec![],
            false,
            true,
        ),
    ]);
    all
}

/// `collection` with `selectors` as its query.
fn with_query(collection: &str, selectors: &[(&str, String)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in selectors {
        q.append_pair(k, v);
    }
    let q = q.finish();
    if q.is_empty() {
        collection.to_string()
    } else {
        format!("{collection}?{q}")
    }
}

/// The CNI-like agent's watches (`node::agents::cni`'s reads, each a WatchList in JSON as a
/// client-go ≥ 1.35 informer without a protobuf content type sends it): its node's pods, and
/// every node, namespace, service and endpointslice. Through the pool, what its node tier sends
/// upstream for them with the shipped configuration: its pods and the services are rendered
/// from the node tier's protobuf caches of the same scope (`live::mirror`: nothing upstream);
/// the nodes, namespaces and endpointslices (its caches hold one Node and kube-proxy's slices)
/// are caches of their own, listed and watched in JSON from the pool as the node tier.
fn cni_watches(
    pool: bool,
    node: String,
    pods: Vec<(&'static str, String)>,
    pass: &PassOn,
) -> Vec<WatchSpec> {
    let spec = |class, collection: &'static str, selectors, scope, passed: bool| WatchSpec {
        class,
        collection,
        selectors,
        scope,
        impersonate: if passed { pass.cni.clone() } else { Vec::new() },
        user_agent: if pool && !passed { NODE_TIER } else { CNI_AGENT },
        node_tier: pool,
        protobuf: false,
    };
    let whole = |class, collection: &'static str, passed| {
        spec(class, collection, vec![], Scope::Whole(collection.to_string()), passed)
    };
    // Through the pool, the nodes watch goes on with the agent's own token: the node tier's
    // credential reads no Node but its own (deploy/base/node).
    let mut all = vec![
        whole("cni: nodes (JSON)", "/api/v1/nodes", pool),
        whole("cni: namespaces (JSON)", "/api/v1/namespaces", false),
        whole("cni: endpointslices (JSON)", "/apis/discovery.k8s.io/v1/endpointslices", false),
    ];
    if !pool {
        all.push(spec("cni: its pods (JSON)", "/api/v1/pods", pods, Scope::NodePods(node), false));
        all.push(whole("cni: services (JSON)", "/api/v1/services", false));
    }
    all
}

/// The cluster-wide scopes the nodes' watches check against (paths with their selectors).
pub fn whole_scopes(pool: bool, shape: &Shape) -> Vec<String> {
    let mut scopes: Vec<String> = watches(0, pool, shape, &PassOn::default())
        .into_iter()
        .filter_map(|(_, w)| match w.scope {
            Scope::Whole(p) => Some(p),
            _ => None,
        })
        .collect();
    scopes.sort();
    scopes.dedup();
    scopes
}

/// How many watches a node keeps open in this mode.
pub fn watches_per_node(pool: bool, shape: &Shape) -> usize {
    watches(0, pool, shape, &PassOn::default()).len()
}
