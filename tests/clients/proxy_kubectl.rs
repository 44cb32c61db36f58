//! kubectl, unchanged, through kubeplex: the same answers as from the apiserver directly, with
//! `resourceVersion=0` reads served from the cache.

use kubeplex_test_support as support;

use kubeplex_sim::seed::ClusterShape;
use support::kubectl;
use support::stack::Stack;

#[tokio::test]
async fn kubectl_reads_through_kubeplex_match_the_apiserver() {
    let shape = ClusterShape { nodes: 5, namespaces: 4, pods: 300, configmaps: 20, services: 4 };
    let stack = Stack::new(shape, &["pods"]).await;
    let via = stack.write_client_kubeconfig();
    let direct = stack.dir.join("upstream.kubeconfig");
    let (h1, h2) = (stack.dir.join("home-via"), stack.dir.join("home-direct"));
    for args in [
        &["get", "pods", "-A", "-o", "json"][..],
        &["get", "pods", "-A", "--chunk-size=100", "-o", "name"],
        &["get", "pods", "-n", "team-2", "-o", "wide"],
    ] {
        let ours = kubectl::run(&via, &h1, args).await;
        let theirs = kubectl::run(&direct, &h2, args).await;
        if args.contains(&"wide") {
            // Ages are computed when each Table is printed.
            let strip = |s: &str| {
                s.lines()
                    .map(|l| {
                        l.split_whitespace()
                            .filter(|c| !c.ends_with('s') || c.len() > 4)
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(strip(&ours), strip(&theirs), "kubectl {args:?}");
        } else {
            assert_eq!(ours, theirs, "kubectl {args:?}");
        }
    }
    let before = stack.served_from("cache").await;
    let raw = ["get", "--raw", "/api/v1/pods?resourceVersion=0"];
    let ours = kubectl::run(&via, &h1, &raw).await;
    let theirs = kubectl::run(&direct, &h2, &raw).await;
    assert_eq!(ours, theirs, "get --raw at resourceVersion=0");
    assert!(stack.served_from("cache").await > before, "the raw list came from the cache");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&ours).expect("json")["items"]
            .as_array()
            .map(Vec::len),
        Some(300)
    );
}
