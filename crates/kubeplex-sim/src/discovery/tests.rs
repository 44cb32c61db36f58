//! Discovery documents against the kube-apiserver 1.36 captures in `shared/fixtures`.

use serde_json::Value;

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../../../shared/fixtures/", $name, ".body")).as_slice()
    };
}

/// The fixture's bytes with the array at `key` filtered to the entries `keep` accepts, then
/// re-encoded. The fixtures are compact Go JSON without escapes or floats, so re-encoding an
/// unfiltered one gives its exact bytes back (asserted): filtering changes nothing else.
fn filtered(body: &[u8], key: &str, keep: impl Fn(&Value) -> bool) -> Vec<u8> {
    let mut whole: Value = serde_json::from_slice(body).expect("fixture is JSON");
    let mut round = serde_json::to_vec(&whole).expect("encodes");
    round.push(b'\n');
    assert_eq!(round, body, "fixture re-encodes to itself");
    if let Some(Value::Array(items)) = whole.get_mut(key) {
        items.retain(keep);
    }
    let mut out = serde_json::to_vec(&whole).expect("encodes");
    out.push(b'\n');
    out
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("utf-8")
}

#[test]
fn api_versions_matches_fixture() {
    assert_eq!(
        text(&api_versions(&Served::initial(), "127.0.0.1:6443")),
        text(fixture!("discovery-api"))
    );
}

#[test]
fn core_resource_list_matches_fixture_for_served_entries() {
    let served: Vec<String> =
        serde_json::from_slice::<Value>(&api_resource_list(&Served::initial(), "", "v1").unwrap())
            .unwrap()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect();
    // Everything the sim has, with every subresource the apiserver lists for it.
    assert_eq!(
        served,
        [
            "configmaps",
            "endpoints",
            "events",
            "namespaces",
            "namespaces/finalize",
            "namespaces/status",
            "nodes",
            "nodes/proxy",
            "nodes/status",
            "pods",
            "pods/attach",
            "pods/binding",
            "pods/ephemeralcontainers",
            "pods/eviction",
            "pods/exec",
            "pods/log",
            "pods/portforward",
            "pods/proxy",
            "pods/resize",
            "pods/status",
            "secrets",
            "serviceaccounts",
            "serviceaccounts/token",
            "services",
            "services/proxy",
            "services/status",
        ]
    );
    let expected = filtered(fixture!("discovery-api-v1"), "resources", |r| {
        served.iter().any(|s| r["name"] == s.as_str())
    });
    assert_eq!(text(&api_resource_list(&Served::initial(), "", "v1").unwrap()), text(&expected));
}

#[test]
fn group_resource_list_matches_fixture() {
    assert_eq!(
        text(&api_resource_list(&Served::initial(), "discovery.k8s.io", "v1").unwrap()),
        text(fixture!("discovery-discovery-v1"))
    );
}

/// `/apis/apps/v1` as kube-apiserver 1.36 lists the two workloads the sim serves (the
/// apiserver also lists controllerrevisions, daemonsets and statefulsets).
#[test]
fn apps_resource_list() {
    assert_eq!(
        text(&api_resource_list(&Served::initial(), "apps", "v1").unwrap()),
        concat!(
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1","resources":["#,
            r#"{"name":"deployments","singularName":"deployment","namespaced":true,"kind":"Deployment","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"#,
            r#""shortNames":["deploy"],"categories":["all"],"storageVersionHash":"8aSe+NMegvE="},"#,
            r#"{"name":"deployments/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","#,
            r#""kind":"Scale","verbs":["get","patch","update"]},"#,
            r#"{"name":"deployments/status","singularName":"","namespaced":true,"kind":"Deployment","#,
            r#""verbs":["get","patch","update"]},"#,
            r#"{"name":"replicasets","singularName":"replicaset","namespaced":true,"kind":"ReplicaSet","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"#,
            r#""shortNames":["rs"],"categories":["all"],"storageVersionHash":"P1RzHs8/mWQ="},"#,
            r#"{"name":"replicasets/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","#,
            r#""kind":"Scale","verbs":["get","patch","update"]},"#,
            r#"{"name":"replicasets/status","singularName":"","namespaced":true,"kind":"ReplicaSet","#,
            r#""verbs":["get","patch","update"]}]}"#,
            "\n"
        )
    );
}

