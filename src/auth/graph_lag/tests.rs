use super::*;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        username: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..UserInfo::default()
    }
}

fn read(verb: &str, resource: &str, namespace: &str, name: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: verb.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..ResourceAttributes::default()
    }
}

#[test]
fn a_node_is_a_system_node_user_in_the_nodes_group() {
    assert_eq!(node_of(&user("system:node:n1", &["system:nodes"])), Some("n1"));
    assert_eq!(node_of(&user("system:node:n1", &["system:authenticated"])), None);
    assert_eq!(node_of(&user("system:node:", &["system:nodes"])), None);
    assert_eq!(node_of(&user("kubelet", &["system:nodes"])), None);
}

#[test]
fn only_named_reads_of_what_pods_use_are_retried() {
    for held in [
        read("get", "pods", "ns", "p"),
        read("watch", "configmaps", "ns", "c"),
        read("list", "secrets", "ns", "s"),
        read("get", "persistentvolumeclaims", "ns", "c"),
        read("get", "serviceaccounts", "ns", "default"),
    ] {
        assert!(retried_kind(&held), "{held:?}");
    }
    let mut other_group = read("get", "configmaps", "ns", "c");
    other_group.group = "apps".into();
    let mut subresource = read("get", "pods", "ns", "p");
    subresource.subresource = "log".into();
    for not in [
        read("watch", "configmaps", "ns", ""),
        read("list", "pods", "", ""),
        read("get", "nodes", "", "n1"),
        read("create", "configmaps", "ns", "c"),
        read("get", "services", "ns", "s"),
        other_group,
        subresource,
    ] {
        assert!(!retried_kind(&not), "{not:?}");
    }
}

#[test]
fn the_graphs_refusal_is_known_by_its_reason_in_json_and_protobuf() {
    let json = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p\" is forbidden: User \"system:node:n1\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns\": no relationship found between node 'n1' and this object","reason":"Forbidden","details":{"name":"p","kind":"pods"},"code":403}"#;
    assert!(is_graph_refusal(json));
    let mut protobuf = b"k8s\x00\n\x0c\n\x02v1\x12\x06Status\x12\x90\x01".to_vec();
    protobuf.extend_from_slice(b"\x1a\x86\x01configmaps \"c\" is forbidden: User \"system:node:n1\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ns\": no relationship found between node 'n1' and this object");
    assert!(is_graph_refusal(&protobuf));
    // Another refusal of a node (its selector, RBAC) is not the graph's.
    let other = br#"{"message":"pods is forbidden: User \"system:node:n1\" cannot list resource \"pods\" in API group \"\" at the cluster scope: can only list/watch pods with spec.nodeName field selector"}"#;
    assert!(!is_graph_refusal(other));
    assert!(!is_graph_refusal(b""));
}

#[test]
fn a_refused_read_is_retried_soon_then_less_often_and_last_when_the_window_ends() {
    let start = Instant::now();
    let until = start + Duration::from_millis(900);
    let mut backoff = Backoff::new(until);
    let mut now = start;
    let mut sends = Vec::new();
    while let Some(retry) = backoff.next(now) {
        sends.push(((retry.at - now).as_millis(), retry.last));
        now = retry.at;
    }
    let waits: Vec<u128> = sends.iter().map(|s| s.0).collect();
    assert_eq!(waits, [25, 50, 100, 200, 400, 125], "the last send is at the window's end");
    assert_eq!(sends.iter().filter(|s| s.1).count(), 1);
    assert!(sends.last().unwrap().1, "only the last is the last");
    assert_eq!(now, until);
    // A refusal answered after the window ended (a slow upstream) is sent once more at once:
    // the agent's answer is the apiserver's at the window's end, not an older refusal.
    let mut late = Backoff::new(until);
    let after = until + Duration::from_millis(30);
    assert_eq!(late.next(after), Some(Retry { at: after, last: true }));
    assert_eq!(late.next(after), None);
    // A long window: the step stops growing at 400 ms.
    let mut long = Backoff::new(start + Duration::from_secs(3));
    let mut now = start;
    let waits: Vec<u128> = std::iter::from_fn(|| {
        let retry = long.next(now)?;
        let wait = (retry.at - now).as_millis();
        now = retry.at;
        Some(wait)
    })
    .take(7)
    .collect();
    assert_eq!(waits, [25, 50, 100, 200, 400, 400, 400]);
}
