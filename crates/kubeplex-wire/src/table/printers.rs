//! Row printers of pkg/printers/internalversion/printers.go for the kinds the sim serves (and
//! kubeplex's cache answers Tables for), and the custom-resource default (apiextensions'
//! tableconvertor with the logically defaulted "Age" column). All run wide, as the apiserver's
//! TableConvertor does.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::age::{human_duration, parse_rfc3339, parse_time, since, translate_since};
use super::columns::{self, Column};
use super::fields::{arr_at, at, bool_at, int_at, map_len, present, str_at};
use super::pod::print_pod;
use super::row::{Cell, Row};
use super::workloads::{deployment_cells, replica_set_cells};

use crate::groups::BUILTIN_GROUPS as BUILT_IN_GROUPS;

/// Which table convertor the apiserver uses for a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Printer {
    ConfigMap,
    Pod,
    Secret,
    Service,
    Namespace,
    Node,
    /// core/v1 events.
    Event,
    /// events.k8s.io/v1 events: the same storage and printer, other field names.
    EventV1,
    Endpoints,
    EndpointSlice,
    Deployment,
    ReplicaSet,
    /// A custom resource whose CRD declares no additionalPrinterColumns.
    Custom,
}

impl Printer {
    /// `None` for a built-in resource whose printer is not implemented.
    pub(super) fn for_resource(resource: &str, group: &str) -> Option<Printer> {
        let printer = match (group, resource) {
            ("", "configmaps") => Printer::ConfigMap,
            ("", "pods") => Printer::Pod,
            ("", "secrets") => Printer::Secret,
            ("", "services") => Printer::Service,
            ("", "namespaces") => Printer::Namespace,
            ("", "nodes") => Printer::Node,
            ("", "events") => Printer::Event,
            ("events.k8s.io", "events") => Printer::EventV1,
            ("", "endpoints") => Printer::Endpoints,
            ("discovery.k8s.io", "endpointslices") => Printer::EndpointSlice,
            ("apps", "deployments") => Printer::Deployment,
            ("apps", "replicasets") => Printer::ReplicaSet,
            (g, _) if BUILT_IN_GROUPS.contains(&g) => return None,
            _ => Printer::Custom,
        };
        Some(printer)
    }

    pub(super) fn columns(self) -> &'static [Column] {
        match self {
            Printer::ConfigMap => columns::CONFIG_MAP,
            Printer::Pod => columns::POD,
            Printer::Secret => columns::SECRET,
            Printer::Service => columns::SERVICE,
            Printer::Namespace => columns::NAMESPACE,
            Printer::Node => columns::NODE,
            Printer::Event | Printer::EventV1 => columns::EVENT,
            Printer::Endpoints => columns::ENDPOINTS,
            Printer::EndpointSlice => columns::ENDPOINT_SLICE,
            Printer::Deployment => columns::DEPLOYMENT,
            Printer::ReplicaSet => columns::REPLICA_SET,
            Printer::Custom => columns::CUSTOM,
        }
    }

    pub(super) fn row(self, obj: &Value, now: DateTime<Utc>) -> Row {
        let name = || Cell::Str(str_at(obj, &["metadata", "name"]).to_string());
        let age = || Cell::Str(translate_since(at(obj, &["metadata", "creationTimestamp"]), now));
        let cells = match self {
            Printer::Pod => return print_pod(obj, now),
            Printer::Event => return print_event(obj, &CORE_EVENT, now),
            Printer::EventV1 => return print_event(obj, &EVENTS_V1_EVENT, now),
            Printer::Custom => vec![name(), custom_age(obj, now)],
            Printer::ConfigMap => {
                let n = map_len(obj, &["data"]) + map_len(obj, &["binaryData"]);
                vec![name(), Cell::Int(n as i64), age()]
            }
            Printer::Secret => vec![
                name(),
                Cell::Str(str_at(obj, &["type"]).to_string()),
                Cell::Int(secret_data_len(obj) as i64),
                age(),
            ],
            Printer::Service => service_cells(obj, name(), age()),
            Printer::Namespace => {
                vec![name(), Cell::Str(str_at(obj, &["status", "phase"]).to_string()), age()]
            }
            Printer::Node => node_cells(obj, name(), age()),
            Printer::Endpoints => vec![name(), Cell::Str(format_endpoints(obj)), age()],
            Printer::EndpointSlice => vec![
                name(),
                Cell::Str(str_at(obj, &["addressType"]).to_string()),
                Cell::Str(format_discovery_ports(arr_at(obj, &["ports"]))),
                Cell::Str(format_discovery_endpoints(arr_at(obj, &["endpoints"]))),
                age(),
            ],
            Printer::Deployment => deployment_cells(obj, name(), age()),
            Printer::ReplicaSet => replica_set_cells(obj, name(), age()),
        };
        Row { cells, conditions: &[] }
    }
}

