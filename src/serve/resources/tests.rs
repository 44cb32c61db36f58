use super::*;

#[test]
fn parses_the_captured_core_discovery() {
    let path = format!("{}/../shared/fixtures/discovery-api-v1.body", env!("CARGO_MANIFEST_DIR"));
    let body = std::fs::read(path).unwrap_or_default();
    let m = parse_resource_list("", "v1", &body);
    let pods = m.get("pods").expect("pods");
    assert_eq!((pods.kind.as_str(), pods.namespaced), ("Pod", true));
    assert!(pods.supports("watch") && pods.supports("list"));
    assert_eq!(pods.collection_path(), "/api/v1/pods");
    assert!(!m.contains_key("pods/status"));
    let ns = m.get("namespaces").expect("namespaces");
    assert!(!ns.namespaced);
    assert!(pods.is_builtin());
    let gateway = ResourceInfo { group: "gateway.networking.k8s.io".into(), ..(**pods).clone() };
    assert!(!gateway.is_builtin(), "a CRD under *.k8s.io");
}
