//! Tables (what `kubectl get` asks for) through kubeplex: for every kind with a printer, gets
//! and lists answered from the cache equal the fake apiserver's own Tables byte for byte —
//! columns, cells, `includeObject`, paging, selectors; Tables kubeplex cannot print pass
//! through.
//!
//! Ages: the sim stamps `creationTimestamp` when an object is created (as the apiserver does),
//! so the AGE cells of this test's objects count seconds, and each server prints them at the
//! moment it answers. Every age is a whole number of seconds since a whole-second timestamp,
//! so two Tables printed within the same wall-clock second are identical; a pair of answers
//! that differs is retried only when a second boundary fell between the two requests, and a
//! difference within one second fails.

use kubeplex_test_support as support;
use support::shapes;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use kubeplex_sim::SimBuilder;
use serde_json::{json, Value};
use support::stack::Stack;
use support::*;

/// `kubectl get`'s Accept header.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const TABLE_V1: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const INCLUDE: [&str; 4] =
    ["", "&includeObject=None", "&includeObject=Metadata", "&includeObject=Object"];

/// Every cache this file reads from, started with kubeplex.
const CACHES: &[&str] = &[
    "pods",
    "nodes",
    "services",
    "namespaces",
    "configmaps",
    "secrets",
    "endpoints",
    "events",
    "discovery.k8s.io/v1/endpointslices",
    "events.k8s.io/v1/events",
    "apps/v1/deployments",
    "apps/v1/replicasets",
];