#[test]
fn events_group_lists_the_core_storage_hash() {
    assert_eq!(
        text(&api_resource_list(&Served::initial(), "events.k8s.io", "v1").unwrap()),
        concat!(
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"events.k8s.io/v1","#,
            r#""resources":[{"name":"events","singularName":"event","namespaced":true,"kind":"Event","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"#,
            r#""shortNames":["ev"],"storageVersionHash":"r2yiGXH7wu8="}]}"#,
            "\n"
        )
    );
}

#[test]
fn crd_resource_list_uses_the_apiextensions_shape() {
    assert_eq!(
        text(&api_resource_list(&Served::initial(), "demo.kubeplex.io", "v1").unwrap()),
        concat!(
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"demo.kubeplex.io/v1","#,
            r#""resources":[{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","#,
            r#""verbs":["delete","deletecollection","get","list","patch","create","update","watch"],"#,
            r#""shortNames":["wd"],"categories":["all"],"storageVersionHash":"wF4Y9aA1M1c="}]}"#,
            "\n"
        )
    );
}

/// Cilium's CRDs as the real apiserver lists them once installed
/// (`scripts/realcluster/crd-capture.py` installs them), status subresources included, byte for
/// byte; their storage version hashes are the apiserver's for `cilium.io/v2` and the kind.
#[test]
fn ciliums_crds_are_listed_as_the_apiserver_lists_them() {
    let captured = include_bytes!(concat!(
        "../../../../tests/fixtures/realcluster/custom/discovery-cilium.io-v2.json"
    ));
    assert_eq!(
        text(&api_resource_list(&Served::initial(), "cilium.io", "v2").unwrap()),
        text(captured)
    );
    for r in builtin().iter().filter(|r| r.group == "cilium.io") {
        assert_eq!(storage_version_hash(r.group, r.version, r.kind), r.storage_version_hash);
    }
}

#[test]
fn unknown_group_versions_are_none() {
    assert_eq!(api_resource_list(&Served::initial(), "", "v2"), None);
    assert_eq!(api_resource_list(&Served::initial(), "batch", "v1"), None);
    assert_eq!(api_resource_list(&Served::initial(), "apps", "v1beta2"), None);
    assert_eq!(api_resource_list(&Served::initial(), "discovery.k8s.io", "v1beta1"), None);
    assert_eq!(api_group(&Served::initial(), "batch"), None);
    assert_eq!(api_group(&Served::initial(), ""), None);
}

#[test]
fn group_list_matches_fixture_for_served_groups() {
    let expected = filtered(fixture!("discovery-apis"), "groups", |g| {
        [
            "apps",
            "events.k8s.io",
            "networking.k8s.io",
            "storage.k8s.io",
            "coordination.k8s.io",
            "node.k8s.io",
            "discovery.k8s.io",
        ]
        .iter()
        .any(|n| g["name"] == *n)
    });
    // The CRD groups are not in the capture; they follow the built-ins (priority 1000), by name.
    let mut expected = String::from_utf8(expected).unwrap();
    let crd = concat!(
        r#",{"name":"cilium.io","versions":[{"groupVersion":"cilium.io/v2","version":"v2"}],"#,
        r#""preferredVersion":{"groupVersion":"cilium.io/v2","version":"v2"}}"#,
        r#",{"name":"demo.kubeplex.io","versions":[{"groupVersion":"demo.kubeplex.io/v1","#,
        r#""version":"v1"}],"preferredVersion":{"groupVersion":"demo.kubeplex.io/v1","version":"v1"}}]}"#
    );
    expected.truncate(expected.len() - "]}\n".len());
    expected.push_str(crd);
    expected.push('\n');
    assert_eq!(text(&api_group_list(&Served::initial())), expected);
}

#[test]
fn api_group_document() {
    assert_eq!(
        text(&api_group(&Served::initial(), "discovery.k8s.io").unwrap()),
        concat!(
            r#"{"kind":"APIGroup","apiVersion":"v1","name":"discovery.k8s.io","versions":"#,
            r#"[{"groupVersion":"discovery.k8s.io/v1","version":"v1"}],"preferredVersion":"#,
            r#"{"groupVersion":"discovery.k8s.io/v1","version":"v1"}}"#,
            "\n"
        )
    );
}

#[test]
fn registry_is_consistent() {
    for r in builtin() {
        assert_eq!(r.custom, !r.protobuf, "{}: only custom resources lack protobuf", r.resource);
        assert_eq!(
            r.storage_version_hash,
            // events.k8s.io events are stored as core v1 Events; a CRD's versions all give
            // its storage version's (the table's first).
            if r.group == "events.k8s.io" {
                storage_version_hash("", "v1", r.kind)
            } else {
                let stored =
                    builtin().iter().find(|s| (s.group, s.resource) == (r.group, r.resource));
                storage_version_hash(r.group, stored.map_or(r.version, |s| s.version), r.kind)
            },
            "{}",
            r.resource
        );
        assert_eq!(find(r.group, r.version, r.resource), Some(r));
    }
    assert_eq!(find("", "v1", "widgets"), None);
}

