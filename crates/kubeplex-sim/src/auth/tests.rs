use http::{HeaderMap, HeaderValue, Method};
use serde_json::json;

use super::authorize::rule_allows;
use super::request::{authenticate, forbidden, impersonate, resource_attributes};
use super::reviews::manager_of;
use super::*;
use crate::wire::request::{parse_path, ApiPath};

fn attrs(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    Attributes {
        user: UserInfo::new("u"),
        verb: verb.into(),
        resource_request: true,
        namespace: ns.into(),
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        subresource: sub.into(),
        name: name.into(),
        ..Default::default()
    }
}

fn path_attrs(verb: &str, path: &str) -> Attributes {
    Attributes {
        user: UserInfo::new("u"),
        verb: verb.into(),
        path: path.into(),
        ..Default::default()
    }
}

#[test]
fn rules_match_like_rbac() {
    let star_status = Rule::new(&["get"], &[""], &["*/status"]);
    assert!(rule_allows(&attrs("get", "", "pods", "status", "a", "p"), &star_status));
    assert!(!rule_allows(&attrs("get", "", "pods", "", "a", "p"), &star_status));
    // `resource/*` is no wildcard in RBAC: only `*` and `*/subresource` are.
    let extras = Rule::new(&["impersonate"], &["authentication.k8s.io"], &["userextras/*"]);
    assert!(!rule_allows(
        &attrs("impersonate", "authentication.k8s.io", "userextras", "scopes", "", "v"),
        &extras
    ));
    // resourceNames never match a request without a name (a list).
    let named = Rule::read(&[""], &["configmaps"]).names(&["c1"]);
    assert!(rule_allows(&attrs("get", "", "configmaps", "", "a", "c1"), &named));
    assert!(!rule_allows(&attrs("list", "", "configmaps", "", "a", ""), &named));
    assert!(!rule_allows(&attrs("get", "", "configmaps", "", "a", "c2"), &named));
    // Groups and verbs must match; `*` matches any.
    assert!(!rule_allows(&attrs("get", "apps", "configmaps", "", "a", "c1"), &named));
    assert!(rule_allows(
        &attrs("delete", "x.io", "things", "", "", ""),
        &Rule::new(&["*"], &["*"], &["*"])
    ));
    // Non-resource URLs: exact, or a prefix before a trailing `*`.
    let disc = Rule::non_resource(&["get"], &["/api", "/apis/*"]);
    assert!(rule_allows(&path_attrs("get", "/api"), &disc));
    assert!(rule_allows(&path_attrs("get", "/apis/apps/v1"), &disc));
    assert!(!rule_allows(&path_attrs("get", "/api/v1"), &disc));
    assert!(!rule_allows(&path_attrs("post", "/api"), &disc));
    // A resource rule never allows a path, and the other way round.
    assert!(!rule_allows(&path_attrs("get", "/api"), &Rule::new(&["*"], &["*"], &["*"])));
}

#[test]
fn rbac_reasons_name_the_binding_role_and_subject() {
    let auth = Auth::new()
        .cluster_role("view", vec![Rule::read(&[""], &["configmaps"])])
        .role_binding("ns1", "b", RoleRef::ClusterRole("view".into()), vec![Subject::user("u")])
        .cluster_role_binding("crb", "view", vec![Subject::group("g")]);
    let mut a = attrs("get", "", "configmaps", "", "ns1", "c");
    let d = auth.authorize(&a, &NoObjects);
    assert_eq!(
        d.reason,
        "RBAC: allowed by RoleBinding \"b/ns1\" of ClusterRole \"view\" to User \"u\""
    );
    a.user = UserInfo::new("other").with_group("g");
    let d = auth.authorize(&a, &NoObjects);
    assert_eq!(
        d.reason,
        "RBAC: allowed by ClusterRoleBinding \"crb\" of ClusterRole \"view\" to Group \"g\""
    );
    // A RoleBinding grants nothing outside its namespace; denials carry no reason.
    a.user = UserInfo::new("u");
    a.namespace = "ns2".into();
    assert_eq!(auth.authorize(&a, &NoObjects), Decision::default());
    // system:masters is allowed everything, without a reason.
    a.user = UserInfo::new("root").with_group(MASTERS);
    assert_eq!(auth.authorize(&a, &NoObjects), Decision { allowed: true, ..Default::default() });
}

