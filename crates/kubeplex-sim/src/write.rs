//! Create, update, patch and delete, with the apiserver's preconditions, server-set metadata
//! and Status errors.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

use super::encode;
use super::filter::Filter;
use super::kinds::Kind;
use super::object;
use super::repr::Repr;
use super::respond::{self, Body, JSON};
use super::server::{SimState, Target};
use super::store::{object_key, Obj};
use super::workloads;
use crate::wire::request::ListOptions;
use crate::wire::status::{FieldError, Status};

/// The apiserver refuses request bodies over 3 MiB (`MaxRequestBodyBytes`).
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

async fn read_body(req: Request<Incoming>) -> Result<(http::HeaderMap, Bytes), Status> {
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY_BYTES);
    let bytes = limited
        .collect()
        .await
        .map_err(|_| {
            Status::new(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
        })?
        .to_bytes();
    Ok((parts.headers, bytes))
}

fn decode_object(headers: &http::HeaderMap, body: &[u8]) -> Result<Value, Status> {
    let ct = respond::request_content_type(headers);
    match ct.as_str() {
        "" | "application/json" | "application/merge-patch+json" => {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                Status::bad_request(format!("the object provided is unrecognized ({e})"))
            })?;
            if !v.is_object() {
                return Err(Status::bad_request("the object provided is unrecognized"));
            }
            Ok(v)
        }
        // client-go sends built-in objects as protobuf when it was configured for it
        // (`kubectl create configmap` does).
        "application/vnd.kubernetes.protobuf" => super::codec::decode_protobuf_object(body),
        other => Err(Status::unsupported_media_type(other)),
    }
}

/// `fieldValidation`: Strict refuses unknown fields with 400, Warn (the default) answers with
/// a `Warning` header per field, Ignore drops them silently.
fn field_validation(kind: &Kind, query: Option<&str>, v: &Value) -> Result<Vec<String>, Status> {
    let mode = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "fieldValidation")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| "Warn".into());
    let unknown = super::codec::unknown_fields(kind, v);
    match mode.as_str() {
        "Strict" if !unknown.is_empty() => Err(Status::bad_request(format!(
            "strict decoding error: {}",
            unknown.iter().map(|f| format!("unknown field {f:?}")).collect::<Vec<_>>().join(", ")
        ))),
        "Ignore" | "Strict" => Ok(Vec::new()),
        "Warn" => Ok(unknown.iter().map(|f| format!("unknown field {f:?}")).collect()),
        other => Err(Status::bad_request(format!(
            "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
        ))),
    }
}

fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let value = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(h) = http::HeaderValue::from_str(&value) {
            resp.headers_mut().append("Warning", h);
        }
    }
    resp
}

fn dry_run(req_query: Option<&str>) -> bool {
    form_urlencoded::parse(req_query.unwrap_or("").as_bytes())
        .any(|(k, v)| k == "dryRun" && v == "All")
}

fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    // Just ensured above that metadata is an object.
    v["metadata"].as_object_mut().expect("metadata is an object")
}

fn meta_str<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get("metadata")?.get(field)?.as_str()
}

/// Checks TypeMeta against the endpoint, filling it when the client left it out.
fn check_type(kind: &Kind, v: &mut Value) -> Result<(), Status> {
    let av = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let k = v.get("kind").and_then(Value::as_str).unwrap_or("");
    if (!av.is_empty() && av != kind.api_version) || (!k.is_empty() && k != kind.kind) {
        return Err(Status::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            kind.api_version
        )));
    }
    v["kind"] = Value::String(kind.kind.clone());
    v["apiVersion"] = Value::String(kind.api_version.clone());
    Ok(())
}

/// Letters the apiserver's name generator uses (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generate_name(prefix: &str) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let suffix: String =
        (0..5).map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char).collect();
    format!("{prefix}{suffix}")
}

