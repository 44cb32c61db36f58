use super::*;

fn info(resource: &str, namespaced: bool) -> ResourceInfo {
    ResourceInfo {
        group: String::new(),
        version: "v1".into(),
        resource: resource.into(),
        kind: String::new(),
        namespaced,
        verbs: vec!["list".into(), "watch".into()],
    }
}

#[test]
fn a_state_is_named_for_its_scope() {
    let dir = std::env::temp_dir().join(format!("kubeplex-disk-names-{}", std::process::id()));
    let config = DiskConfig { dir: Some(dir.clone()), ..DiskConfig::default() };
    let registry = Registry::new();
    let disk = DiskStates::new(&config, None, &registry).unwrap().unwrap();
    let (cms, nodes, pods) = (info("configmaps", true), info("nodes", false), info("pods", true));
    let team0 = Scope::new(Some("team-0"), None, None);
    let all = Scope::everything();
    assert_eq!(disk.file_name(&cms, Encoding::Json, &all), "core_v1_configmaps_json.state");
    // Never read back as the whole cluster's, nor as another namespace's or scope's.
    assert_eq!(
        disk.file_name(&cms, Encoding::Json, &team0),
        "core_v1_configmaps_json.ns-team-0.state"
    );
    assert_eq!(disk.file_name(&nodes, Encoding::Protobuf, &all), "core_v1_nodes_protobuf.state");
    let node = |n: &str| Scope::parse("", "pods", None, None, Some(n)).unwrap();
    let (n1, n2) = (node("spec.nodeName=n1"), node("spec.nodeName=n2"));
    let name = disk.file_name(&pods, Encoding::Protobuf, &n1);
    assert!(name.starts_with("core_v1_pods_protobuf.s-") && name.ends_with(".state"), "{name}");
    assert_ne!(name, disk.file_name(&pods, Encoding::Protobuf, &n2));
    assert_eq!(name, disk.file_name(&pods, Encoding::Protobuf, &node("spec.host=n1")));
    let _ = std::fs::remove_dir_all(dir);
}