#[test]
fn built_in_roles_cover_discovery_for_authenticated_users_only() {
    let auth = Auth::new();
    let mut a = path_attrs("get", "/apis/apps/v1");
    a.user = with_authenticated(UserInfo::new("u"));
    assert!(auth.authorize(&a, &NoObjects).allowed);
    a.user = UserInfo::anonymous();
    assert!(!auth.authorize(&a, &NoObjects).allowed);
    a.path = "/version".into();
    assert!(auth.authorize(&a, &NoObjects).allowed);
    a.path = "/metrics".into();
    assert!(!auth.authorize(&a, &NoObjects).allowed);
}

struct Pods(Vec<serde_json::Value>);

impl Objects for Pods {
    fn pods(&self, namespace: &str) -> Vec<serde_json::Value> {
        self.0.iter().filter(|p| p["metadata"]["namespace"] == namespace).cloned().collect()
    }
}

#[test]
fn the_node_authorizer_follows_pods_to_what_they_reference() {
    let pods = Pods(vec![json!({
        "metadata": {"name": "p", "namespace": "a"},
        "spec": {"nodeName": "n1",
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "proj"}}]}}],
            "containers": [{"name": "c",
                "envFrom": [{"configMapRef": {"name": "from"}}],
                "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "envsecret", "key": "k"}}}]}]}
    })]);
    let auth = Auth::new();
    let node = |verb: &str, resource: &str, name: &str| {
        let mut a = attrs(verb, "", resource, "", "a", name);
        a.user = with_authenticated(UserInfo::node("n1"));
        auth.authorize(&a, &pods)
    };
    for (resource, name) in [
        ("configmaps", "proj"),
        ("configmaps", "from"),
        ("secrets", "pull"),
        ("secrets", "envsecret"),
    ] {
        assert!(node("get", resource, name).allowed, "{resource}/{name}");
    }
    assert_eq!(
        node("get", "configmaps", "unrelated").reason,
        "no relationship found between node 'n1' and this object"
    );
    assert_eq!(node("list", "secrets", "").reason, "No Object name found");
    assert_eq!(node("update", "secrets", "pull").reason, "can only read resources of this type");
    // The pod itself: bound to the node.
    assert!(node("get", "pods", "p").allowed);
    // A node name the identifier cannot read.
    let mut a = attrs("get", "", "pods", "", "a", "p");
    a.user = UserInfo::new("system:node:").with_group(NODES);
    assert_eq!(auth.authorize(&a, &pods).reason, "unknown node for user \"system:node:\"");
    // Without the group it is not a node at all.
    a.user = UserInfo::new("system:node:n1");
    assert_eq!(auth.authorize(&a, &pods), Decision::default());
}

#[test]
fn a_node_handles_its_own_lease_and_reads_what_every_kubelet_reads() {
    let auth = Auth::new();
    let node = |verb: &str, group: &str, resource: &str, ns: &str, name: &str| {
        let mut a = attrs(verb, group, resource, "", ns, name);
        a.user = with_authenticated(UserInfo::node("n1"));
        auth.authorize(&a, &NoObjects)
    };
    let lease =
        |verb: &str, ns: &str, name: &str| node(verb, "coordination.k8s.io", "leases", ns, name);
    for verb in ["get", "update", "patch", "delete"] {
        assert!(lease(verb, "kube-node-lease", "n1").allowed, "{verb}");
    }
    // A create carries no name the authorizer sees (NodeRestriction checks it).
    assert!(lease("create", "kube-node-lease", "").allowed);
    assert_eq!(
        lease("update", "kube-node-lease", "n2").reason,
        "can only access node lease with the same name as the requesting node"
    );
    assert_eq!(
        lease("get", "default", "n1").reason,
        "can only access leases in the \"kube-node-lease\" system namespace"
    );
    assert_eq!(
        lease("list", "kube-node-lease", "").reason,
        "can only get, create, update, patch, or delete a node lease"
    );
    // The static node rules: runtime classes and CSI drivers, not service CIDRs.
    assert!(node("watch", "node.k8s.io", "runtimeclasses", "", "").allowed);
    assert!(node("list", "storage.k8s.io", "csidrivers", "", "").allowed);
    assert!(!node("list", "networking.k8s.io", "servicecidrs", "", "").allowed);
}