/// Fills what the apiserver sets on create (uid, creationTimestamp, generation, defaults).
pub fn prepare_create(
    kind: &Kind,
    v: &mut Value,
    namespace: Option<&str>,
) -> Result<String, Status> {
    check_type(kind, v)?;
    let name = match (meta_str(v, "name"), meta_str(v, "generateName")) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(g)) if !g.is_empty() => generate_name(g),
        _ => {
            return Err(Status::invalid(
                &kind.group,
                &kind.kind,
                "",
                vec![FieldError::required("metadata.name", "name or generateName is required")],
            ))
        }
    };
    let body_ns = meta_str(v, "namespace").unwrap_or("").to_string();
    let ns = match (kind.namespaced, namespace) {
        (true, Some(ns)) => {
            if !body_ns.is_empty() && body_ns != ns {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            ns.to_string()
        }
        (true, None) => return Err(Status::path_not_found()),
        (false, _) => String::new(),
    };
    let generation = kind.generation;
    let m = meta_mut(v);
    m.insert("name".into(), json!(name));
    if ns.is_empty() {
        m.shift_remove("namespace");
    } else {
        m.insert("namespace".into(), json!(ns));
    }
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now_rfc3339()));
    for k in ["selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"] {
        m.shift_remove(k);
    }
    if generation {
        m.insert("generation".into(), json!(1));
    } else {
        m.shift_remove("generation");
    }
    apply_defaults(kind, v, &name);
    workloads::apply_defaults(kind, v);
    Ok(name)
}

/// The few registry defaults clients notice on create.
fn apply_defaults(kind: &Kind, v: &mut Value, name: &str) {
    match (kind.group.as_str(), kind.resource.as_str()) {
        ("", "namespaces") => {
            // The apiserver labels every namespace with its own name and starts it Active.
            let m = meta_mut(v);
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
            if v.get("spec").is_none() {
                v["spec"] = json!({"finalizers": ["kubernetes"]});
            }
            v["status"] = json!({"phase": "Active"});
        }
        // A new pod is Pending until a kubelet says otherwise.
        ("", "pods") if v.get("status").and_then(|s| s.get("phase")).is_none() => {
            let status = v.get("status").cloned().filter(Value::is_object).unwrap_or(json!({}));
            let mut s = status.as_object().cloned().unwrap_or_default();
            s.insert("phase".into(), json!("Pending"));
            v["status"] = Value::Object(s);
        }
        _ => {}
    }
}

/// Stores a new object (used by HTTP creates and by the `Sim` handle).
pub fn store_create(
    state: &SimState,
    kind: &Kind,
    mut v: Value,
    namespace: Option<&str>,
    dry: bool,
) -> Result<Arc<Obj>, Status> {
    let name = prepare_create(kind, &mut v, namespace)?;
    let ns = meta_str(&v, "namespace").unwrap_or("").to_string();
    if kind.namespaced {
        let ns_kind = state.registry.get("", "namespaces").cloned();
        if let Some(nk) = ns_kind {
            if state.store.get(&nk, "", &ns).is_none() {
                return Err(Status::not_found("", "namespaces", &ns));
            }
        }
    }
    let key = object_key(&ns, &name);
    if dry {
        meta_mut(&mut v).insert("resourceVersion".into(), json!(""));
        return object::build(kind, v).map(Arc::new);
    }
    let event = state.store.write(kind, &key, |prev, rv| {
        if prev.is_some() {
            return Err(Status::already_exists(&kind.group, &kind.resource, &name));
        }
        meta_mut(&mut v).insert("resourceVersion".into(), json!(rv.to_string()));
        object::build(kind, v).map(Some)
    })?;
    event.map(|e| e.obj.clone()).ok_or_else(|| Status::internal("create stored nothing"))
}

pub async fn create(
    state: &Arc<SimState>,
    t: &Target,
    repr: Repr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let dry = dry_run(req.uri().query());
    let query = req.uri().query().map(str::to_string);
    let (headers, body) = read_body(req).await?;
    let mut v = decode_object(&headers, &body)?;
    let warnings = field_validation(&t.kind, query.as_deref(), &v)?;
    // Only a client's create drops a workload's status; the `Sim` handle seeds objects as a
    // controller would have left them.
    workloads::clear_status_on_create(&t.kind, &mut v);
    let obj = store_create(state, &t.kind, v, t.namespace.as_deref(), dry)?;
    Ok(with_warnings(object_reply(&t.kind, &obj, repr, 201, &headers)?, &warnings))
}

