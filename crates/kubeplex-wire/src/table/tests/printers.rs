//! The non-pod printers and the custom-resource default table.

use super::*;

fn now() -> DateTime<Utc> {
    time("2026-11-22T12:00:00Z")
}

fn with_meta(mut obj: Value, age_secs: i64) -> Value {
    obj["metadata"] = json!({"name": "o", "resourceVersion": "3",
        "creationTimestamp": at_ago(now(), age_secs)});
    obj
}

/// The column names of a resource's table.
fn column_names(resource: &str, group: &str) -> Vec<String> {
    let body = table_for_object(resource, group, &json!({}), IncludeObject::None, now());
    let table: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fields::arr_at(&table, &["columnDefinitions"])
        .iter()
        .map(|c| format!("{}:{}:{}", c["name"], c["type"], c["priority"]).replace('"', ""))
        .collect()
}

#[test]
fn column_layouts() {
    assert_eq!(
        column_names("secrets", ""),
        ["Name:string:0", "Type:string:0", "Data:string:0", "Age:string:0"]
    );
    assert_eq!(
        column_names("services", ""),
        [
            "Name:string:0",
            "Type:string:0",
            "Cluster-IP:string:0",
            "External-IP:string:0",
            "Port(s):string:0",
            "Age:string:0",
            "Selector:string:1"
        ]
    );
    assert_eq!(
        column_names("namespaces", ""),
        ["Name:string:0", "Status:string:0", "Age:string:0"]
    );
    assert_eq!(
        column_names("nodes", ""),
        [
            "Name:string:0",
            "Status:string:0",
            "Roles:string:0",
            "Age:string:0",
            "Version:string:0",
            "Internal-IP:string:1",
            "External-IP:string:1",
            "OS-Image:string:1",
            "Kernel-Version:string:1",
            "Container-Runtime:string:1"
        ]
    );
    let events = [
        "Last Seen:string:0",
        "Type:string:0",
        "Reason:string:0",
        "Object:string:0",
        "Subobject:string:1",
        "Source:string:1",
        "Message:string:0",
        "First Seen:string:1",
        "Count:string:1",
        "Name:string:1",
    ];
    assert_eq!(column_names("events", ""), events);
    assert_eq!(column_names("events", "events.k8s.io"), events);
    assert_eq!(
        column_names("endpoints", ""),
        ["Name:string:0", "Endpoints:string:0", "Age:string:0"]
    );
    assert_eq!(
        column_names("endpointslices", "discovery.k8s.io"),
        [
            "Name:string:0",
            "AddressType:string:0",
            "Ports:string:0",
            "Endpoints:string:0",
            "Age:string:0"
        ]
    );
    assert_eq!(
        column_names("replicasets", "apps"),
        [
            "Name:string:0",
            "Desired:integer:0",
            "Current:integer:0",
            "Ready:integer:0",
            "Age:string:0",
            "Containers:string:1",
            "Images:string:1",
            "Selector:string:1"
        ]
    );
    assert_eq!(column_names("widgets", "example.com"), ["Name:string:0", "Age:date:0"]);
}

#[test]
fn secrets_namespaces_configmaps() {
    let s = with_meta(
        json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""},
        "stringData": {"tls.key": "x", "extra": "y"}}),
        90,
    );
    assert_eq!(cells("secrets", "", &s, now()), json!(["o", "kubernetes.io/tls", 3, "90s"]));
    let ns = with_meta(json!({"status": {"phase": "Terminating"}}), 86400 * 3 + 3600);
    assert_eq!(cells("namespaces", "", &ns, now()), json!(["o", "Terminating", "3d1h"]));
    let cm = with_meta(json!({"data": {"a": "1"}, "binaryData": {"b": "AA=="}}), 0);
    assert_eq!(cells("configmaps", "", &cm, now()), json!(["o", 2, "0s"]));
}

