//! `printPod` of pkg/printers/internalversion/printers.go, always wide (the apiserver's
//! TableConvertor generates with `Wide: true`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::{human_duration, parse_time, since, translate_since};
use super::fields::{arr_at, at, bool_at, int_at, present, str_at};
use super::row::{Cell, Row, RowCondition};

const POD_SUCCESS_CONDITIONS: &[RowCondition] = &[RowCondition {
    kind: "Completed",
    status: "True",
    reason: "Succeeded",
    message: "The pod has completed successfully.",
}];

const POD_FAILED_CONDITIONS: &[RowCondition] = &[RowCondition {
    kind: "Completed",
    status: "True",
    reason: "Failed",
    message: "The pod failed.",
}];

/// `node.NodeUnreachablePodReason`, set by the node lifecycle controller.
const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

/// Running totals over container statuses, mirroring printPod's locals.
#[derive(Default)]
struct Restarts {
    count: i64,
    /// The latest `lastState.terminated.finishedAt`; `None` is Go's zero time.
    last: Option<DateTime<Utc>>,
}

impl Restarts {
    fn add(&mut self, status: &Value) {
        self.count = self.count.saturating_add(int_at(status, &["restartCount"]));
        // `lastRestartDate.Before(&terminatedDate)`: a zero finishedAt never wins.
        if present(status, &["lastState", "terminated"]).is_some() {
            let finished = parse_time(at(status, &["lastState", "terminated", "finishedAt"]));
            if finished > self.last {
                self.last = finished;
            }
        }
    }
}

/// `podutil.IsRestartableInitContainer`: a sidecar, i.e. `restartPolicy: Always`.
fn is_restartable(container: Option<&Value>) -> bool {
    container.is_some_and(|c| str_at(c, &["restartPolicy"]) == "Always")
}

/// The reason for a terminated container without one: "Signal:N" or "ExitCode:N".
fn terminated_code(terminated: &Value, prefix: &str) -> String {
    let signal = int_at(terminated, &["signal"]);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!("{prefix}ExitCode:{}", int_at(terminated, &["exitCode"]))
    }
}

fn condition_is<'a>(conditions: &'a [Value], kind: &str) -> Option<&'a str> {
    // Go stops at the first condition of the type (isPodInitializedConditionTrue).
    conditions.iter().find(|c| str_at(c, &["type"]) == kind).map(|c| str_at(c, &["status"]))
}

pub(super) fn print_pod(pod: &Value, now: DateTime<Utc>) -> Row {
    let containers = arr_at(pod, &["spec", "containers"]);
    let init_containers = arr_at(pod, &["spec", "initContainers"]);
    let conditions = arr_at(pod, &["status", "conditions"]);
    let phase = str_at(pod, &["status", "phase"]);

    let mut reason = phase.to_string();
    let status_reason = str_at(pod, &["status", "reason"]);
    if !status_reason.is_empty() {
        reason = status_reason.to_string();
    }
    // A pod held by scheduling gates shows "SchedulingGated" whatever its phase says.
    for c in conditions {
        if str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }
    let row_conditions = match phase {
        "Succeeded" => POD_SUCCESS_CONDITIONS,
        "Failed" => POD_FAILED_CONDITIONS,
        _ => &[],
    };

    // Go builds a map by name, so a duplicated name resolves to the last container.
    let mut by_name: HashMap<&str, &Value> = HashMap::new();
    let mut total = containers.len();
    for c in init_containers {
        by_name.insert(str_at(c, &["name"]), c);
        // Sidecars count as containers of the pod in the READY column.
        if is_restartable(Some(c)) {
            total += 1;
        }
    }

    let mut ready = 0usize;
    let mut all = Restarts::default();
    let mut sidecars = Restarts::default();
    let mut initializing = false;
    for (i, status) in arr_at(pod, &["status", "initContainerStatuses"]).iter().enumerate() {
        all.add(status);
        let restartable = is_restartable(by_name.get(str_at(status, &["name"])).copied());
        if restartable {
            sidecars.add(status);
        }
        let terminated = present(status, &["state", "terminated"]);
        let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
        match terminated {
            Some(t) if int_at(t, &["exitCode"]) == 0 => continue,
            _ if restartable && bool_at(status, &["started"]) => {
                if bool_at(status, &["ready"]) {
                    ready += 1;
                }
                continue;
            }
            Some(t) => {
                // Initialization failed.
                let r = str_at(t, &["reason"]);
                reason =
                    if r.is_empty() { terminated_code(t, "Init:") } else { format!("Init:{r}") };
            }
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                reason = format!("Init:{waiting_reason}");
            }
            None => reason = format!("Init:{i}/{}", init_containers.len()),
        }
        initializing = true;
        // The first init container that has not finished decides the status.
        break;
    }

    let mut restarts = all;
    if !initializing || condition_is(conditions, "Initialized") == Some("True") {
        // Once initialized, only sidecar restarts count besides the regular containers'.
        restarts = sidecars;
        let mut has_running = false;
        // Go walks the statuses backwards, so the first container's state wins.
        for status in arr_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts.add(status);
            let waiting = str_at(status, &["state", "waiting", "reason"]);
            let terminated = present(status, &["state", "terminated"]);
            if present(status, &["state", "waiting"]).is_some() && !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = terminated {
                let r = str_at(t, &["reason"]);
                reason = if r.is_empty() { terminated_code(t, "") } else { r.to_string() };
            } else if bool_at(status, &["ready"])
                && present(status, &["state", "running"]).is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        // A pod whose last container completed while another still runs is not "Completed".
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| str_at(c, &["type"]) == "Ready" && str_at(c, &["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    if present(pod, &["metadata", "deletionTimestamp"]).is_some() {
        if status_reason == NODE_UNREACHABLE_POD_REASON {
            reason = "Unknown".to_string();
        } else if phase != "Failed" && phase != "Succeeded" {
            reason = "Terminating".to_string();
        }
    }

    let restarts_cell = match restarts.last {
        Some(last) if restarts.count != 0 => {
            format!("{} ({} ago)", restarts.count, human_duration(since(now, last)))
        }
        _ => restarts.count.to_string(),
    };

    let or_none = |s: &str| if s.is_empty() { "<none>".to_string() } else { s.to_string() };
    // v1→internal conversion: a set status.podIP is authoritative over status.podIPs.
    let mut pod_ip = str_at(pod, &["status", "podIP"]);
    if pod_ip.is_empty() {
        pod_ip = arr_at(pod, &["status", "podIPs"]).first().map_or("", |ip| str_at(ip, &["ip"]));
    }
    let gates = arr_at(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_conditions = gates
            .iter()
            .filter(|g| condition_is(conditions, str_at(g, &["conditionType"])) == Some("True"))
            .count();
        format!("{true_conditions}/{}", gates.len())
    };

    Row {
        cells: vec![
            Cell::Str(str_at(pod, &["metadata", "name"]).to_string()),
            Cell::Str(format!("{ready}/{total}")),
            Cell::Str(reason),
            Cell::Str(restarts_cell),
            Cell::Str(translate_since(at(pod, &["metadata", "creationTimestamp"]), now)),
            Cell::Str(or_none(pod_ip)),
            Cell::Str(or_none(str_at(pod, &["spec", "nodeName"]))),
            Cell::Str(or_none(str_at(pod, &["status", "nominatedNodeName"]))),
            Cell::Str(readiness_gates),
        ],
        conditions: row_conditions,
    }
}
