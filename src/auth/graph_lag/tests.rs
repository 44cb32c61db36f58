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
fn only_named_reads_of_what_pods_use_are_held() {
    for held in [
        read("get", "pods", "ns", "p"),
        read("watch", "configmaps", "ns", "c"),
        read("list", "secrets", "ns", "s"),
        read("get", "persistentvolumeclaims", "ns", "c"),
        read("get", "serviceaccounts", "ns", "default"),
    ] {
        assert!(held_kind(&held), "{held:?}");
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
        assert!(!held_kind(&not), "{not:?}");
    }
}
