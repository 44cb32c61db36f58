//! printPod: status reasons, readiness, restarts, init containers and sidecars.

use super::*;

fn now() -> DateTime<Utc> {
    time("2026-11-22T12:00:00Z")
}

/// A pod created an hour ago on node-1, with the given spec and status merged in.
fn pod(spec: Value, status: Value) -> Value {
    let mut p = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "p", "namespace": "fx", "resourceVersion": "1",
            "creationTimestamp": at_ago(now(), 3600)},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.5"}
    });
    for (section, extra) in [("spec", spec), ("status", status)] {
        if let (Some(dst), Value::Object(src)) = (p[section].as_object_mut(), extra) {
            dst.extend(src);
        }
    }
    p
}

/// Ready, Status and Restarts.
fn summary(p: &Value) -> (String, String, String) {
    let c = cells("pods", "", p, now());
    let s = |i: usize| c[i].as_str().unwrap_or("?").to_string();
    (s(1), s(2), s(3))
}

fn expect(p: &Value, ready: &str, status: &str, restarts: &str) {
    assert_eq!(summary(p), (ready.to_string(), status.to_string(), restarts.to_string()));
}

fn running(ready: bool, restarts: i64) -> Value {
    json!({"name": "c", "ready": ready, "restartCount": restarts,
        "state": {"running": {"startedAt": at_ago(now(), 60)}}})
}

#[test]
fn running_and_not_ready() {
    let p = pod(json!({}), json!({"containerStatuses": [running(true, 0)]}));
    assert_eq!(
        cells("pods", "", &p, now()),
        json!(["p", "1/1", "Running", "0", "60m", "10.0.0.5", "node-1", "<none>", "<none>"])
    );
    let p = pod(json!({}), json!({"containerStatuses": [running(false, 0)]}));
    expect(&p, "0/1", "Running", "0");
}

#[test]
fn restarts_show_when_the_last_one_ended() {
    let mut cs = running(true, 4);
    cs["lastState"] = json!({"terminated": {"exitCode": 1, "finishedAt": at_ago(now(), 300)}});
    let p = pod(json!({}), json!({"containerStatuses": [cs]}));
    expect(&p, "1/1", "Running", "4 (5m ago)");

    // Restarts without a recorded termination have no "ago".
    let p = pod(json!({}), json!({"containerStatuses": [running(true, 2)]}));
    expect(&p, "1/1", "Running", "2");
}

