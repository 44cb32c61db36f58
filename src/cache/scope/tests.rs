use super::Scope;

fn pods(ns: Option<&str>, label: Option<&str>, field: Option<&str>) -> Scope {
    Scope::parse("", "pods", ns, label, field).unwrap()
}

#[test]
fn equal_scopes_are_equal_however_written() {
    use std::collections::HashSet;
    let a = pods(None, Some("b=2,a==1"), Some("status.phase!=Failed,spec.nodeName=n1"));
    let b = pods(None, Some("a=1,b=2"), Some("spec.host=n1,status.phase!=Failed"));
    assert_eq!(a, b);
    assert_eq!(HashSet::from([a.clone()]).len(), HashSet::from([a, b]).len());
}

#[test]
fn a_scope_contains_the_reads_that_imply_it() {
    let node = pods(None, None, Some("spec.nodeName=n1"));
    assert!(node.contains(&pods(None, None, Some("spec.nodeName=n1"))));
    assert!(node.contains(&pods(Some("ns"), None, Some("spec.nodeName=n1,status.phase=Running"))));
    assert!(node.contains(&pods(None, Some("app=x"), Some("spec.nodeName=n1"))));
    // Wider, other or unproven reads are not contained.
    assert!(!node.contains(&pods(None, None, None)));
    assert!(!node.contains(&pods(None, None, Some("spec.nodeName=n2"))));
    assert!(!node.contains(&pods(None, None, Some("spec.nodeName!=n2"))));
    assert!(!node.contains(&pods(Some("ns"), None, None).named("p")));

    let everything = Scope::everything();
    assert!(everything.contains(&pods(Some("ns"), Some("a"), Some("spec.nodeName=n1"))));
    let ns = Scope::new(Some("ns"), None, None);
    assert!(ns.contains(&pods(Some("ns"), None, None).named("p")));
    assert!(!ns.contains(&pods(Some("other"), None, None)));
    assert!(!ns.contains(&pods(None, None, None)));

    let labelled = pods(None, Some("!service.kubernetes.io/headless"), None);
    assert!(labelled.contains(&pods(
        None,
        Some("!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"),
        None
    )));
    assert!(!labelled.contains(&pods(
        None,
        Some("!service.kubernetes.io/service-proxy-name"),
        None
    )));
}

#[test]
fn a_named_read_is_within_a_scope_by_that_name() {
    let node = Scope::parse("", "nodes", None, None, Some("metadata.name=n1")).unwrap();
    assert_eq!(node.name(), Some("n1"));
    assert!(node.contains(&Scope::everything().named("n1")));
    assert!(!node.contains(&Scope::everything().named("n2")));
    assert!(!node.contains(&Scope::everything()));
}

#[test]
fn the_upstream_query_carries_the_canonical_selectors() {
    let s = pods(Some("ns"), Some("b, a"), Some("spec.host=n1"));
    assert_eq!(s.label_selector().as_deref(), Some("a,b"));
    assert_eq!(s.field_selector().as_deref(), Some("spec.nodeName=n1"));
    assert_eq!(s.query(), "&labelSelector=a%2Cb&fieldSelector=spec.nodeName%3Dn1");
    assert_eq!(s.to_string(), "namespace=ns labelSelector=a,b fieldSelector=spec.nodeName=n1");
    assert_eq!(Scope::everything().query(), "");
    assert_eq!(Scope::everything().to_string(), "*");
}

#[test]
fn selectors_the_apiserver_refuses_are_refused() {
    assert!(Scope::parse("", "pods", None, Some("a in ("), None).is_err());
    assert!(Scope::parse("", "pods", None, None, Some("spec.nope=x")).is_err());
    assert!(Scope::parse("", "pods", None, None, Some("nonsense")).is_err());
}