fn object_reply(
    kind: &Kind,
    obj: &Obj,
    repr: Repr,
    code: u16,
    headers: &http::HeaderMap,
) -> Result<Response<Body>, Status> {
    let mut resp = encode::object_response(kind, obj, repr, &ListOptions::default(), headers)?;
    *resp.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK);
    Ok(resp)
}

/// Builds the new state of an existing object from the client's desired state `v`, as an
/// update does: identity and server-owned metadata are kept, a stale resourceVersion
/// precondition is a 409, and the status/main split of subresources is respected.
fn updated(
    kind: &Kind,
    prev: &Obj,
    mut v: Value,
    subresource: Option<&str>,
    rv: u64,
) -> Result<Obj, Status> {
    check_type(kind, &mut v)?;
    if let Some(want) = meta_str(&v, "resourceVersion").filter(|s| !s.is_empty()) {
        if want != prev.rv.to_string() {
            return Err(Status::conflict(&kind.group, &kind.resource, &prev.name));
        }
    }
    let has_status = kind.subresources.iter().any(|s| s == "status");
    let mut next = match subresource {
        // An update through /status changes only status.
        Some("status") => {
            let mut base = prev.value.clone();
            base["status"] = v.get("status").cloned().unwrap_or(Value::Null);
            base
        }
        // The sim's own handle changes everything at once.
        Some("*") => v,
        _ => {
            if has_status {
                match prev.value.get("status") {
                    Some(s) => v["status"] = s.clone(),
                    None => {
                        if let Some(o) = v.as_object_mut() {
                            o.shift_remove("status");
                        }
                    }
                }
            }
            v
        }
    };
    workloads::apply_defaults(kind, &mut next);
    let prev_meta = prev.value.get("metadata").cloned().unwrap_or(json!({}));
    let spec_changed = workloads::bumps_generation(kind, &prev.value, &next);
    let m = meta_mut(&mut next);
    for k in ["name", "namespace", "uid", "creationTimestamp", "generation", "deletionTimestamp"] {
        match prev_meta.get(k) {
            Some(val) => {
                m.insert(k.into(), val.clone());
            }
            None => {
                m.shift_remove(k);
            }
        }
    }
    if kind.generation && spec_changed {
        let g = prev_meta.get("generation").and_then(Value::as_i64).unwrap_or(0) + 1;
        m.insert("generation".into(), json!(g));
    }
    m.insert("resourceVersion".into(), json!(rv.to_string()));
    object::build(kind, next)
}

/// An update made through the `Sim` handle: like a PUT, but status changes too.
pub fn updated_for_sim(kind: &Kind, prev: &Obj, v: Value, rv: u64) -> Result<Obj, Status> {
    updated(kind, prev, v, Some("*"), rv)
}

fn name_of(t: &Target) -> Result<&str, Status> {
    t.name.as_deref().ok_or_else(Status::path_not_found)
}