#[test]
fn a_groups_versions_are_listed_by_priority_the_highest_preferred() {
    let mut served = Served::initial();
    let group = |served: &Served| -> Value {
        serde_json::from_slice(&api_group(served, "demo.kubeplex.io").expect("served")).unwrap()
    };
    assert_eq!(group(&served)["versions"].as_array().map(Vec::len), Some(1));
    served.serve_version("demo.kubeplex.io", "v2", "widgets", true);
    let doc = group(&served);
    let versions: Vec<_> =
        doc["versions"].as_array().unwrap().iter().map(|v| &v["version"]).collect();
    assert_eq!(versions, ["v2", "v1"]);
    assert_eq!(doc["preferredVersion"]["version"], "v2");
    let mut order = ["v1", "v2beta1", "v10", "v1alpha1", "v2", "v1beta2", "v11alpha2", "foo"];
    order.sort_by_key(|v| std::cmp::Reverse(super::version_priority(v)));
    // CompareKubeAwareVersionStrings' order (k8s.io/apimachinery/pkg/version).
    assert_eq!(order, ["v10", "v2", "v1", "v2beta1", "v1beta2", "v11alpha2", "v1alpha1", "foo"]);
}

#[test]
fn negotiation_follows_the_accept_header() {
    use DiscoveryFormat::*;
    let client_go = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
                     application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,\
                     application/json";
    assert_eq!(negotiate(client_go), AggregatedJson);
    assert!(wants_aggregated(client_go));
    assert_eq!(negotiate("application/json"), Legacy);
    assert_eq!(negotiate(""), Legacy);
    assert_eq!(negotiate("*/*"), Legacy);
    // v2beta1 is no longer served as aggregated.
    assert_eq!(
        negotiate("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
        Legacy
    );
    // Parameter order does not matter, spaces around them are trimmed.
    assert_eq!(
        negotiate("application/json; as=APIGroupDiscoveryList ; v=v2;g=apidiscovery.k8s.io"),
        AggregatedJson
    );
    assert_eq!(
        negotiate("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"),
        AggregatedProtobuf
    );
    assert!(!wants_aggregated(
        "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    ));
    // Quality decides before order.
    assert_eq!(
        negotiate("application/json;q=0.5,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        AggregatedJson
    );
    assert_eq!(
        negotiate("*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        AggregatedJson
    );
    // A stream schema other than watch makes the clause unacceptable; YAML cannot stream.
    assert_eq!(
        negotiate("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;stream=x"),
        Legacy
    );
    assert_eq!(
        negotiate(
            "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;stream=watch"
        ),
        Legacy
    );
    assert_eq!(negotiate("text/plain;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"), Legacy);
}

#[test]
fn aggregated_core_document() {
    let doc = aggregated(&Served::initial(), DiscoveryRoot::Api);
    let body = text(&doc.body);
    assert!(body.starts_with(
        r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{},"versions":[{"version":"v1","resources":[{"resource":"configmaps","responseKind":{"group":"","version":"","kind":"ConfigMap"},"scope":"Namespaced","singularResource":"configmap","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["cm"]},"#
    ));
    assert!(body.contains(
        r#"{"subresource":"eviction","responseKind":{"group":"policy","version":"v1","kind":"Eviction"},"verbs":["create"]}"#
    ));
    assert!(body.contains(
        r#"{"resource":"namespaces","responseKind":{"group":"","version":"","kind":"Namespace"},"scope":"Cluster","singularResource":"namespace","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["ns"],"subresources":[{"subresource":"finalize","responseKind":{"group":"","version":"","kind":"Namespace"},"verbs":["update"]},"#
    ));
    assert!(body.ends_with("}],\"freshness\":\"Current\"}]}]}\n"));
    // The ETag hashes the list without kind and apiVersion.
    let unhashed = body.trim_end().replacen(
        r#""kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","#,
        "",
        1,
    );
    assert_eq!(doc.etag, format!("\"{}\"", hash::etag(unhashed.as_bytes())));
    assert_eq!(doc.etag.len(), 130);
    assert!(doc.not_modified(Some(doc.etag.as_str())));
    assert!(!doc.not_modified(Some(doc.etag.trim_matches('"'))));
    assert!(!doc.not_modified(None));
}

#[test]
fn aggregated_groups_document() {
    let doc = aggregated(&Served::initial(), DiscoveryRoot::Apis);
    let cilium = include_str!(
        "../../../../tests/fixtures/realcluster/custom/discovery-aggregated-cilium.io.json"
    );
    assert_eq!(
        text(&doc.body),
        concat!(
            r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":["#,
            r#"{"metadata":{"name":"apps"},"versions":[{"version":"v1","resources":[{"resource":"deployments","#,
            r#""responseKind":{"group":"","version":"","kind":"Deployment"},"scope":"Namespaced","singularResource":"deployment","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["deploy"],"#,
            r#""categories":["all"],"subresources":[{"subresource":"scale","responseKind":{"group":"autoscaling","version":"v1","kind":"Scale"},"#,
            r#""verbs":["get","patch","update"]},{"subresource":"status","responseKind":{"group":"","version":"","kind":"Deployment"},"#,
            r#""verbs":["get","patch","update"]}]},{"resource":"replicasets","#,
            r#""responseKind":{"group":"","version":"","kind":"ReplicaSet"},"scope":"Namespaced","singularResource":"replicaset","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["rs"],"#,
            r#""categories":["all"],"subresources":[{"subresource":"scale","responseKind":{"group":"autoscaling","version":"v1","kind":"Scale"},"#,
            r#""verbs":["get","patch","update"]},{"subresource":"status","responseKind":{"group":"","version":"","kind":"ReplicaSet"},"#,
            r#""verbs":["get","patch","update"]}]}],"freshness":"Current"}]},"#,
            r#"{"metadata":{"name":"events.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"events","#,
            r#""responseKind":{"group":"","version":"","kind":"Event"},"scope":"Namespaced","singularResource":"event","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["ev"]}],"#,
            r#""freshness":"Current"}]},"#,
            // What node agents read: cluster-scoped but for leases, no short names.
            r#"{"metadata":{"name":"networking.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"servicecidrs","#,
            r#""responseKind":{"group":"","version":"","kind":"ServiceCIDR"},"scope":"Cluster","singularResource":"servicecidr","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"#,
            r#""subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"ServiceCIDR"},"#,
            r#""verbs":["get","patch","update"]}]}],"freshness":"Current"}]},"#,
            r#"{"metadata":{"name":"storage.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"csidrivers","#,
            r#""responseKind":{"group":"","version":"","kind":"CSIDriver"},"scope":"Cluster","singularResource":"csidriver","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"]}],"freshness":"Current"}]},"#,
            r#"{"metadata":{"name":"coordination.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"leases","#,
            r#""responseKind":{"group":"","version":"","kind":"Lease"},"scope":"Namespaced","singularResource":"lease","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"]}],"freshness":"Current"}]},"#,
            r#"{"metadata":{"name":"node.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"runtimeclasses","#,
            r#""responseKind":{"group":"","version":"","kind":"RuntimeClass"},"scope":"Cluster","singularResource":"runtimeclass","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"]}],"freshness":"Current"}]},"#,
            r#"{"metadata":{"name":"discovery.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"endpointslices","#,
            r#""responseKind":{"group":"","version":"","kind":"EndpointSlice"},"scope":"Namespaced","singularResource":"endpointslice","#,
            r#""verbs":["create","delete","deletecollection","get","list","patch","update","watch"]}],"freshness":"Current"}]},"#,
            // Cilium's CRDs, as the real apiserver's aggregated discovery lists them
            // (tests/fixtures/realcluster/custom/discovery-aggregated-cilium.io.json).
            "@cilium.io@,",
            r#"{"metadata":{"name":"demo.kubeplex.io"},"versions":[{"version":"v1","resources":[{"resource":"widgets","#,
            r#""responseKind":{"group":"demo.kubeplex.io","version":"v1","kind":"Widget"},"scope":"Namespaced","singularResource":"widget","#,
            r#""verbs":["delete","deletecollection","get","list","patch","create","update","watch"],"shortNames":["wd"],"categories":["all"]}],"#,
            r#""freshness":"Current"}]}]}"#,
            "\n"
        )
        .replace("@cilium.io@", cilium.trim_end())
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn negotiation_never_panics(accept in "[a-z/*;=,. 0-9qgvas-]{0,80}") {
            let _ = negotiate(&accept);
        }

        #[test]
        fn lookups_never_panic(group in "\\PC{0,20}", version in "\\PC{0,5}") {
            let _ = api_resource_list(&Served::initial(), &group, &version);
            let _ = api_group(&Served::initial(), &group);
        }
    }
}
