//! The fake apiserver's list rules: key order, paging, remainingItemCount, every
//! resourceVersion / resourceVersionMatch combination, compaction.

use crate::support;

use kubeplex_sim::{Sim, SimBuilder};
use kubeplex_wire::continue_token;
use serde_json::{json, Value};
use support::*;

fn cm(ns: &str, name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app}}, "data": {"k": "v"}})
}

async fn sim_with(objs: Vec<Value>) -> Sim {
    SimBuilder::new().seed(objs).start().await.expect("sim")
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            let m = &i["metadata"];
            format!(
                "{}/{}",
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn all_namespace_lists_are_in_etcd_key_order() {
    // "a-b/x" sorts before "a/x": the key is the string "<ns>/<name>", and '-' < '/'.
    let sim = sim_with(vec![cm("a", "x", "web"), cm("a-b", "x", "web"), cm("b", "a", "db")]).await;
    let list = get(&sim.addr().to_string(), "/api/v1/configmaps?labelSelector=app").await.json();
    assert_eq!(names(&list), ["a-b/x", "a/x", "b/a"]);
}

#[tokio::test]
async fn paging_walks_the_whole_list_at_one_resource_version() {
    let objs: Vec<Value> =
        (0..7).map(|i| cm(&format!("ns{}", i % 3), &format!("cm{i}"), "web")).collect();
    let sim = sim_with(objs).await;
    let addr = sim.addr().to_string();
    let full = get(&addr, "/api/v1/configmaps?labelSelector=app%3Dweb").await.json();
    let mut seen = Vec::new();
    let mut path = "/api/v1/configmaps?limit=3&labelSelector=app%3Dweb".to_string();
    let mut first_rv = None;
    for page in 0.. {
        assert!(page < 10, "paging does not end");
        let resp = get(&addr, &path).await.json();
        let rv = resp["metadata"]["resourceVersion"].clone();
        first_rv.get_or_insert(rv.clone());
        assert_eq!(Some(rv), first_rv, "every page shares the first page's RV");
        // With a selector the apiserver never sends remainingItemCount.
        assert!(resp["metadata"].get("remainingItemCount").is_none());
        seen.extend(names(&resp));
        if page == 0 {
            // A write between pages is not visible to the rest of the list.
            sim.create(cm("ns0", "zz-late", "web")).expect("create");
        }
        match resp["metadata"]["continue"].as_str() {
            Some(c) => {
                path = format!("/api/v1/configmaps?limit=3&labelSelector=app%3Dweb&continue={c}")
            }
            None => break,
        }
    }
    assert_eq!(seen, names(&full));
}

#[tokio::test]
async fn remaining_item_count_counts_what_is_left() {
    let sim = sim_with((0..5).map(|i| cm("p", &format!("c{i}"), "web")).collect()).await;
    let addr = sim.addr().to_string();
    let p1 = get(&addr, "/api/v1/namespaces/p/configmaps?limit=2").await.json();
    assert_eq!(p1["metadata"]["remainingItemCount"], 3);
    let tok = continue_token::decode(p1["metadata"]["continue"].as_str().expect("continue"))
        .expect("token");
    assert_eq!(tok.start, "/c1\u{0}", "relative to the namespace's key prefix");
    let c = p1["metadata"]["continue"].as_str().expect("continue").to_string();
    let p2 =
        get(&addr, &format!("/api/v1/namespaces/p/configmaps?limit=2&continue={c}")).await.json();
    assert_eq!(p2["metadata"]["remainingItemCount"], 1);
    let c = p2["metadata"]["continue"].as_str().expect("continue").to_string();
    let p3 =
        get(&addr, &format!("/api/v1/namespaces/p/configmaps?limit=2&continue={c}")).await.json();
    assert_eq!(names(&p3), ["p/c4"]);
    assert!(
        p3["metadata"].get("continue").is_none()
            && p3["metadata"].get("remainingItemCount").is_none()
    );
    // All-namespace tokens carry the namespace in the start key.
    let all = get(&addr, "/api/v1/configmaps?limit=1").await.json();
    let tok = continue_token::decode(all["metadata"]["continue"].as_str().expect("continue"))
        .expect("token");
    assert!(tok.start.starts_with('/') && tok.start.contains('/') && tok.start.ends_with('\u{0}'));
}

#[tokio::test]
async fn resource_version_rules_for_lists() {
    let sim = sim_with(vec![cm("r", "a", "web")]).await;
    let addr = sim.addr().to_string();
    let before = sim.current_rv();
    sim.create(cm("r", "b", "web")).expect("create");
    let now = sim.current_rv();
    let list = |q: String| {
        let addr = addr.clone();
        async move { get(&addr, &format!("/api/v1/namespaces/r/configmaps?{q}")).await }
    };
    // N with limit (match unset) is Exact: the state at N, at N.
    let exact = list(format!("resourceVersion={before}&limit=10")).await.json();
    assert_eq!(names(&exact), ["r/a"]);
    assert_eq!(exact["metadata"]["resourceVersion"], before.to_string());
    let exact = list(format!("resourceVersion={before}&resourceVersionMatch=Exact")).await.json();
    assert_eq!(names(&exact), ["r/a"]);
    // N without limit, or NotOlderThan: at least N, so the current state.
    for q in [
        format!("resourceVersion={before}"),
        format!("resourceVersion={before}&resourceVersionMatch=NotOlderThan"),
    ] {
        let l = list(q).await.json();
        assert_eq!(names(&l), ["r/a", "r/b"]);
        assert_eq!(l["metadata"]["resourceVersion"], now.to_string());
    }
    // "0" and unset: any / most recent.
    for q in ["resourceVersion=0".to_string(), String::new()] {
        assert_eq!(names(&list(q).await.json()), ["r/a", "r/b"]);
    }
    // Forbidden combinations are 422 Invalid naming the field.
    for q in [
        "resourceVersionMatch=NotOlderThan",
        "resourceVersion=0&resourceVersionMatch=Exact",
        "resourceVersion=1&resourceVersionMatch=Sometimes",
    ] {
        let r = list(q.to_string()).await;
        assert_eq!(r.status, 422, "{q}");
        assert_eq!(r.json()["details"]["causes"][0]["field"], "resourceVersionMatch", "{q}");
    }
    let r = list("resourceVersion=abc".into()).await;
    assert_eq!(r.status, 400);
    // continue with a resourceVersion is refused.
    let c = list("limit=1".into()).await.json()["metadata"]["continue"]
        .as_str()
        .expect("continue")
        .to_string();
    let r = list(format!("limit=1&continue={c}&resourceVersion={now}")).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "specifying resource version is not allowed when using continue"
    );
}

#[tokio::test]
async fn compaction_expires_old_lists_and_continue_tokens() {
    let sim = sim_with((0..4).map(|i| cm("x", &format!("c{i}"), "web")).collect()).await;
    let addr = sim.addr().to_string();
    let p1 = get(&addr, "/api/v1/namespaces/x/configmaps?limit=2").await.json();
    let c = p1["metadata"]["continue"].as_str().expect("continue").to_string();
    let old = sim.current_rv();
    sim.create(cm("x", "c9", "web")).expect("create");
    sim.compact();
    let r = get(&addr, &format!("/api/v1/namespaces/x/configmaps?limit=2&continue={c}")).await;
    assert_eq!(r.status, 410);
    let s = r.json();
    assert_eq!(s["reason"], "Expired");
    // The 410 offers a token that continues, inconsistently, from the same key.
    let inconsistent = s["metadata"]["continue"].as_str().expect("continue in the 410").to_string();
    let tok = continue_token::decode(&inconsistent).expect("token");
    assert_eq!((tok.rv, tok.start.as_str()), (-1, "/c1\u{0}"));
    let rest =
        get(&addr, &format!("/api/v1/namespaces/x/configmaps?limit=10&continue={inconsistent}"))
            .await
            .json();
    assert_eq!(names(&rest), ["x/c2", "x/c3", "x/c9"]);
    let r = get(
        &addr,
        &format!(
            "/api/v1/namespaces/x/configmaps?resourceVersion={}&resourceVersionMatch=Exact",
            old - 1
        ),
    )
    .await;
    assert_eq!(r.status, 410);
    assert_eq!(r.json()["message"], "The resourceVersion for the provided list is too old.");
}

#[tokio::test]
async fn field_selectors_on_pod_fields_and_names() {
    let pod = |name: &str, node: &str, phase: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase}})
    };
    let sim = sim_with(vec![
        pod("p1", "n1", "Running"),
        pod("p2", "n2", "Running"),
        pod("p3", "n1", "Pending"),
    ])
    .await;
    let addr = sim.addr().to_string();
    let l = get(&addr, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1").await.json();
    assert_eq!(names(&l), ["default/p1", "default/p3"]);
    let l = get(&addr, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1,status.phase!%3DPending")
        .await
        .json();
    assert_eq!(names(&l), ["default/p1"]);
    let l =
        get(&addr, "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dp2").await.json();
    assert_eq!(names(&l), ["default/p2"]);
    // The old field name is converted before matching.
    let l = get(&addr, "/api/v1/pods?fieldSelector=spec.host%3Dn1").await.json();
    assert_eq!(names(&l), ["default/p1", "default/p3"]);
    let bad = get(&addr, "/api/v1/pods?fieldSelector=spec.bogus%3Dx").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["reason"], "BadRequest");
}