pub async fn update(
    state: &Arc<SimState>,
    t: &Target,
    repr: Repr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let name = name_of(t)?.to_string();
    let query = req.uri().query().map(str::to_string);
    let (headers, body) = read_body(req).await?;
    let v = decode_object(&headers, &body)?;
    let warnings = field_validation(&t.kind, query.as_deref(), &v)?;
    if let Some(body_name) = meta_str(&v, "name").filter(|n| *n != name) {
        return Err(Status::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let kind = &t.kind;
    let key = object_key(t.namespace.as_deref().unwrap_or(""), &name);
    let sub = t.subresource.as_deref();
    let event = state.store.write(kind, &key, |prev, rv| match prev {
        None => Err(Status::not_found(&kind.group, &kind.resource, &name)),
        Some(prev) => updated(kind, prev, v, sub, rv).map(Some),
    })?;
    let obj =
        event.map(|e| e.obj.clone()).ok_or_else(|| Status::internal("update stored nothing"))?;
    Ok(with_warnings(object_reply(kind, &obj, repr, 200, &headers)?, &warnings))
}

pub async fn patch(
    state: &Arc<SimState>,
    t: &Target,
    repr: Repr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let name = name_of(t)?.to_string();
    let (headers, body) = read_body(req).await?;
    let ct = respond::request_content_type(&headers);
    let kind = &t.kind;
    let key = object_key(t.namespace.as_deref().unwrap_or(""), &name);
    let sub = t.subresource.as_deref();
    // The patch is applied under the store lock so that concurrent writers cannot interleave.
    let event = state.store.write(kind, &key, |prev, rv| match prev {
        None => Err(Status::not_found(&kind.group, &kind.resource, &name)),
        Some(prev) => {
            let patched = super::patch::request::apply(kind, &prev.value, &ct, &body)?;
            updated(kind, prev, patched, sub, rv).map(Some)
        }
    })?;
    let obj =
        event.map(|e| e.obj.clone()).ok_or_else(|| Status::internal("patch stored nothing"))?;
    object_reply(kind, &obj, repr, 200, &headers)
}

/// Resources whose DELETE answers with the deleted object rather than a Success Status
/// (`ReturnDeletedObject` in their registry).
fn returns_deleted_object(kind: &Kind) -> bool {
    kind.custom || matches!(kind.resource.as_str(), "pods" | "services" | "namespaces")
}

/// Deletes one object; a namespace takes its contents with it (the sim's namespace controller
/// finishes at once).
pub fn store_delete(
    state: &SimState,
    kind: &Kind,
    namespace: &str,
    name: &str,
    precondition_rv: Option<&str>,
) -> Result<Arc<Obj>, Status> {
    if kind.group.is_empty() && kind.resource == "namespaces" {
        for k in state.registry.all().filter(|k| k.namespaced) {
            if let Ok((_, items)) = state.store.snapshot(k, None) {
                for o in items.values().filter(|o| o.namespace == name) {
                    let _ = state.store.write(k, &o.key, |_, _| Ok::<_, Status>(None));
                }
            }
        }
    }
    let key = object_key(namespace, name);
    let event = state.store.write(kind, &key, |prev, _rv| match prev {
        None => Err(Status::not_found(&kind.group, &kind.resource, name)),
        Some(prev) => {
            if let Some(want) = precondition_rv.filter(|rv| *rv != prev.rv.to_string()) {
                let mut s = Status::conflict(&kind.group, &kind.resource, name);
                s.message = format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    if kind.group.is_empty() { kind.resource.clone() } else { format!("{}.{}", kind.resource, kind.group) },
                    prev.rv
                );
                return Err(s);
            }
            Ok(None)
        }
    })?;
    event.map(|e| e.obj.clone()).ok_or_else(|| Status::not_found(&kind.group, &kind.resource, name))
}

pub async fn delete(
    state: &Arc<SimState>,
    t: &Target,
    repr: Repr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let name = name_of(t)?.to_string();
    let (headers, body) = read_body(req).await?;
    let opts: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(&body).unwrap_or(json!({}))
    };
    let precondition_rv =
        opts.get("preconditions").and_then(|p| p.get("resourceVersion")).and_then(Value::as_str);
    let kind = &t.kind;
    let obj =
        store_delete(state, kind, t.namespace.as_deref().unwrap_or(""), &name, precondition_rv)?;
    if returns_deleted_object(kind) {
        return object_reply(kind, &obj, repr, 200, &headers);
    }
    let uid = meta_str(&obj.value, "uid").unwrap_or("");
    let mut details = Map::new();
    details.insert("name".into(), json!(name));
    if !kind.group.is_empty() {
        details.insert("group".into(), json!(kind.group));
    }
    details.insert("kind".into(), json!(kind.resource));
    details.insert("uid".into(), json!(uid));
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details});
    Ok(respond::body(200, JSON, serde_json::to_vec(&status).unwrap_or_default(), &headers))
}

pub async fn delete_collection(
    state: &Arc<SimState>,
    t: &Target,
    opts: &ListOptions,
    repr: Repr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let kind = &t.kind;
    let filter = Filter::new(kind, opts, t.namespace.as_deref())?;
    let (_, items) =
        state.store.snapshot(kind, None).map_err(|_| Status::internal("no snapshot"))?;
    let mut deleted = Vec::new();
    for o in items.values().filter(|o| filter.matches(kind, o)) {
        if let Ok(d) = store_delete(state, kind, &o.namespace, &o.name, None) {
            deleted.push(d);
        }
    }
    let meta = encode::ListMeta {
        resource_version: state.store.current_rv().to_string(),
        ..Default::default()
    };
    encode::list_response(kind, &deleted, &meta, repr, opts, req.headers())
}
