//! Micro-benchmarks of kubeplex's hot paths (issue 5): what every cached read or upstream
//! event costs. `cargo bench --bench hot_paths`; compare ratios within one run, the machines
//! are shared.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kubeplex::cache::select::{select, Query};
use kubeplex::cache::store::{Store, StoreLimits};
use kubeplex::cache::transcode::Transcoder;
use kubeplex::cache::CachedObject;
use kubeplex::wire::selector::{FieldSelector, LabelSelector};
use kubeplex::wire::{continue_token, meta, proto};
use kubeplex_sim::seed;

/// 10,000 pods under `cargo bench`; a handful when the test runner only checks that every
/// benchmark runs (it does not pass `--bench`), so the suite stays fast.
fn pod_count() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        10_000
    } else {
        50
    }
}

/// Realistic pods (the demo's), as list items in JSON and as bare protobuf messages.
fn pods() -> (Vec<Bytes>, Vec<Bytes>) {
    let pod_type = kubeplex::wire::codec::type_for("v1", "Pod").expect("Pod");
    let n = pod_count();
    let mut json = Vec::with_capacity(n);
    let mut pb = Vec::with_capacity(n);
    for i in 0..n {
        let mut v = seed::pod(&format!("team-{}", i % 10), i, 100);
        v["metadata"]["uid"] = format!("{:08x}-0000-4000-8000-{:012x}", i, i).into();
        v["metadata"]["resourceVersion"] = (1000 + i).to_string().into();
        v["metadata"]["creationTimestamp"] = "2026-11-22T10:00:00Z".into();
        let canonical = kubeplex::wire::codec::canonicalize(pod_type, &v).expect("canonical").value;
        pb.push(Bytes::from(
            kubeplex::wire::codec::to_protobuf(pod_type, &canonical).expect("protobuf"),
        ));
        let full = kubeplex::wire::gojson::to_vec(&canonical);
        json.push(Bytes::from(meta::strip_type_meta(&full).expect("item")));
    }
    (json, pb)
}