/// The "Age" cell of a custom resource: the "date" column of apiextensions' tableconvertor
/// (`cellForJSONValue`) reading `.metadata.creationTimestamp` from the unstructured object.
fn custom_age(obj: &Value, now: DateTime<Utc>) -> Cell {
    let text = match at(obj, &["metadata", "creationTimestamp"]) {
        Some(Value::String(s)) => s.as_str(),
        // A missing key or a non-string value gives a null cell.
        _ => return Cell::Null,
    };
    // `metav1.Time.UnmarshalQueryParameter`, then `ConvertToHumanReadableDateType`.
    let cell = match text {
        "" | "null" => "<unknown>".to_string(),
        _ => match parse_rfc3339(text) {
            Ok(Some(t)) => human_duration(since(now, t)),
            Ok(None) => "<unknown>".to_string(),
            Err(_) => "<invalid>".to_string(),
        },
    };
    Cell::Str(cell)
}

/// v1→internal conversion merges `stringData` into `data`.
fn secret_data_len(obj: &Value) -> usize {
    let keys = |path| at(obj, &[path]).and_then(Value::as_object).into_iter().flatten();
    keys("data").chain(keys("stringData")).map(|(k, _)| k).collect::<BTreeSet<_>>().len()
}

/// printService: Name, Type, Cluster-IP, External-IP, Port(s), Age, Selector.
fn service_cells(svc: &Value, name: Cell, age: Cell) -> Vec<Cell> {
    let svc_type = str_at(svc, &["spec", "type"]);
    // Registries keep spec.clusterIPs[0] == spec.clusterIP; an object created around the
    // registry may only have the singular field.
    let cluster_ip = match arr_at(svc, &["spec", "clusterIPs"]).first() {
        Some(ip) => ip.as_str().unwrap_or_default(),
        None => str_at(svc, &["spec", "clusterIP"]),
    };
    let external_ips: Vec<&str> =
        arr_at(svc, &["spec", "externalIPs"]).iter().filter_map(Value::as_str).collect();
    let external = match svc_type {
        "ClusterIP" | "NodePort" if !external_ips.is_empty() => external_ips.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            // loadBalancerStatusStringer: a sorted set of ingress IPs (else hostnames),
            // never clipped in wide output.
            let lb: BTreeSet<&str> = arr_at(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .map(|i| match str_at(i, &["ip"]) {
                    "" => str_at(i, &["hostname"]),
                    ip => ip,
                })
                .filter(|s| !s.is_empty())
                .collect();
            let mut all: Vec<&str> = lb.into_iter().collect();
            if all.is_empty() && external_ips.is_empty() {
                "<pending>".to_string()
            } else {
                all.extend(external_ips);
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = arr_at(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let (port, node_port) = (int_at(p, &["port"]), int_at(p, &["nodePort"]));
            let protocol = str_at(p, &["protocol"]);
            if node_port > 0 {
                format!("{port}:{node_port}/{protocol}")
            } else {
                format!("{port}/{protocol}")
            }
        })
        .collect();
    let ports = if ports.is_empty() { "<none>".to_string() } else { ports.join(",") };
    let selector = at(svc, &["spec", "selector"]).and_then(Value::as_object);
    vec![
        name,
        Cell::Str(svc_type.to_string()),
        Cell::Str(if cluster_ip.is_empty() { "<none>" } else { cluster_ip }.to_string()),
        Cell::Str(external),
        Cell::Str(ports),
        age,
        Cell::Str(format_labels(selector)),
    ]
}

/// `labels.FormatLabels`: sorted `k=v` pairs joined by ",", or "<none>".
fn format_labels(map: Option<&serde_json::Map<String, Value>>) -> String {
    let mut pairs: Vec<String> = map
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".to_string()
    } else {
        pairs.join(",")
    }
}

/// printNode: Name, Status, Roles, Age, Version, then the wide columns.
fn node_cells(node: &Value, name: Cell, age: Cell) -> Vec<Cell> {
    // Only the Ready condition is shown; a later duplicate replaces an earlier one (Go map).
    let ready = arr_at(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == "Ready")
        .map(|c| str_at(c, &["status"]));
    let mut status = vec![match ready {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if bool_at(node, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    // findNodeRoles: node-role.kubernetes.io/<role> keys and the kubernetes.io/role value.
    let mut roles = BTreeSet::new();
    for (k, v) in at(node, &["metadata", "labels"]).and_then(Value::as_object).into_iter().flatten()
    {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role);
            }
        } else if k == "kubernetes.io/role" {
            if let Some(v) = v.as_str().filter(|v| !v.is_empty()) {
                roles.insert(v);
            }
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };
    let address = |kind: &str| {
        arr_at(node, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == kind)
            .map_or("<none>", |a| str_at(a, &["address"]))
            .to_string()
    };
    let info = |field: &str| match str_at(node, &["status", "nodeInfo", field]) {
        "" => "<unknown>".to_string(),
        s => s.to_string(),
    };
    // 1.36 appends the architecture, when the node reports one (`printNode`: "append arch to
    // kernelVersion").
    let kernel = match str_at(node, &["status", "nodeInfo", "architecture"]) {
        "" => info("kernelVersion"),
        arch => format!("{} ({arch})", info("kernelVersion")),
    };
    vec![
        name,
        Cell::Str(status.join(",")),
        Cell::Str(roles),
        age,
        Cell::Str(str_at(node, &["status", "nodeInfo", "kubeletVersion"]).to_string()),
        Cell::Str(address("InternalIP")),
        Cell::Str(address("ExternalIP")),
        Cell::Str(info("osImage")),
        Cell::Str(kernel),
        Cell::Str(info("containerRuntimeVersion")),
    ]
}

/// Where the internal Event's fields live in a stored object of each API version.
struct EventFields {
    first_timestamp: &'static str,
    last_timestamp: &'static str,
    count: &'static str,
    involved_object: &'static str,
    source: &'static str,
    reporting_controller: &'static str,
    message: &'static str,
}

const CORE_EVENT: EventFields = EventFields {
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    involved_object: "involvedObject",
    source: "source",
    reporting_controller: "reportingComponent",
    message: "message",
};

/// events.k8s.io/v1 names, per its conversion to the internal core Event.
const EVENTS_V1_EVENT: EventFields = EventFields {
    first_timestamp: "deprecatedFirstTimestamp",
    last_timestamp: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    involved_object: "regarding",
    source: "deprecatedSource",
    reporting_controller: "reportingController",
    message: "note",
};

fn print_event(ev: &Value, f: &EventFields, now: DateTime<Utc>) -> Row {
    let first_ts = at(ev, &[f.first_timestamp]);
    let first = match parse_time(first_ts) {
        Some(_) => translate_since(first_ts, now),
        None => translate_since(at(ev, &["eventTime"]), now),
    };
    let mut last = match parse_time(at(ev, &[f.last_timestamp])) {
        Some(_) => translate_since(at(ev, &[f.last_timestamp]), now),
        None => first.clone(),
    };
    let mut count = int_at(ev, &[f.count]);
    if let Some(series) = present(ev, &["series"]) {
        last = translate_since(at(series, &["lastObservedTime"]), now);
        count = int_at(series, &["count"]);
    } else if count == 0 {
        // Singleton events don't have a count set in the new API.
        count = 1;
    }
    let involved = |field: &str| str_at(ev, &[f.involved_object, field]);
    let kind = involved("kind").to_lowercase();
    let target = match involved("name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    // formatEventSource: reporting controller/instance stand in for an empty source.
    let first_non_empty = |a: &'static str, b: &'static str| match str_at(ev, &[f.source, a]) {
        "" => str_at(ev, &[b]),
        s => s,
    };
    let component = first_non_empty("component", f.reporting_controller);
    let source = match first_non_empty("host", "reportingInstance") {
        "" => component.to_string(),
        instance => format!("{component}, {instance}"),
    };
    let s = |v: &str| Cell::Str(v.to_string());
    Row {
        cells: vec![
            Cell::Str(last),
            s(str_at(ev, &["type"])),
            s(str_at(ev, &["reason"])),
            Cell::Str(target),
            s(involved("fieldPath")),
            Cell::Str(source),
            // strings.TrimSpace trims unicode.IsSpace, the White_Space property as str::trim.
            s(str_at(ev, &[f.message]).trim()),
            Cell::Str(first),
            Cell::Int(count),
            s(str_at(ev, &["metadata", "name"])),
        ],
        conditions: &[],
    }
}

/// `net.JoinHostPort`.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `formatEndpoints(endpoints, nil)`: at most 3 ready addresses, with ports.
fn format_endpoints(ep: &Value) -> String {
    const MAX: usize = 3;
    let subsets = arr_at(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for ss in subsets {
        let addresses = arr_at(ss, &["addresses"]);
        let ports = arr_at(ss, &["ports"]);
        // Headless services with no ports list bare IPs.
        let port_numbers: Vec<Option<i64>> = if ports.is_empty() {
            vec![None]
        } else {
            ports.iter().map(|p| Some(int_at(p, &["port"]))).collect()
        };
        for port in port_numbers {
            count += addresses.len();
            for addr in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = str_at(addr, &["ip"]);
                list.push(port.map_or_else(|| ip.to_string(), |p| join_host_port(ip, p)));
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", count.saturating_sub(MAX))
    } else {
        ret
    }
}

/// `listWithMoreString`.
fn list_with_more(list: &[String], more: bool, count: usize, max: usize) -> String {
    let ret = list.join(",");
    if more {
        return format!("{ret} + {} more...", count.saturating_sub(max));
    }
    if ret.is_empty() {
        "<unset>".to_string()
    } else {
        ret
    }
}

/// `formatDiscoveryPorts`: port number, else port name, else "*".
fn format_discovery_ports(ports: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    for port in ports {
        if list.len() < MAX {
            let label = match (present(port, &["port"]), present(port, &["name"])) {
                (Some(n), _) => n.as_i64().unwrap_or_default().to_string(),
                (None, Some(name)) => name.as_str().unwrap_or_default().to_string(),
                (None, None) => "*".to_string(),
            };
            list.push(label);
        } else if list.len() == MAX {
            more = true;
        }
    }
    list_with_more(&list, more, ports.len(), MAX)
}

/// `formatDiscoveryEndpoints`: the first 3 addresses over all endpoints.
fn format_discovery_endpoints(endpoints: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for address in endpoints.iter().flat_map(|e| arr_at(e, &["addresses"])) {
        if list.len() < MAX {
            list.push(address.as_str().unwrap_or_default().to_string());
        } else if list.len() == MAX {
            more = true;
        }
        count += 1;
    }
    list_with_more(&list, more, count, MAX)
}