#[test]
fn waiting_and_terminated_reasons() {
    let waiting = json!({"name": "c", "restartCount": 5,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": at_ago(now(), 30)}}});
    expect(
        &pod(json!({}), json!({"containerStatuses": [waiting]})),
        "0/1",
        "CrashLoopBackOff",
        "5 (30s ago)",
    );

    let by_code = json!({"name": "c", "state": {"terminated": {"exitCode": 137}}});
    expect(&pod(json!({}), json!({"containerStatuses": [by_code]})), "0/1", "ExitCode:137", "0");

    let by_signal = json!({"name": "c", "state": {"terminated": {"exitCode": 0, "signal": 9}}});
    expect(&pod(json!({}), json!({"containerStatuses": [by_signal]})), "0/1", "Signal:9", "0");

    // The first container's state wins: statuses are walked backwards.
    let two = json!([{"name": "a", "state": {"waiting": {"reason": "ImagePullBackOff"}}},
        {"name": "b", "state": {"waiting": {"reason": "ErrImagePull"}}}]);
    let p = pod(
        json!({"containers": [{"name": "a"}, {"name": "b"}]}),
        json!({"containerStatuses": two}),
    );
    expect(&p, "0/2", "ImagePullBackOff", "0");

    // An empty waiting reason keeps the phase.
    let p = pod(
        json!({}),
        json!({"phase": "Pending", "containerStatuses": [
        {"name": "c", "state": {"waiting": {}}}]}),
    );
    expect(&p, "0/1", "Pending", "0");
}

#[test]
fn completed_and_failed_pods_carry_row_conditions() {
    let done =
        json!({"name": "c", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}});
    let p = pod(json!({}), json!({"phase": "Succeeded", "containerStatuses": [done]}));
    expect(&p, "0/1", "Completed", "0");
    let body = text(table_for_object("pods", "", &p, IncludeObject::None, now()));
    assert!(body.contains(concat!(
        r#""conditions":[{"type":"Completed","status":"True","reason":"Succeeded","#,
        r#""message":"The pod has completed successfully."}],"object":null}"#
    )));

    let p = pod(json!({}), json!({"phase": "Failed", "reason": "Evicted"}));
    expect(&p, "0/1", "Evicted", "0");
    let body = text(table_for_object("pods", "", &p, IncludeObject::None, now()));
    assert!(body.contains(
        r#""conditions":[{"type":"Completed","status":"True","reason":"Failed","message":"The pod failed."}]"#
    ));

    let running = pod(json!({}), json!({"containerStatuses": [running(true, 0)]}));
    let body = text(table_for_object("pods", "", &running, IncludeObject::None, now()));
    assert!(!body.contains(r#""conditions":"#));
}

#[test]
fn completed_container_beside_a_running_one() {
    let statuses = json!([
        {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "b", "ready": true, "state": {"running": {}}}]);
    let spec = json!({"containers": [{"name": "a"}, {"name": "b"}]});
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let p = pod(spec.clone(), json!({"containerStatuses": statuses, "conditions": ready}));
    expect(&p, "1/2", "Running", "0");
    let p = pod(spec, json!({"containerStatuses": statuses}));
    expect(&p, "1/2", "NotReady", "0");
}

#[test]
fn init_containers() {
    let spec = json!({"initContainers": [{"name": "i1"}, {"name": "i2"}]});
    let status = |first: Value| {
        json!({"phase": "Pending", "initContainerStatuses": [first, {"name": "i2",
            "state": {"waiting": {"reason": "PodInitializing"}}}],
            "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "PodInitializing"}}}]})
    };
    let cases = [
        (json!({"name": "i1", "state": {"running": {}}}), "Init:0/2"),
        (json!({"name": "i1", "state": {"waiting": {"reason": "PodInitializing"}}}), "Init:0/2"),
        (
            json!({"name": "i1", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}),
            "Init:CrashLoopBackOff",
        ),
        (
            json!({"name": "i1", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}),
            "Init:Error",
        ),
        (json!({"name": "i1", "state": {"terminated": {"exitCode": 2}}}), "Init:ExitCode:2"),
        (
            json!({"name": "i1", "state": {"terminated": {"exitCode": 2, "signal": 15}}}),
            "Init:Signal:15",
        ),
        // The first one done, the second one decides.
        (json!({"name": "i1", "state": {"terminated": {"exitCode": 0}}}), "Init:1/2"),
    ];
    for (first, reason) in cases {
        expect(&pod(spec.clone(), status(first)), "0/1", reason, "0");
    }

    // Init restarts count while initializing, with the time of the last one.
    let crashed = json!({"name": "i1", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": at_ago(now(), 125)}}});
    expect(
        &pod(spec.clone(), status(crashed.clone())),
        "0/1",
        "Init:CrashLoopBackOff",
        "3 (2m5s ago)",
    );

    // Once the Initialized condition is true, init restarts no longer count; a running
    // container does not clear the init reason (printPod only overrides it on waiting or
    // terminated containers).
    let mut st = status(crashed);
    st["conditions"] = json!([{"type": "Initialized", "status": "True"}]);
    st["containerStatuses"] = json!([running(true, 0)]);
    st["phase"] = json!("Running");
    expect(&pod(spec, st), "1/1", "Init:CrashLoopBackOff", "0");
}

#[test]
fn sidecars_count_as_containers() {
    let spec =
        json!({"initContainers": [{"name": "init"}, {"name": "side", "restartPolicy": "Always"}]});
    let sidecar = json!({"name": "side", "started": true, "ready": true, "restartCount": 2,
        "state": {"running": {}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": at_ago(now(), 7200)}}});
    let init_done = json!({"name": "init", "restartCount": 1, "state": {"terminated": {"exitCode": 0}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": at_ago(now(), 60)}}});
    let mut main = running(true, 1);
    main["lastState"] =
        json!({"terminated": {"exitCode": 1, "finishedAt": at_ago(now(), 3 * 3600)}});
    let p = pod(
        spec.clone(),
        json!({"initContainerStatuses": [init_done.clone(), sidecar.clone()], "containerStatuses": [main],
            "conditions": [{"type": "Initialized", "status": "True"}]}),
    );
    // 2 sidecar + 1 main restarts; the plain init container's restart is not counted, and
    // the latest restart among those counted was the sidecar's, 2h ago.
    expect(&p, "2/2", "Running", "3 (120m ago)");

    // A sidecar not started yet holds initialization.
    let mut not_started = sidecar;
    not_started["started"] = json!(false);
    let p =
        pod(spec, json!({"phase": "Pending", "initContainerStatuses": [init_done, not_started]}));
    expect(&p, "0/2", "Init:1/2", "3 (60s ago)");
}

#[test]
fn terminating_unknown_and_gated() {
    let mut p = pod(json!({}), json!({"containerStatuses": [running(true, 0)]}));
    p["metadata"]["deletionTimestamp"] = json!(at_ago(now(), 1));
    expect(&p, "1/1", "Terminating", "0");

    p["status"]["reason"] = json!("NodeLost");
    expect(&p, "1/1", "Unknown", "0");

    // A terminal pod being deleted keeps its final status.
    let done =
        json!({"name": "c", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}});
    let mut p = pod(json!({}), json!({"phase": "Succeeded", "containerStatuses": [done]}));
    p["metadata"]["deletionTimestamp"] = json!(at_ago(now(), 1));
    expect(&p, "0/1", "Completed", "0");

    // A null deletionTimestamp is unset.
    let mut p = pod(json!({}), json!({"containerStatuses": [running(true, 0)]}));
    p["metadata"]["deletionTimestamp"] = Value::Null;
    expect(&p, "1/1", "Running", "0");

    let gated = json!({"phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]});
    let mut p = pod(json!({}), gated);
    p["spec"]["nodeName"] = Value::Null;
    assert_eq!(
        cells("pods", "", &p, now()),
        json!([
            "p",
            "0/1",
            "SchedulingGated",
            "0",
            "60m",
            "10.0.0.5",
            "<none>",
            "<none>",
            "<none>"
        ])
    );
}

#[test]
fn wide_columns() {
    let p = pod(
        json!({"readinessGates": [{"conditionType": "x"}, {"conditionType": "y"}, {"conditionType": "z"}]}),
        json!({"podIP": "", "podIPs": [{"ip": "fd00::5"}, {"ip": "10.0.0.6"}], "nominatedNodeName": "n2",
            "conditions": [{"type": "x", "status": "True"}, {"type": "y", "status": "False"},
                {"type": "x", "status": "False"}]}),
    );
    assert_eq!(
        cells("pods", "", &p, now()),
        json!(["p", "0/1", "Running", "0", "60m", "fd00::5", "node-1", "n2", "1/3"])
    );

    // A set status.podIP wins over podIPs, as the v1→internal conversion does.
    let p = pod(json!({}), json!({"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.8"}]}));
    assert_eq!(cells("pods", "", &p, now())[5], json!("10.0.0.7"));
}