fn benches(c: &mut Criterion) {
    let (json, pb) = pods();
    let json_bytes: usize = json.iter().map(Bytes::len).sum();

    let mut g = c.benchmark_group("metadata");
    g.bench_function("json_object_meta", |b| {
        b.iter(|| meta::object_meta_json(black_box(&json[7])).map(|m| m.name.len()))
    });
    g.bench_function("protobuf_object_meta", |b| {
        b.iter(|| proto::object_meta(black_box(&pb[7])).map(|m| m.name.len()))
    });
    g.bench_function("cached_object_from_json_item", |b| {
        b.iter(|| {
            CachedObject::from_json_item("", "pods", black_box(json[7].clone()))
                .map(|o| o.resource_version)
        })
    });
    // The partial decode of a pod's selectable fields alone, and the whole cached object built
    // from a protobuf message (ObjectMeta, labels, every selectable field).
    g.bench_function("protobuf_pod_fields", |b| {
        b.iter(|| {
            let meta = proto::object_meta(black_box(&pb[7])).expect("meta");
            let fields =
                proto::fields::selectable_fields("", "pods", &pb[7], &meta).expect("fields");
            kubeplex::wire::selector::FieldRules::Pods
                .field_value(&fields, "spec.nodeName")
                .map(|v| v.len())
        })
    });
    g.bench_function("cached_object_from_protobuf_message", |b| {
        b.iter(|| {
            CachedObject::from_protobuf_message("", "pods", black_box(pb[7].clone()))
                .map(|o| o.resource_version)
        })
    });
    // A cached pod rendered in the other encoding (`cache::transcode`: a cache fed by another
    // encoding's, issue 31), the exactness check included.
    let info = kubeplex::wire::resource::ResourceInfo {
        group: String::new(),
        version: "v1".into(),
        resource: "pods".into(),
        kind: "Pod".into(),
        namespaced: true,
        verbs: vec!["list".into(), "watch".into()],
    };
    let to_pb = Transcoder::new(&info, kubeplex::cache::Encoding::Protobuf).expect("Pod");
    let to_json = Transcoder::new(&info, kubeplex::cache::Encoding::Json).expect("Pod");
    let json_pod = CachedObject::from_json_item("", "pods", json[7].clone()).expect("pod");
    let pb_pod = CachedObject::from_protobuf_message("", "pods", pb[7].clone()).expect("pod");
    g.bench_function("transcode_json_to_protobuf", |b| {
        b.iter(|| to_pb.object(black_box(&json_pod)).map(|o| o.body.len()))
    });
    g.bench_function("transcode_protobuf_to_json", |b| {
        b.iter(|| to_json.object(black_box(&pb_pod)).map(|o| o.body.len()))
    });
    g.finish();

    let mut g = c.benchmark_group("list_10k_pods");
    g.throughput(Throughput::Bytes(json_bytes as u64));
    let list_meta = meta::ListMeta {
        resource_version: "20000",
        continue_token: "",
        remaining_item_count: None,
    };
    g.bench_function("json_assembly", |b| {
        b.iter(|| meta::list_json("v1", "PodList", &list_meta, black_box(&json)).len())
    });
    g.bench_function("protobuf_assembly", |b| {
        b.iter(|| proto::encode_list("v1", "PodList", &list_meta, black_box(&pb)).len())
    });
    let mut store =
        Store::new(StoreLimits { max_snapshots: 16, max_snapshot_age: Duration::from_secs(60) });
    let objects: Vec<CachedObject> = json
        .iter()
        .map(|j| CachedObject::from_json_item("", "pods", j.clone()).expect("object"))
        .collect();
    store.replace(objects, 20_000, std::time::Instant::now());
    let snap = store.current();
    let label = LabelSelector::parse("app=app-3,tier!=backend").expect("selector");
    let node = FieldSelector::parse("spec.nodeName=node-7").expect("selector");
    g.bench_function("select_all", |b| {
        b.iter(|| {
            select(black_box(&snap), &Query { namespaced: true, ..Query::default() }).items.len()
        })
    });
    g.bench_function("select_label", |b| {
        b.iter(|| {
            select(
                black_box(&snap),
                &Query { namespaced: true, label: Some(&label), ..Query::default() },
            )
            .items
            .len()
        })
    });
    g.bench_function("select_node_field", |b| {
        b.iter(|| {
            select(
                black_box(&snap),
                &Query { namespaced: true, field: Some(&node), ..Query::default() },
            )
            .items
            .len()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("selectors");
    let labels: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
        r#"{"app":"app-3","pod-template-hash":"7d4b9c8f6","tier":"frontend"}"#,
    )
    .expect("labels");
    g.bench_function("label_match", |b| b.iter(|| label.matches(black_box(&labels))));
    g.bench_function("label_parse", |b| {
        b.iter(|| {
            LabelSelector::parse(black_box("app in (a,b,c),tier!=backend,!canary"))
                .map(|s| s.is_empty())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("watch_event");
    let full = meta::with_type_meta(&json[7], "v1", "Pod").expect("object");
    g.bench_function("json_frame", |b| {
        b.iter(|| meta::watch_event_json("MODIFIED", black_box(&full)).len())
    });
    g.bench_function("protobuf_frame", |b| {
        b.iter(|| {
            proto::encode_watch_frame(
                "MODIFIED",
                &proto::encode_unknown("v1", "Pod", black_box(&pb[7])),
            )
            .len()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("continue_token");
    g.bench_function("round_trip", |b| {
        b.iter(|| {
            let t = continue_token::encode(black_box(20_000), "/team-3/app-3-00003\u{0}");
            continue_token::decode(&t).map(|d| d.rv)
        })
    });
    g.finish();
}

criterion_group! {
    name = hot_paths;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(hot_paths);