#[test]
fn services() {
    let svc = |spec: Value, status: Value| with_meta(json!({"spec": spec, "status": status}), 600);
    let cluster_ip = svc(
        json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::a"],
            "ports": [{"port": 53, "protocol": "UDP"}, {"port": 9153, "protocol": "TCP"}],
            "selector": {"k8s-app": "kube-dns", "a": "b"}}),
        json!({}),
    );
    assert_eq!(
        cells("services", "", &cluster_ip, now()),
        json!([
            "o",
            "ClusterIP",
            "10.96.0.10",
            "<none>",
            "53/UDP,9153/TCP",
            "10m",
            "a=b,k8s-app=kube-dns"
        ])
    );
    let node_port = svc(
        json!({"type": "NodePort", "clusterIPs": ["10.0.0.1"], "externalIPs": ["1.2.3.4", "5.6.7.8"],
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}),
        json!({}),
    );
    assert_eq!(
        cells("services", "", &node_port, now()),
        json!(["o", "NodePort", "10.0.0.1", "1.2.3.4,5.6.7.8", "80:30080/TCP", "10m", "<none>"])
    );
    let pending = svc(json!({"type": "LoadBalancer", "clusterIPs": ["10.0.0.2"]}), json!({}));
    assert_eq!(
        cells("services", "", &pending, now()),
        json!(["o", "LoadBalancer", "10.0.0.2", "<pending>", "<none>", "10m", "<none>"])
    );
    let lb_ingress = json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.com"},
        {"ip": "9.9.9.9", "hostname": "ignored"}, {"ip": "1.1.1.1"}, {"ip": "1.1.1.1"}]}});
    let lb = svc(json!({"type": "LoadBalancer", "externalIPs": ["2.2.2.2"]}), lb_ingress);
    assert_eq!(
        cells("services", "", &lb, now())[3],
        json!("1.1.1.1,9.9.9.9,lb.example.com,2.2.2.2")
    );
    let headless =
        svc(json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}), json!({}));
    assert_eq!(cells("services", "", &headless, now())[2], json!("None"));
    let external =
        svc(json!({"type": "ExternalName", "externalName": "db.example.com"}), json!({}));
    assert_eq!(
        cells("services", "", &external, now()),
        json!(["o", "ExternalName", "<none>", "db.example.com", "<none>", "10m", "<none>"])
    );
    assert_eq!(cells("services", "", &svc(json!({}), json!({})), now())[3], json!("<unknown>"));
}

#[test]
fn nodes() {
    let mut node = with_meta(
        json!({"spec": {"unschedulable": true}, "status": {
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "192.168.0.2"},
                {"type": "InternalIP", "address": "192.168.0.3"}],
            "nodeInfo": {"kubeletVersion": "v1.36.2", "osImage": "Debian", "containerRuntimeVersion": "containerd://2.1"}}}),
        86400 * 400,
    );
    node["metadata"]["labels"] = json!({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/": "",
        "kubernetes.io/role": "infra", "node-role.kubernetes.io/control-plane": "x"});
    assert_eq!(
        cells("nodes", "", &node, now()),
        json!([
            "o",
            "Ready,SchedulingDisabled",
            "control-plane,infra,worker",
            "400d",
            "v1.36.2",
            "192.168.0.2",
            "<none>",
            "Debian",
            "<unknown>",
            "containerd://2.1"
        ])
    );
    let not_ready =
        with_meta(json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}), 5);
    assert_eq!(
        cells("nodes", "", &not_ready, now()),
        json!([
            "o",
            "NotReady",
            "<none>",
            "5s",
            "",
            "<none>",
            "<none>",
            "<unknown>",
            "<unknown>",
            "<unknown>"
        ])
    );
    assert_eq!(cells("nodes", "", &with_meta(json!({}), 5), now())[1], json!("Unknown"));
}

