//! kube-rs, unchanged, through kubeplex: `Api::list` (with and without paging, at
//! resourceVersion=0 and unset) and `Api::get` return what they return against the apiserver.

use kubeplex_test_support as support;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, ObjectList};
use kube::Client;
use kubeplex_sim::seed::ClusterShape;
use support::stack::Stack;

fn client(addr: &str) -> Client {
    let config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
    Client::try_from(config).expect("client")
}

/// Every page of a list, following continue tokens.
async fn list_all<K>(api: &Api<K>, lp: &ListParams) -> (Vec<K>, Vec<String>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut lp = lp.clone();
    let mut items = Vec::new();
    let mut rvs = Vec::new();
    for _ in 0..100 {
        let page: ObjectList<K> = api.list(&lp).await.expect("list");
        rvs.push(page.metadata.resource_version.clone().unwrap_or_default());
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => return (items, rvs),
        }
    }
    panic!("paging did not end");
}

#[tokio::test]
async fn kube_rs_lists_and_gets_through_kubeplex() {
    let shape = ClusterShape { nodes: 3, namespaces: 3, pods: 120, configmaps: 30, services: 3 };
    let stack = Stack::new(shape, &["pods", "configmaps"]).await;
    let (ours, theirs) = (client(&stack.addr()), client(&stack.upstream()));
    let pods_ours: Api<Pod> = Api::all(ours.clone());
    let pods_theirs: Api<Pod> = Api::all(theirs.clone());
    let before = stack.served_from("cache").await;
    for lp in [
        ListParams::default(),
        ListParams::default().match_any(),
        ListParams::default().limit(25),
        ListParams::default().labels("app=app-3"),
        ListParams::default().match_any().fields("spec.nodeName=node-1"),
    ] {
        let (a, a_rvs) = list_all(&pods_ours, &lp).await;
        let (b, b_rvs) = list_all(&pods_theirs, &lp).await;
        assert_eq!(a, b, "{lp:?}");
        assert_eq!(a_rvs, b_rvs, "{lp:?}: list resourceVersions");
    }
    assert!(
        stack.served_from("cache").await >= before + 2,
        "resourceVersion=0 lists came from the cache"
    );
    // Get, in a namespace, and a miss.
    let cms_ours: Api<ConfigMap> = Api::namespaced(ours, "team-1");
    let cms_theirs: Api<ConfigMap> = Api::namespaced(theirs, "team-1");
    assert_eq!(
        cms_ours.get("config-1").await.expect("get"),
        cms_theirs.get("config-1").await.expect("get")
    );
    assert!(cms_ours.get_opt("nope").await.expect("get_opt").is_none());
}
