use super::*;

#[test]
fn kubeplex_calls_are_read_by_cache_and_kind() {
    let text = "# HELP kubeplex_upstream_calls_total List and watch calls.\n\
        kubeplex_upstream_calls_total{encoding=\"protobuf\",resource=\"services/v1\",verb=\"proof_list\"} 2\n\
        kubeplex_upstream_calls_total{encoding=\"json\",resource=\"pods/v1\",verb=\"watchlist\"} 1\n\
        kubeplex_upstream_calls_total_other{encoding=\"json\",resource=\"pods/v1\",verb=\"list\"} 7\n\
        kubeplex_requests_total{code=\"200\",resource=\"pods\",source=\"upstream\",verb=\"WATCH\"} 3\n\
        kubeplex_requests_total{code=\"410\",resource=\"pods\",source=\"upstream\",verb=\"WATCH\"} 1\n\
        kubeplex_requests_total{code=\"200\",resource=\"pods\",source=\"upstream\",verb=\"GET\"} 5\n\
        kubeplex_requests_total{code=\"200\",resource=\"pods\",source=\"cache\",verb=\"LIST\"} 9\n";
    let calls = proxy_calls(text);
    assert_eq!(calls.get("services/v1 protobuf proof_list"), Some(&2));
    assert_eq!(calls.get("pods/v1 json watchlist"), Some(&1));
    assert_eq!(calls.get("pods WATCH passed through"), Some(&4));
    assert_eq!(calls.len(), 3, "{calls:?}");
    let before = BTreeMap::from([("pods/v1 json watchlist".to_string(), 1)]);
    let moved = delta(&before, &calls);
    assert_eq!(moved.get("services/v1 protobuf proof_list"), Some(&2));
    assert_eq!(moved.len(), 2, "{moved:?}");
}

#[test]
fn each_node_gets_a_kubelet_and_a_kube_proxy() {
    let spec = MixSpec {
        nodes: 3,
        agents: 2,
        kubectl: 0,
        writes_per_second: 1.0,
        duration: Duration::from_secs(1),
        namespace: "bench".into(),
        objects: 1,
        upstream_metrics: String::new(),
        proxy_metrics: None,
        allow_remote: false,
    };
    let classes = classes(&spec);
    let sizes: Vec<usize> = classes.iter().map(|c| c.informers.len()).collect();
    assert_eq!(sizes, [3, 3, 3, 2, 1]);
    let kubelet = &classes[0].informers[2];
    assert_eq!(kubelet.selectors, [("fieldSelector", "spec.nodeName=node-2".to_string())]);
    assert!(kubelet.protobuf && kubelet.start == Start::WatchList);
    assert!(classes[3].informers.iter().all(|i| !i.protobuf && i.start == Start::ListWatch));
}