#[test]
fn kube_proxy_reads_with_the_node_proxier_role() {
    let auth =
        Auth::new().service_account_token("kp", "kube-system", "kube-proxy").cluster_role_binding(
            "kubeadm:node-proxier",
            "system:node-proxier",
            vec![Subject::service_account("kube-system", "kube-proxy")],
        );
    let user = auth.authenticate_token("kp").expect("token");
    let allowed = |verb: &str, group: &str, resource: &str| {
        let mut a = attrs(verb, group, resource, "", "", "");
        a.user = user.clone();
        auth.authorize(&a, &NoObjects).allowed
    };
    assert!(allowed("watch", "", "services"));
    assert!(allowed("list", "discovery.k8s.io", "endpointslices"));
    assert!(allowed("watch", "networking.k8s.io", "servicecidrs"));
    assert!(allowed("get", "", "nodes"));
    assert!(allowed("create", "events.k8s.io", "events"));
    assert!(!allowed("get", "", "services"));
    assert!(!allowed("list", "", "pods"));
}

fn req_attrs(method: Method, path_and_query: &str) -> Attributes {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    let ApiPath::Resource(rp) = parse_path(path) else { panic!("{path} is a resource path") };
    resource_attributes(UserInfo::new("u"), &method, &rp, query)
}

#[test]
fn request_attributes_follow_the_apiservers_request_info() {
    let a = req_attrs(Method::GET, "/api/v1/namespaces/fx2");
    assert_eq!((a.verb.as_str(), a.namespace.as_str(), a.name.as_str()), ("get", "fx2", "fx2"));
    let a = req_attrs(Method::GET, "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn1");
    assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "n1"));
    assert_eq!(a.field_selector, "metadata.name=n1");
    // A name that is no valid path segment is not taken from the selector.
    let a = req_attrs(Method::GET, "/api/v1/nodes?fieldSelector=metadata.name%3Da%2Fb");
    assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", ""));
    // A query that does not parse: a list, or a watch when `watch` says so; no name.
    let a = req_attrs(Method::GET, "/api/v1/pods?limit=x&watch=1&fieldSelector=metadata.name%3Dp");
    assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", ""));
    // A get with watch=1 stays a get for authorization.
    assert_eq!(req_attrs(Method::GET, "/api/v1/namespaces/a/pods/p?watch=1").verb, "get");
    let a = req_attrs(Method::DELETE, "/api/v1/namespaces/a/pods?labelSelector=x%3Dy");
    assert_eq!((a.verb.as_str(), a.label_selector.as_str()), ("deletecollection", "x=y"));
    let a = req_attrs(
        Method::PATCH,
        "/apis/apps/v1/namespaces/a/deployments/d/status?fieldSelector=x%3Dy",
    );
    assert_eq!(
        (a.verb.as_str(), a.group.as_str(), a.subresource.as_str(), a.field_selector.as_str()),
        ("patch", "apps", "status", "")
    );
}

#[test]
fn forbidden_messages_are_the_apiservers() {
    let cases = [
        (attrs("list", "", "configmaps", "", "ns", ""), "",
            "configmaps is forbidden: User \"u\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ns\""),
        (attrs("watch", "apps", "deployments", "", "", ""), "",
            "deployments.apps is forbidden: User \"u\" cannot watch resource \"deployments\" in API group \"apps\" at the cluster scope"),
        (attrs("update", "", "pods", "status", "ns", "p"), "why",
            "pods \"p\" is forbidden: User \"u\" cannot update resource \"pods/status\" in API group \"\" in the namespace \"ns\": why"),
        (path_attrs("get", "/metrics"), "",
            "forbidden: User \"u\" cannot get path \"/metrics\""),
    ];
    for (a, reason, want) in cases {
        let s = forbidden(&a, reason);
        assert_eq!((s.code, s.reason.as_str(), s.message.as_str()), (403, "Forbidden", want));
    }
    // HTML-sensitive characters of the message are escaped; the Status names the object.
    let mut a = attrs("get", "", "pods", "", "ns", "p");
    a.user = UserInfo::new("<evil>&\"");
    let s = forbidden(&a, "");
    assert_eq!(
        s.message,
        "pods \"p\" is forbidden: User \"&lt;evil&gt;&amp;\\\"\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns\""
    );
    let d = s.details.expect("details");
    assert_eq!((d.name.as_str(), d.group.as_str(), d.kind.as_str()), ("p", "", "pods"));
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).expect("header value"));
    }
    h
}