#[tokio::test]
async fn a_node_list_at_the_latest_state_pages_over_the_node_index() {
    let pod = |name: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
    };
    let sim = sim_with(vec![pod("p1", "n1"), pod("p2", "n1"), pod("p3", "n2")]).await;
    let addr = sim.addr().to_string();
    let rv = sim.current_rv();
    let token = |l: &serde_json::Value| l["metadata"]["continue"].as_str().map(str::to_string);
    // Read from the watch cache's spec.nodeName index, the range holds n1's pods only: nothing
    // follows a page holding both, so no token (consistent, and not-older-than, lists).
    for path in [
        "/api/v1/pods?limit=2&fieldSelector=spec.nodeName%3Dn1".to_string(),
        format!(
            "/api/v1/pods?limit=2&fieldSelector=spec.host%3Dn1&resourceVersion={rv}&resourceVersionMatch=NotOlderThan"
        ),
    ] {
        let l = get(&addr, &path).await.json();
        assert_eq!(names(&l), ["default/p1", "default/p2"], "{path}");
        assert_eq!(token(&l), None, "{path}");
    }
    // At an exact RV the key range is walked: "default/p3" follows, so a token and an empty page.
    let l = get(
        &addr,
        &format!("/api/v1/pods?limit=2&fieldSelector=spec.nodeName%3Dn1&resourceVersion={rv}"),
    )
    .await
    .json();
    assert_eq!(names(&l), ["default/p1", "default/p2"]);
    let c = token(&l).expect("a token at an exact resourceVersion");
    let next =
        get(&addr, &format!("/api/v1/pods?limit=2&fieldSelector=spec.nodeName%3Dn1&continue={c}"))
            .await
            .json();
    assert_eq!((names(&next), token(&next)), (vec![], None));
    // A page of one: another n1 pod follows in the index, so a token; the continued page walks
    // the key range again.
    let l = get(&addr, "/api/v1/pods?limit=1&fieldSelector=spec.nodeName%3Dn1").await.json();
    let c = token(&l).expect("another n1 pod follows");
    let next =
        get(&addr, &format!("/api/v1/pods?limit=1&fieldSelector=spec.nodeName%3Dn1&continue={c}"))
            .await
            .json();
    assert_eq!(names(&next), ["default/p2"]);
    assert!(token(&next).is_some(), "default/p3 follows in the key range");
}

