//! What a run creates in the cluster before it starts, and removes after: the namespace, the
//! Nodes, the apps' objects, the pods, the Services and their EndpointSlices, the CNI agents'
//! RBAC (and Cilium's CRDs).

use super::*;

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
pub(super) async fn token_request(
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

pub(super) async fn create(admin: &Target, path: &str, object: Value) -> anyhow::Result<bool> {
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