/// Objects of the kinds the seed cluster lacks (or in states it lacks), in namespace `fx`.
fn extra_objects() -> Vec<Value> {
    let ts = "2026-11-22T10:00:00Z";
    vec![
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "opaque", "namespace": "fx", "labels": {"app": "web"}},
            "type": "Opaque", "data": {"a": "MQ==", "b": "Mg=="}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls", "namespace": "fx"},
            "type": "kubernetes.io/tls", "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-x1", "namespace": "fx", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.0.2"], "conditions": {"ready": true}, "nodeName": "node-0"},
                {"addresses": ["10.244.1.2", "10.244.1.3"], "conditions": {"ready": false}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9090, "protocol": "TCP"}]}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "empty-x2", "namespace": "fx", "labels": {"kubernetes.io/service-name": "empty"}},
            "addressType": "IPv6", "endpoints": [], "ports": null}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "fx"},
            "subsets": [{"addresses": [{"ip": "10.244.0.2"}, {"ip": "10.244.1.2"}], "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-0.pulled", "namespace": "fx"},
            "involvedObject": {"kind": "Pod", "namespace": "fx", "name": "web-0", "apiVersion": "v1", "fieldPath": "spec.containers{app}"},
            "reason": "Pulled", "message": "Container image already present on machine",
            "source": {"component": "kubelet", "host": "node-0"}, "firstTimestamp": ts, "lastTimestamp": "2026-11-22T10:05:00Z",
            "count": 3, "type": "Normal", "reportingComponent": "kubelet", "reportingInstance": "node-0"}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-0.backoff", "namespace": "fx"},
            "involvedObject": {"kind": "Pod", "namespace": "fx", "name": "web-0", "apiVersion": "v1"},
            "reason": "BackOff", "message": "Back-off restarting failed container", "type": "Warning",
            "eventTime": "2026-11-22T10:00:00.000000Z", "action": "Restarting", "reportingComponent": "kubelet",
            "reportingInstance": "node-0", "series": {"count": 5, "lastObservedTime": "2026-11-22T11:00:00.000000Z"}}),
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web-0.scheduled", "namespace": "fx"},
            "eventTime": "2026-11-22T10:00:00.000000Z", "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-node-0", "action": "Binding", "reason": "Scheduled",
            "regarding": {"kind": "Pod", "namespace": "fx", "name": "web-0", "apiVersion": "v1"},
            "note": "Successfully assigned fx/web-0 to node-0", "type": "Normal"}),
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web-0.unhealthy", "namespace": "fx"},
            "eventTime": null, "reportingController": "kubelet", "reportingInstance": "node-0", "action": "Probe",
            "reason": "Unhealthy", "regarding": {"kind": "Pod", "namespace": "fx", "name": "web-0", "fieldPath": "spec.containers{app}"},
            "note": "Readiness probe failed", "type": "Warning", "deprecatedSource": {"component": "kubelet", "host": "node-0"},
            "deprecatedFirstTimestamp": "2026-11-22T10:00:00Z", "deprecatedLastTimestamp": "2026-11-22T12:00:00Z", "deprecatedCount": 7}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb", "namespace": "fx"},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 8443, "nodePort": 30443}],
                "selector": {"app": "web"}, "clusterIP": "10.96.9.9", "clusterIPs": ["10.96.9.9"], "externalIPs": ["192.0.2.7"]},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.4"}]}}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext", "namespace": "fx"},
            "spec": {"type": "ExternalName", "externalName": "db.example.org"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-cordoned", "labels": {"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "False", "lastHeartbeatTime": ts, "lastTransitionTime": ts, "reason": "KubeletNotReady"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.9.9"}],
                "nodeInfo": {"kubeletVersion": "v1.36.2", "osImage": "Debian GNU/Linux 12", "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.0"}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crashy", "namespace": "fx", "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1", "initContainers": [{"name": "init", "image": "busybox"}], "containers": [{"name": "app", "image": "web:1"}, {"name": "side", "image": "side:1"}]},
            "status": {"phase": "Running", "podIP": "10.244.1.9", "podIPs": [{"ip": "10.244.1.9"}],
                "initContainerStatuses": [{"name": "init", "ready": true, "restartCount": 0, "image": "busybox", "imageID": "",
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts, "finishedAt": ts}}}],
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 4, "image": "web:1", "imageID": "",
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": ts, "finishedAt": "2026-11-22T11:00:00Z"}}},
                    {"name": "side", "ready": true, "restartCount": 0, "image": "side:1", "imageID": "", "state": {"running": {"startedAt": ts}}}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending", "namespace": "fx"},
            "spec": {"containers": [{"name": "app", "image": "web:1"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "fx"}}),
        // Workloads as their controllers leave them (the sim runs none): a rolling deployment,
        // one with set-based selectors and a zero scale, and a replicaset of the first.
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "fx", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "web:1"}, {"name": "side", "image": "side:1"}]}}},
            "status": {"observedGeneration": 1, "replicas": 3, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 1}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "idle", "namespace": "fx"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "idle"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                "template": {"metadata": {"labels": {"app": "idle", "tier": "a"}}, "spec": {"containers": [{"name": "c", "image": "idle:1"}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-5d8f", "namespace": "fx", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8f"}},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "5d8f"}}, "spec": {"containers": [{"name": "app", "image": "web:1"}]}}},
            "status": {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "fx", "labels": {"app": "web"}},
            "data": {"a": "1"}}),
    ]
}

async fn stack() -> Stack {
    Stack::with_sim(SimBuilder::new().seed(extra_objects()), shapes::SMALL, CACHES).await
}

fn whole_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn show(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(800)]).into_owned()
}