#[test]
fn core_events() {
    let mut ev = with_meta(
        json!({"involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{c}"},
            "reason": "BackOff", "message": "  Back-off restarting\n", "type": "Warning",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": at_ago(now(), 3600), "lastTimestamp": at_ago(now(), 30), "count": 12}),
        3600,
    );
    ev["metadata"]["name"] = json!("web-1.17a");
    assert_eq!(
        cells("events", "", &ev, now()),
        json!([
            "30s",
            "Warning",
            "BackOff",
            "pod/web-1",
            "spec.containers{c}",
            "kubelet, node-1",
            "Back-off restarting",
            "60m",
            12,
            "web-1.17a"
        ])
    );

    // New-style events: eventTime, reporting controller, series; no name means a kind only.
    let ev = with_meta(
        json!({"involvedObject": {"kind": "Node"}, "eventTime": "2026-11-22T11:59:00.000000Z",
            "reportingComponent": "sched", "reportingInstance": "sched-1", "series": {"count": 4,
            "lastObservedTime": "2026-11-22T11:59:50.123456Z"}, "type": "Normal", "reason": "R"}),
        60,
    );
    assert_eq!(
        cells("events", "", &ev, now()),
        json!(["9s", "Normal", "R", "node", "", "sched, sched-1", "", "60s", 4, "o"])
    );

    // A singleton without count shows 1; no timestamps at all are unknown.
    let ev = with_meta(json!({"source": {"host": "h"}}), 1);
    assert_eq!(
        cells("events", "", &ev, now()),
        json!(["<unknown>", "", "", "", "", ", h", "", "<unknown>", 1, "o"])
    );
}

#[test]
fn events_k8s_io_events() {
    let ev = with_meta(
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "regarding": {"kind": "Deployment", "name": "web"}, "note": "Scaled up",
            "reportingController": "deployment-controller", "reportingInstance": "",
            "deprecatedFirstTimestamp": at_ago(now(), 120), "deprecatedLastTimestamp": at_ago(now(), 2),
            "deprecatedCount": 2, "deprecatedSource": {"component": ""}, "type": "Normal", "reason": "ScalingReplicaSet"}),
        120,
    );
    assert_eq!(
        cells("events", "events.k8s.io", &ev, now()),
        json!([
            "2s",
            "Normal",
            "ScalingReplicaSet",
            "deployment/web",
            "",
            "deployment-controller",
            "Scaled up",
            "2m",
            2,
            "o"
        ])
    );
}