#[test]
fn authentication_reads_bearer_tokens_only() {
    let auth = Auth::new().token("t", UserInfo::new("u").with_group("g"));
    let user = authenticate(&auth, &headers(&[("authorization", "bearer t")]), &NoObjects)
        .expect("known token");
    assert_eq!(user.groups, ["g", AUTHENTICATED]);
    assert_eq!(
        authenticate(&auth, &headers(&[("authorization", "Bearer nope")]), &NoObjects)
            .map(|_| ())
            .map_err(|r| r.status().as_u16()),
        Err(401)
    );
    // Another scheme, or an empty token, is no credential: anonymous.
    for h in ["Basic dTpw", "Bearer "] {
        let user =
            authenticate(&auth, &headers(&[("authorization", h)]), &NoObjects).expect("anonymous");
        assert_eq!(user, UserInfo::anonymous());
    }
    let closed = auth.anonymous(false);
    assert_eq!(
        authenticate(&closed, &HeaderMap::new(), &NoObjects)
            .map(|_| ())
            .map_err(|r| r.status().as_u16()),
        Err(401)
    );
}

#[test]
fn impersonation_builds_the_user_like_the_apiserver() {
    let auth = Auth::new();
    let root = UserInfo::new("root").with_group(MASTERS);
    let as_user = |pairs: &[(&'static str, &str)]| {
        let request = Attributes { user: root.clone(), ..attrs("get", "", "pods", "", "ns", "p") };
        impersonate(&auth, &request, &headers(pairs), &NoObjects).expect("allowed")
    };
    let u = as_user(&[
        ("impersonate-user", "jane"),
        ("impersonate-extra-Foo%2fBar", "x"),
        ("impersonate-extra-foo%2fbar", "y"),
    ]);
    assert_eq!(u.groups, [AUTHENTICATED]);
    assert_eq!(
        u.extra.get("foo/bar").map(Vec::as_slice),
        Some(&["x".to_string(), "y".to_string()][..])
    );
    let u = as_user(&[("impersonate-user", "system:serviceaccount:ns:sa")]);
    assert_eq!(u.groups, ["system:serviceaccounts", "system:serviceaccounts:ns", AUTHENTICATED]);
    let u =
        as_user(&[("impersonate-user", "system:serviceaccount:ns:sa"), ("impersonate-group", "g")]);
    assert_eq!(u.groups, ["g", AUTHENTICATED]);
    let u = as_user(&[("impersonate-user", "jane"), ("impersonate-group", UNAUTHENTICATED)]);
    assert_eq!(u.groups, [UNAUTHENTICATED]);
    let u = as_user(&[("impersonate-user", ANONYMOUS)]);
    assert_eq!(u.groups, [UNAUTHENTICATED]);
    let u = as_user(&[("impersonate-user", "jane"), ("impersonate-uid", "1")]);
    assert_eq!(u.uid, "1");
    // No impersonation: the requester itself.
    assert_eq!(as_user(&[]), root);
}

#[test]
fn helpers_quote_and_name_like_go() {
    assert_eq!(quote("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\x01\"");
    assert_eq!(manager_of("kubectl/v1.36.0 (linux/amd64) kubernetes/abc"), "kubectl");
    assert_eq!(manager_of(""), "");
    assert_eq!(manager_of(&"x".repeat(200)).len(), 128);
    // The authenticated group is added once, and never to an unauthenticated identity.
    assert_eq!(
        with_authenticated(UserInfo::new("u").with_group(AUTHENTICATED)).groups,
        [AUTHENTICATED]
    );
    assert_eq!(with_authenticated(UserInfo::anonymous()).groups, [UNAUTHENTICATED]);
}

/// A webhook between the Node authorizer and RBAC: its deny stops the chain (RBAC, which would
/// allow, is not asked) with its reason; what its conditions do not match — a review of the
/// whole collection, another name — RBAC decides.
#[test]
fn a_webhook_denies_by_name_before_rbac_is_asked() {
    let auth = Auth::new()
        .grant(Subject::user("u"), Some("prod"), vec![Rule::read(&[""], &["secrets"])])
        .webhook(Webhook { deny: vec![Denial::named("secrets", "prod", "db-root", "off limits")] });
    let named = attrs("get", "", "secrets", "", "prod", "db-root");
    let decision = auth.authorize(&named, &NoObjects);
    assert_eq!((decision.allowed, decision.denied), (false, true));
    assert_eq!(decision.reason, "off limits");
    let mut by_selector = attrs("list", "", "secrets", "", "prod", "db-root");
    by_selector.field_selector = "metadata.name=db-root".into();
    assert!(auth.authorize(&by_selector, &NoObjects).denied);
    let whole = attrs("list", "", "secrets", "", "prod", "");
    assert!(auth.authorize(&whole, &NoObjects).allowed, "the whole is RBAC's to grant");
    let other = attrs("get", "", "secrets", "", "prod", "app");
    assert!(auth.authorize(&other, &NoObjects).allowed);
}