#[tokio::test]
async fn watch_cache_paging_rules() {
    let sim = sim_with(vec![
        cm("w", "a1", "web"),
        cm("w", "b1", "db"),
        cm("w", "c1", "db"),
        cm("w", "d1", "db"),
    ])
    .await;
    let addr = sim.addr().to_string();
    // resourceVersion=0 ignores limit (computeListLimit): the whole list, no token.
    let all = get(&addr, "/api/v1/namespaces/w/configmaps?resourceVersion=0&limit=1").await.json();
    assert_eq!(names(&all).len(), 4);
    assert!(all["metadata"].get("continue").is_none());
    // A full page followed by anything, matching or not, gets a token; the next page may be
    // empty.
    let p1 =
        get(&addr, "/api/v1/namespaces/w/configmaps?limit=1&labelSelector=app%3Dweb").await.json();
    assert_eq!(names(&p1), ["w/a1"]);
    let c = p1["metadata"]["continue"]
        .as_str()
        .expect("a token although nothing else matches")
        .to_string();
    assert!(p1["metadata"].get("remainingItemCount").is_none());
    let p2 = get(
        &addr,
        &format!("/api/v1/namespaces/w/configmaps?limit=1&labelSelector=app%3Dweb&continue={c}"),
    )
    .await
    .json();
    assert_eq!(names(&p2), Vec::<String>::new());
    assert!(p2["metadata"].get("continue").is_none());
    // metadata.name in a namespace is a single-key read: no paging.
    let one =
        get(&addr, "/api/v1/namespaces/w/configmaps?limit=1&fieldSelector=metadata.name%3Db1")
            .await
            .json();
    assert_eq!(names(&one), ["w/b1"]);
    assert!(one["metadata"].get("continue").is_none());
}