#[test]
fn endpoints() {
    let ep = |subsets: Value| with_meta(json!({"subsets": subsets}), 30);
    assert_eq!(cells("endpoints", "", &ep(json!([])), now())[1], json!("<none>"));
    assert_eq!(cells("endpoints", "", &ep(json!(null)), now())[1], json!("<none>"));
    let two_ports = json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
        "notReadyAddresses": [{"ip": "10.0.0.9"}], "ports": [{"port": 80}, {"port": 443}]}]);
    assert_eq!(
        cells("endpoints", "", &ep(two_ports), now()),
        json!(["o", "10.0.0.1:80,[fd00::1]:80,10.0.0.1:443 + 1 more...", "30s"])
    );
    let headless = json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]},
        {"addresses": [{"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}, {"ip": "10.0.0.5"}]}]);
    assert_eq!(
        cells("endpoints", "", &ep(headless), now())[1],
        json!("10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...")
    );
    assert_eq!(
        cells("endpoints", "", &ep(json!([{"notReadyAddresses": [{"ip": "1.1.1.1"}]}])), now())[1],
        json!("")
    );
}

#[test]
fn endpoint_slices() {
    let slice = |ports: Value, endpoints: Value| {
        with_meta(json!({"addressType": "IPv4", "ports": ports, "endpoints": endpoints}), 30)
    };
    let s = slice(
        json!([{"port": 80, "name": "http"}, {"name": "metrics", "port": null}, {}, {"port": 9}]),
        json!([{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3", "10.0.0.4"]}]),
    );
    assert_eq!(
        cells("endpointslices", "discovery.k8s.io", &s, now()),
        json!([
            "o",
            "IPv4",
            "80,metrics,* + 1 more...",
            "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...",
            "30s"
        ])
    );
    let empty = slice(json!(null), json!([]));
    assert_eq!(
        cells("endpointslices", "discovery.k8s.io", &empty, now()),
        json!(["o", "IPv4", "<unset>", "<unset>", "30s"])
    );
}

#[test]
fn custom_resources() {
    let cr = |ts: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "creationTimestamp": ts}})
    };
    let c = |obj: &Value| cells("widgets", "example.com", obj, now());
    assert_eq!(c(&cr(json!(at_ago(now(), 7200)))), json!(["w", "120m"]));
    assert_eq!(c(&cr(json!(null))), json!(["w", null]));
    assert_eq!(c(&cr(json!(""))), json!(["w", "<unknown>"]));
    assert_eq!(c(&cr(json!("0001-01-01T00:00:00Z"))), json!(["w", "<unknown>"]));
    assert_eq!(c(&cr(json!("not a time"))), json!(["w", "<invalid>"]));
    assert_eq!(c(&cr(json!(5))), json!(["w", null]));
    assert_eq!(c(&json!({"metadata": {"name": "w"}})), json!(["w", null]));
}

#[test]
fn deployments_and_replicasets() {
    let workload = |spec: Value, status: Value| {
        with_meta(json!({"spec": spec, "status": status}), 3 * 3600 + 60)
    };
    let template = json!({"spec": {"containers": [{"name": "app", "image": "web:2"},
        {"name": "side", "image": "proxy:1"}]}});
    let selector = json!({"matchLabels": {"tier": "web", "app": "shop"},
        "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary", "beta"]},
            {"key": "app", "operator": "Exists"}, {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "In", "values": ["b", "a"]}]});
    let d = workload(
        json!({"replicas": 3, "selector": selector, "template": template}),
        json!({"replicas": 4, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1}),
    );
    // Selector requirements sorted by key (stably: matchLabels' `app` before the
    // expression on `app`), set values sorted.
    let printed_selector = "app=shop,app,!legacy,tier=web,track notin (beta,canary),zone in (a,b)";
    assert_eq!(
        cells("deployments", "apps", &d, now()),
        json!(["o", "1/3", 2, 1, "3h1m", "app,side", "web:2,proxy:1", printed_selector])
    );
    let rs = workload(
        json!({"replicas": 3, "selector": selector, "template": template}),
        json!({"replicas": 2, "readyReplicas": 1, "availableReplicas": 1}),
    );
    assert_eq!(
        cells("replicasets", "apps", &rs, now()),
        json!(["o", 3, 2, 1, "3h1m", "app,side", "web:2,proxy:1", printed_selector])
    );
    // Nothing set: spec.replicas reads as its default 1, an empty selector is "" for a
    // deployment and "<none>" for a replicaset.
    let bare = workload(json!({}), json!({}));
    assert_eq!(
        cells("deployments", "apps", &bare, now()),
        json!(["o", "0/1", 0, 0, "3h1m", "", "", ""])
    );
    assert_eq!(
        cells("replicasets", "apps", &bare, now()),
        json!(["o", 1, 0, 0, "3h1m", "", "", "<none>"])
    );
    let empty_selector = workload(json!({"replicas": 0, "selector": {}}), json!({}));
    assert_eq!(cells("replicasets", "apps", &empty_selector, now())[7], json!("<none>"));
    assert_eq!(cells("deployments", "apps", &empty_selector, now())[1], json!("0/0"));
    // Selectors Go cannot convert: "<invalid>" for a deployment, "<error>" for a replicaset.
    for bad in [
        json!({"matchLabels": {"app": "has space"}}),
        json!({"matchLabels": {"-bad-key": "x"}}),
        json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
        json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
    ] {
        let obj = workload(json!({"selector": bad}), json!({}));
        assert_eq!(cells("deployments", "apps", &obj, now())[7], json!("<invalid>"), "{bad}");
        assert_eq!(cells("replicasets", "apps", &obj, now())[7], json!("<error>"), "{bad}");
    }
}