/// Both bodies around where they first differ.
fn difference(ours: &[u8], theirs: &[u8]) -> String {
    let at =
        ours.iter().zip(theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
    let around = |b: &[u8]| {
        let (from, to) = (at.saturating_sub(200), (at + 200).min(b.len()));
        String::from_utf8_lossy(&b[from.min(to)..to]).into_owned()
    };
    format!("at byte {at}\nkubeplex:  …{}…\napiserver: …{}…", around(ours), around(theirs))
}

/// Asserts kubeplex answered `path` from its cache with the apiserver's Table, byte for byte.
async fn assert_same_table(stack: &Stack, path: &str, accept: &str) -> Resp {
    for _attempt in 0..5 {
        let before = stack.served_from("cache").await;
        let started = SystemTime::now();
        let ours = get_accept(&stack.addr(), path, accept).await;
        let theirs = get_accept(&stack.upstream(), path, accept).await;
        let ended = SystemTime::now();
        assert_eq!(
            stack.served_from("cache").await,
            before + 1,
            "{path} was not answered from the cache: {}",
            show(&ours.body)
        );
        assert_eq!(ours.status, theirs.status, "{path}: status ({})", show(&theirs.body));
        assert_eq!(ours.header("content-type"), theirs.header("content-type"), "{path}");
        assert_eq!(ours.header("cache-control"), "no-cache, private");
        if ours.body == theirs.body {
            return ours;
        }
        assert_ne!(
            whole_seconds(started),
            whole_seconds(ended),
            "{path}: Tables printed within one second differ {}",
            difference(&ours.body, &theirs.body)
        );
    }
    panic!("{path}: every attempt straddled a second boundary");
}

/// How many rows a Table of `path` has: the objects of the apiserver's plain JSON answer.
async fn objects_in(stack: &Stack, path: &str) -> usize {
    let plain = get(&stack.upstream(), path).await.json();
    let n = plain["items"].as_array().map_or(1, Vec::len);
    assert!(n > 0, "{path}: nothing to print");
    n
}

/// A Table with `rows` rows and column definitions.
fn assert_table(resp: &Resp, rows: usize, path: &str) -> Value {
    let t = resp.json();
    assert_eq!(t["kind"], "Table", "{path}");
    assert!(t["columnDefinitions"].as_array().is_some_and(|c| !c.is_empty()), "{path}");
    assert_eq!(t["rows"].as_array().map(Vec::len), Some(rows), "{path}");
    t
}

#[tokio::test]
async fn tables_of_every_printed_kind_come_from_the_cache() {
    let stack = stack().await;
    // Lists across namespaces, in one, cluster-scoped, and gets.
    let paths = [
        "/api/v1/pods",
        "/api/v1/namespaces/fx/pods",
        "/api/v1/namespaces/fx/pods/crashy",
        "/api/v1/namespaces/team-0/pods/app-3-00003",
        "/api/v1/nodes",
        "/api/v1/nodes/node-cordoned",
        "/api/v1/services",
        "/api/v1/namespaces/fx/services/lb",
        "/api/v1/namespaces",
        "/api/v1/namespaces/fx",
        "/api/v1/configmaps",
        "/api/v1/namespaces/team-1/configmaps/config-1",
        "/api/v1/namespaces/fx/secrets",
        "/api/v1/namespaces/fx/secrets/tls",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/apis/discovery.k8s.io/v1/namespaces/fx/endpointslices/web-x1",
        "/api/v1/namespaces/fx/events",
        "/api/v1/namespaces/fx/events/web-0.backoff",
        "/apis/events.k8s.io/v1/events",
        "/apis/events.k8s.io/v1/namespaces/fx/events/web-0.unhealthy",
        "/apis/apps/v1/deployments",
        "/apis/apps/v1/namespaces/fx/deployments/idle",
        "/apis/apps/v1/namespaces/fx/replicasets",
        "/apis/apps/v1/namespaces/fx/replicasets/web-5d8f",
    ];
    let rv = stack.sim.current_rv();
    for path in paths {
        let rows = objects_in(&stack, path).await;
        for position in ["resourceVersion=0".to_string(), format!("resourceVersion={rv}")] {
            for include in INCLUDE {
                let path = format!("{path}?{position}{include}");
                let resp = assert_same_table(&stack, &path, TABLE).await;
                let t = assert_table(&resp, rows, &path);
                let object = &t["rows"][0]["object"];
                match include {
                    "&includeObject=None" => assert!(object.is_null(), "{path}"),
                    // The whole object: its own kind, and more than metadata.
                    "&includeObject=Object" => assert!(
                        object["kind"] != "PartialObjectMetadata"
                            && object.as_object().is_some_and(|o| o.len() > 3),
                        "{path}: {object}"
                    ),
                    _ => assert_eq!(object["kind"], "PartialObjectMetadata", "{path}"),
                }
            }
        }
    }
    // The bare v1 media type, as other clients send it.
    assert_same_table(&stack, "/api/v1/pods?resourceVersion=0", TABLE_V1).await;
    // A missing object: the apiserver's 404.
    let missing =
        assert_same_table(&stack, "/api/v1/namespaces/fx/pods/nope?resourceVersion=0", TABLE).await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn table_selectors_and_pages_come_from_the_cache() {
    let stack = stack().await;
    let rv = stack.sim.current_rv();
    for path in [
        "/api/v1/pods?resourceVersion=0&labelSelector=app%3Dapp-3",
        "/api/v1/pods?resourceVersion=0&labelSelector=tier%20in%20(backend),app!%3Dapp-0",
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-1",
        "/api/v1/pods?resourceVersion=0&fieldSelector=status.phase%3DPending",
        "/api/v1/nodes?resourceVersion=0&labelSelector=kubernetes.io%2Fos%3Dlinux",
        "/api/v1/nodes?resourceVersion=0&fieldSelector=spec.unschedulable%3Dtrue",
        "/api/v1/secrets?resourceVersion=0&fieldSelector=type%3Dkubernetes.io%2Ftls",
        "/api/v1/namespaces/fx/events?resourceVersion=0&fieldSelector=type%3DWarning",
        "/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0&labelSelector=kubernetes.io%2Fservice-name%3Dweb",
        "/api/v1/configmaps?resourceVersion=0&fieldSelector=metadata.namespace%3Dteam-2",
        "/apis/apps/v1/replicasets?resourceVersion=0&labelSelector=app%3Dweb",
        "/apis/apps/v1/deployments?resourceVersion=0&fieldSelector=metadata.name%3Didle",
    ] {
        let rows = objects_in(&stack, path).await;
        for include in INCLUDE {
            let path = format!("{path}{include}");
            assert_table(&assert_same_table(&stack, &path, TABLE).await, rows, &path);
        }
    }
    // Pages: limit and continue, remainingItemCount and the first page's RV on every page,
    // with and without a selector, in each includeObject form; at the list's exact RV and
    // not older than it.
    for first in [
        format!("/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=NotOlderThan&limit=7"),
        format!("/api/v1/pods?resourceVersion={rv}&limit=25"),
        format!("/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact&limit=4&labelSelector=tier%3Dbackend"),
        format!("/api/v1/configmaps?resourceVersion={rv}&resourceVersionMatch=NotOlderThan&limit=3"),
    ] {
        for include in INCLUDE {
            let mut path = format!("{first}{include}");
            let (mut pages, mut rows) = (0, 0);
            loop {
                assert!(pages < 30, "paging does not end");
                let t = assert_same_table(&stack, &path, TABLE).await.json();
                assert_eq!(t["metadata"]["resourceVersion"], rv.to_string(), "{path}");
                rows += t["rows"].as_array().map_or(0, Vec::len);
                pages += 1;
                match t["metadata"]["continue"].as_str() {
                    Some(token) => {
                        let selector = first.split('&').find(|p| p.starts_with("labelSelector"));
                        let base = first.split('?').next().unwrap_or_default();
                        let limit = first.split('&').find(|p| p.starts_with("limit")).unwrap_or("");
                        path = format!("{base}?{limit}&continue={token}{include}");
                        if let Some(s) = selector {
                            path.push('&');
                            path.push_str(s);
                        }
                    }
                    None => break,
                }
            }
            assert!(pages > 1, "{first}: several pages");
            let unpaged: Vec<&str> = first.split('&').filter(|p| !p.starts_with("limit=")).collect();
            let unpaged = unpaged.join("&");
            assert_eq!(rows, objects_in(&stack, &unpaged).await, "{first}{include}: every row once");
        }
    }
}

#[tokio::test]
async fn tables_kubeplex_cannot_print_pass_through() {
    let stack = stack().await;
    let before = stack.served_from("cache").await;
    let upstream_before = stack.served_from("upstream").await;
    for (path, accept) in [
        // A bad includeObject: the apiserver's 400 in its words.
        ("/api/v1/pods?resourceVersion=0&includeObject=Everything", TABLE),
        ("/api/v1/namespaces/fx/pods/crashy?resourceVersion=0&includeObject=none", TABLE),
        // No printer in kubeplex: the apiserver's columns.
        ("/api/v1/namespaces/fx/serviceaccounts?resourceVersion=0", TABLE),
        // A custom resource: its columns come from its CRD.
        ("/apis/demo.kubeplex.io/v1/namespaces/fx/widgets?resourceVersion=0", TABLE),
        // The v1beta1 Table.
        ("/api/v1/pods?resourceVersion=0", "application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
    ] {
        let ours = get_accept(&stack.addr(), path, accept).await;
        let theirs = get_accept(&stack.upstream(), path, accept).await;
        assert_eq!(ours.status, theirs.status, "{path}");
        assert_eq!(ours.header("content-type"), theirs.header("content-type"), "{path}");
        if ours.status != 200 {
            assert_eq!(ours.body, theirs.body, "{path}");
        }
    }
    let bad =
        get_accept(&stack.addr(), "/api/v1/pods?resourceVersion=0&includeObject=Everything", TABLE)
            .await;
    assert_eq!(bad.status, 400);
    assert_eq!(stack.served_from("cache").await, before, "none was answered from the cache");
    assert!(stack.served_from("upstream").await >= upstream_before + 6);
}

#[tokio::test]
async fn large_tables_are_gzipped_as_the_apiserver_does() {
    let stack = stack().await;
    // 62 pods with their whole objects: well over the apiserver's 128 KiB threshold.
    let path = "/api/v1/pods?resourceVersion=0&includeObject=Object";
    let gz = [("Accept", TABLE), ("Accept-Encoding", "gzip")];
    let gunzip = |body: &[u8]| {
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(body), &mut plain)
            .expect("gunzip");
        plain
    };
    for _attempt in 0..5 {
        let before = stack.served_from("cache").await;
        let started = SystemTime::now();
        let ours = request(&stack.addr(), Method::GET, path, &gz, None).await;
        let theirs = request(&stack.upstream(), Method::GET, path, &gz, None).await;
        let ended = SystemTime::now();
        assert_eq!(stack.served_from("cache").await, before + 1);
        for r in [&ours, &theirs] {
            assert_eq!(
                (r.status, r.header("content-encoding"), r.header("vary")),
                (200, "gzip", "Accept-Encoding")
            );
        }
        if gunzip(&ours.body) == gunzip(&theirs.body) {
            return;
        }
        assert_ne!(whole_seconds(started), whole_seconds(ended), "gzipped Tables differ");
    }
    panic!("every attempt straddled a second boundary");
}

/// kubectl reads with resourceVersion unset (a consistent read): kubeplex proves its cache
/// current and prints the Tables from it (no LIST passes through), the same as the apiserver.
#[tokio::test]
async fn kubectl_get_prints_the_same_through_kubeplex() {
    let stack = stack().await;
    let via = stack.write_client_kubeconfig();
    let direct = stack.dir.join("upstream.kubeconfig");
    let (h1, h2) = (stack.dir.join("home-via"), stack.dir.join("home-direct"));
    for args in [
        &["get", "pods", "-A", "-o", "wide"][..],
        &["get", "pods", "-n", "fx", "-o", "wide", "--show-labels"],
        &["get", "nodes", "-o", "wide"],
        &["get", "services,endpointslices,endpoints,secrets,configmaps", "-n", "fx"],
        &["get", "events", "-n", "fx"],
        &["get", "events.events.k8s.io", "-n", "fx"],
        &["get", "namespaces"],
        &["get", "deployments,replicasets", "-n", "fx", "-o", "wide"],
        &["get", "pods", "-A", "--chunk-size=9", "-l", "tier=backend"],
    ] {
        let mut same = false;
        for _attempt in 0..5 {
            let started = SystemTime::now();
            let (lists_up, lists_cached) = (
                stack.served_verb_from("LIST", "upstream").await,
                stack.served_verb_from("LIST", "cache").await,
            );
            let ours = kubectl::run(&via, &h1, args).await;
            assert_eq!(
                stack.served_verb_from("LIST", "upstream").await,
                lists_up,
                "kubectl {args:?}: a list passed through"
            );
            assert!(
                stack.served_verb_from("LIST", "cache").await > lists_cached,
                "kubectl {args:?}: answered from the cache"
            );
            let theirs = kubectl::run(&direct, &h2, args).await;
            let ended = SystemTime::now();
            assert!(ours.lines().count() > 1, "kubectl {args:?}: {ours}");
            if ours == theirs {
                same = true;
                break;
            }
            assert_ne!(
                whole_seconds(started),
                whole_seconds(ended),
                "kubectl {args:?}\nkubeplex:\n{ours}\napiserver:\n{theirs}"
            );
        }
        assert!(same, "kubectl {args:?}: every attempt straddled a second boundary");
    }
}

/// A watch event line through kubeplex against the apiserver's. Each server prints an event
/// when it sends it, so the AGE of an object created seconds ago may tick between the two; a
/// pair of lines that differs must be the same once cells that read as seconds ("0s", "1s")
/// are blanked, and nothing else may differ.
fn assert_same_event(ours: &[u8], theirs: &[u8], path: &str) {
    if ours == theirs {
        return;
    }
    let blank_ages = |line: &[u8]| {
        let mut v: Value = serde_json::from_slice(line).expect("event is JSON");
        for row in v["object"]["rows"].as_array_mut().into_iter().flatten() {
            for cell in row["cells"].as_array_mut().into_iter().flatten() {
                let age = cell.as_str().and_then(|s| s.strip_suffix('s'));
                if age.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
                    *cell = json!("<age>");
                }
            }
        }
        serde_json::to_string(&v).expect("json")
    };
    assert_eq!(
        blank_ages(ours),
        blank_ages(theirs),
        "{path}: events differ in more than an age {}",
        difference(ours, theirs)
    );
}

#[tokio::test]
async fn table_watches_come_from_the_cache() {
    let stack = stack().await;
    let rv = stack.sim.current_rv();
    let state = objects_in(&stack, "/api/v1/namespaces/fx/configmaps").await;
    let before = stack.served_from("cache").await;
    // (query, events each stream carries for the changes below)
    let starts = [
        (format!("resourceVersion={rv}"), 4),
        ("resourceVersion=0".to_string(), state + 4),
        (format!("resourceVersion={rv}&labelSelector=app%3Dweb"), 3),
        ("resourceVersion=0&fieldSelector=metadata.name%3Dw".to_string(), 4),
    ];
    let mut streams = Vec::new();
    for (query, events) in &starts {
        for include in INCLUDE {
            let path = format!("/api/v1/namespaces/fx/configmaps?watch=1&{query}{include}");
            let ours = watch(&stack.addr(), &path, TABLE).await;
            let theirs = watch(&stack.upstream(), &path, TABLE).await;
            assert_eq!((ours.status, theirs.status), (200, 200), "{path}");
            let content_type = |w: &Watch| w.headers.get("content-type").cloned();
            assert_eq!(content_type(&ours), content_type(&theirs), "{path}");
            streams.push((path, *events, ours, theirs));
        }
    }
    assert_eq!(
        stack.served_from("cache").await,
        before + streams.len() as u64,
        "every Table watch was answered from the cache"
    );
    // Created, changed, moved out of `app=web` (DELETED for that watch), deleted.
    let cm = |labels: Value, data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "w", "namespace": "fx", "labels": labels}, "data": data})
    };
    stack.sim.create(cm(json!({"app": "web"}), json!({"a": "1"}))).expect("create");
    stack.sim.modify("", "configmaps", "fx", "w", |v| v["data"]["b"] = json!("2")).expect("modify");
    stack
        .sim
        .modify("", "configmaps", "fx", "w", |v| v["metadata"]["labels"]["app"] = json!("db"))
        .expect("relabel");
    stack.sim.delete("", "configmaps", "fx", "w").expect("delete");
    for (path, events, ours, theirs) in &mut streams {
        for i in 0..*events {
            let theirs = theirs.next_line_within(STEP).await.expect("the apiserver's event");
            let ours = ours.next_line_within(STEP).await.unwrap_or_else(|| {
                panic!("{path}: event {i} missing; the apiserver sent {}", show(&theirs))
            });
            assert_same_event(&ours, &theirs, path);
            let columns = &serde_json::from_slice::<Value>(&ours).expect("json")["object"]
                ["columnDefinitions"];
            assert_eq!(columns.is_array(), i == 0, "{path}: columns on the first event only");
        }
        let extra = ours.next_line_within(Duration::from_millis(200)).await;
        assert!(extra.is_none(), "{path}: unexpected {:?}", extra.map(|l| show(&l)));
    }
    // Bookmarks in a Table watch are the apiserver's to render: passed through.
    let cache = stack.served_from("cache").await;
    let path = format!(
        "/api/v1/namespaces/fx/configmaps?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"
    );
    let w = watch(&stack.addr(), &path, TABLE).await;
    assert_eq!(w.status, 200);
    assert_eq!(stack.served_from("cache").await, cache, "a Table watch with bookmarks");
}

/// Deployments and replicasets through kubeplex in every encoding a client reads them in:
/// JSON and protobuf lists, and JSON, protobuf and Table watches, all answered from the caches
/// with the apiserver's bytes as a deployment is created, scaled by its "controller" and deleted.
#[tokio::test]
async fn workloads_in_json_protobuf_and_tables_come_from_the_cache() {
    const PB: &str = "application/vnd.kubernetes.protobuf";
    const JSON: &str = "application/json";
    let caches = [
        "apps/v1/deployments",
        "apps/v1/deployments:protobuf",
        "apps/v1/replicasets",
        "apps/v1/replicasets:protobuf",
    ];
    let stack =
        Stack::with_sim(SimBuilder::new().seed(extra_objects()), shapes::SMALL, &caches).await;
    for path in ["/apis/apps/v1/deployments", "/apis/apps/v1/namespaces/fx/replicasets"] {
        for accept in [JSON, PB] {
            let path = format!("{path}?resourceVersion=0");
            let before = stack.served_from("cache").await;
            let ours = get_accept(&stack.addr(), &path, accept).await;
            let theirs = get_accept(&stack.upstream(), &path, accept).await;
            assert_eq!(stack.served_from("cache").await, before + 1, "{path} ({accept})");
            assert_eq!((ours.status, ours.header("content-type")), (200, accept), "{path}");
            assert!(
                ours.body == theirs.body,
                "{path} ({accept}){}",
                difference(&ours.body, &theirs.body)
            );
        }
    }
    let rv = stack.sim.current_rv();
    let before = stack.served_from("cache").await;
    let mut streams = Vec::new();
    for resource in ["deployments", "replicasets"] {
        for accept in [JSON, PB, TABLE] {
            let path =
                format!("/apis/apps/v1/namespaces/fx/{resource}?watch=1&resourceVersion={rv}");
            let ours = watch(&stack.addr(), &path, accept).await;
            let theirs = watch(&stack.upstream(), &path, accept).await;
            assert_eq!((ours.status, theirs.status), (200, 200), "{path}");
            streams.push((path, accept, ours, theirs));
        }
    }
    assert_eq!(
        stack.served_from("cache").await,
        before + 6,
        "every watch was answered from the cache"
    );
    let name = |kind: &str| if kind == "Deployment" { "api" } else { "api-7c9d" };
    for kind in ["Deployment", "ReplicaSet"] {
        stack
            .sim
            .create(json!({"apiVersion": "apps/v1", "kind": kind,
                "metadata": {"name": name(kind), "namespace": "fx"},
                "spec": {"selector": {"matchLabels": {"app": "api"}},
                    "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "api", "image": "api:1"}]}}}}))
            .expect("create");
    }
    for resource in ["deployments", "replicasets"] {
        let kind = if resource == "deployments" { "Deployment" } else { "ReplicaSet" };
        stack
            .sim
            .modify("apps", resource, "fx", name(kind), |v| {
                v["status"] = json!({"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1})
            })
            .expect("status");
        stack.sim.delete("apps", resource, "fx", name(kind)).expect("delete");
    }
    for (path, accept, ours, theirs) in &mut streams {
        for i in 0..3 {
            let (ours, theirs) = if *accept == PB {
                (ours.next_frame_within(STEP).await, theirs.next_frame_within(STEP).await)
            } else {
                (ours.next_line_within(STEP).await, theirs.next_line_within(STEP).await)
            };
            let theirs = theirs.expect("the apiserver's event");
            let ours = ours.unwrap_or_else(|| panic!("{path} ({accept}): event {i} missing"));
            if *accept == TABLE {
                assert_same_event(&ours, &theirs, path);
            } else {
                assert!(
                    ours == theirs,
                    "{path} ({accept}): event {i}{}",
                    difference(&ours, &theirs)
                );
            }
        }
    }
}
