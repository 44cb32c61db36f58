//! `POST /apis/authentication.k8s.io/v1/tokenreviews` and
//! `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: the apiserver's own answers
//! (fixtures `tokenreview-*`, `sar-*`), with the decisions of the sim's policy.
//!
//! The response is the request echoed as the apiserver's typed decoding re-encodes it (fields
//! in struct order, empty ones omitted, unknown ones dropped), with `metadata.managedFields`
//! as the server-side field manager records a create (manager = the User-Agent up to its first
//! `/`), and `status` filled in. Only JSON request and response bodies are served.

use serde_json::{json, Map, Value};

use super::authorize::{Attributes, Objects};
use super::{Auth, UserInfo};
use crate::wire::gojson;
use crate::wire::status::{FieldError, Status};

/// Which review, and its result, for `kubeplex_sim_reviews_total`.
pub(crate) struct Outcome {
    pub kind: &'static str,
    pub result: &'static str,
    pub body: Vec<u8>,
}

fn decode(body: &[u8]) -> Result<Value, Status> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| Status::bad_request(format!("the object provided is unrecognized ({e})")))?;
    if !v.is_object() {
        return Err(Status::bad_request("the object provided is unrecognized"));
    }
    Ok(v)
}

fn string_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings_at(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Copies the string fields `keys` of `from` that are set, in that order (`omitempty`).
fn copy_strings(from: &Value, keys: &[&str]) -> Map<String, Value> {
    let mut m = Map::new();
    for k in keys {
        let s = string_at(from, k);
        if !s.is_empty() {
            m.insert((*k).to_string(), json!(s));
        }
    }
    m
}

/// `managedFields` of a create by `manager` of an object whose spec is `spec`: every set
/// field as `f:NAME`; optional structs and maps (pointer fields) also own themselves (`.`).
fn managed_fields(manager: &str, api_version: &str, spec: &Value, owned_self: &[&str]) -> Value {
    fn fields(v: &Value, owned_self: &[&str], with_dot: bool) -> Value {
        let mut m = Map::new();
        if with_dot {
            m.insert(".".into(), json!({}));
        }
        if let Some(obj) = v.as_object() {
            let mut keys: Vec<&String> = obj.keys().collect();
            keys.sort();
            for k in keys {
                let child = &obj[k];
                let entry = if child.is_object() {
                    fields(child, owned_self, owned_self.contains(&k.as_str()))
                } else {
                    json!({})
                };
                m.insert(format!("f:{k}"), entry);
            }
        }
        Value::Object(m)
    }
    let mut entry = Map::new();
    if !manager.is_empty() {
        entry.insert("manager".into(), json!(manager));
    }
    entry.insert("operation".into(), json!("Update"));
    entry.insert("apiVersion".into(), json!(api_version));
    entry.insert("time".into(), json!(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()));
    entry.insert("fieldsType".into(), json!("FieldsV1"));
    entry.insert("fieldsV1".into(), json!({"f:spec": fields(spec, owned_self, false)}));
    json!({"managedFields": [Value::Object(entry)]})
}

/// The field manager's name for a request without `fieldManager`: the User-Agent up to its
/// first `/`, at most 128 bytes (`prefixFromUserAgent`).
pub(crate) fn manager_of(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or("");
    let mut end = prefix.len().min(128);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    prefix[..end].to_string()
}

fn user_value(u: &UserInfo) -> Value {
    let mut m = Map::new();
    if !u.username.is_empty() {
        m.insert("username".into(), json!(u.username));
    }
    if !u.uid.is_empty() {
        m.insert("uid".into(), json!(u.uid));
    }
    if !u.groups.is_empty() {
        m.insert("groups".into(), json!(u.groups));
    }
    if !u.extra.is_empty() {
        // A Go map: keys sorted.
        let extra: Map<String, Value> =
            u.extra.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        m.insert("extra".into(), Value::Object(extra));
    }
    Value::Object(m)
}

/// A TokenReview: `status.authenticated` and `user` for a known token (with the audiences it
/// was checked for), `error: "invalid bearer token"` otherwise (fixtures `tokenreview-valid`,
/// `tokenreview-invalid`). `spec.audiences` defaults to the apiserver's; a token none of whose
/// audiences is asked for does not authenticate.
pub(crate) fn token_review(
    auth: Option<&Auth>,
    body: &[u8],
    manager: &str,
    objects: &dyn Objects,
) -> Result<Outcome, Status> {
    const API_VERSION: &str = "authentication.k8s.io/v1";
    let req = decode(body)?;
    let spec_in = req.get("spec").cloned().unwrap_or(json!({}));
    let token = string_at(&spec_in, "token");
    if token.is_empty() {
        return Err(Status::bad_request("token is required for TokenReview in authentication"));
    }
    let wanted = strings_at(&spec_in, "audiences");
    let mut spec = copy_strings(&spec_in, &["token"]);
    if !wanted.is_empty() {
        spec.insert("audiences".into(), json!(wanted));
    }
    let spec = Value::Object(spec);

    let found = auth.and_then(|a| {
        let t = a.tokens.get(token)?;
        // A bound token's pod and ServiceAccount must still be there.
        a.authenticate_token_in(token, objects)?;
        let asked = if wanted.is_empty() { a.audiences.clone() } else { wanted.clone() };
        let common: Vec<String> =
            t.audiences.iter().filter(|x| asked.contains(x)).cloned().collect();
        (!common.is_empty()).then(|| (super::with_authenticated(t.user.clone()), common))
    });
    let (status, result) = match found {
        Some((user, audiences)) => (
            json!({"authenticated": true, "user": user_value(&user), "audiences": audiences}),
            "authenticated",
        ),
        None => (json!({"user": {}, "error": "invalid bearer token"}), "unauthenticated"),
    };
    let out = json!({
        "kind": "TokenReview",
        "apiVersion": API_VERSION,
        "metadata": managed_fields(manager, API_VERSION, &spec, &[]),
        "spec": spec,
        "status": status,
    });
    Ok(Outcome { kind: "tokenreview", result, body: gojson::to_vec(&out) })
}

fn selector_value(v: &Value) -> Option<Value> {
    let raw = string_at(v, "rawSelector");
    let mut m = Map::new();
    if !raw.is_empty() {
        m.insert("rawSelector".into(), json!(raw));
    }
    if let Some(reqs) =
        v.get("requirements").filter(|r| r.as_array().is_some_and(|a| !a.is_empty()))
    {
        m.insert("requirements".into(), reqs.clone());
    }
    v.is_object().then_some(Value::Object(m))
}

/// A SubjectAccessReview: the policy's decision for the spec's user and attributes, with the
/// authorizers' reason (fixtures `sar-list-allowed`, `sar-list-denied`, `sar-watch-selectors`
/// with `fieldSelector`/`labelSelector.rawSelector`, `sar-node-pods` for the Node authorizer).
/// Without a policy every request is allowed, so every review is too.
pub(crate) fn subject_access_review(
    auth: Option<&Auth>,
    body: &[u8],
    manager: &str,
    objects: &dyn Objects,
) -> Result<Outcome, Status> {
    const API_VERSION: &str = "authorization.k8s.io/v1";
    let req = decode(body)?;
    let spec_in = req.get("spec").cloned().unwrap_or(json!({}));
    let ra = spec_in.get("resourceAttributes").filter(|v| v.is_object());
    let nra = spec_in.get("nonResourceAttributes").filter(|v| v.is_object());

    // Re-encode the spec in `SubjectAccessReviewSpec` field order.
    let mut spec = Map::new();
    if let Some(ra) = ra {
        let mut m = copy_strings(
            ra,
            &["namespace", "verb", "group", "version", "resource", "subresource", "name"],
        );
        for k in ["fieldSelector", "labelSelector"] {
            if let Some(s) = ra.get(k).and_then(selector_value) {
                m.insert(k.into(), s);
            }
        }
        spec.insert("resourceAttributes".into(), Value::Object(m));
    }
    if let Some(nra) = nra {
        spec.insert(
            "nonResourceAttributes".into(),
            Value::Object(copy_strings(nra, &["path", "verb"])),
        );
    }
    let user = UserInfo {
        username: string_at(&spec_in, "user").to_string(),
        uid: string_at(&spec_in, "uid").to_string(),
        groups: strings_at(&spec_in, "groups"),
        extra: spec_in
            .get("extra")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        let vals = v.as_array().into_iter().flatten();
                        (k.clone(), vals.filter_map(Value::as_str).map(str::to_string).collect())
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    if !user.username.is_empty() {
        spec.insert("user".into(), json!(user.username));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        let extra: Map<String, Value> =
            user.extra.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        spec.insert("extra".into(), Value::Object(extra));
    }
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }

    // `ValidateSubjectAccessReviewSpec`.
    let mut errors = Vec::new();
    if ra.is_some() == nra.is_some() {
        let detail = if ra.is_some() {
            "cannot be specified in combination with resourceAttributes"
        } else {
            "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        };
        errors.push(FieldError::invalid(
            if ra.is_some() { "spec.nonResourceAttributes" } else { "spec.resourceAttributes" },
            "null",
            detail,
        ));
    }
    if user.username.is_empty() && user.groups.is_empty() {
        errors.push(FieldError::invalid(
            "spec.user",
            "",
            "at least one of user or group must be specified",
        ));
    }
    if !errors.is_empty() {
        return Err(Status::invalid("authorization.k8s.io", "SubjectAccessReview", "", errors));
    }

    let attrs = match (ra, nra) {
        (Some(ra), _) => Attributes {
            user,
            verb: string_at(ra, "verb").into(),
            resource_request: true,
            namespace: string_at(ra, "namespace").into(),
            group: string_at(ra, "group").into(),
            version: string_at(ra, "version").into(),
            resource: string_at(ra, "resource").into(),
            subresource: string_at(ra, "subresource").into(),
            name: string_at(ra, "name").into(),
            field_selector: ra
                .get("fieldSelector")
                .map_or("", |f| string_at(f, "rawSelector"))
                .into(),
            label_selector: ra
                .get("labelSelector")
                .map_or("", |f| string_at(f, "rawSelector"))
                .into(),
            path: String::new(),
        },
        (None, Some(nra)) => Attributes {
            user,
            verb: string_at(nra, "verb").into(),
            resource_request: false,
            path: string_at(nra, "path").into(),
            ..Default::default()
        },
        (None, None) => return Err(Status::internal("no attributes")),
    };
    let decision = match auth {
        Some(a) => a.authorize(&attrs, objects),
        None => super::Decision { allowed: true, denied: false, reason: String::new() },
    };
    let mut status = Map::new();
    status.insert("allowed".into(), json!(decision.allowed));
    if decision.denied {
        status.insert("denied".into(), json!(true));
    }
    if !decision.reason.is_empty() {
        status.insert("reason".into(), json!(decision.reason));
    }
    let spec = Value::Object(spec);
    let owned_self =
        ["resourceAttributes", "nonResourceAttributes", "fieldSelector", "labelSelector", "extra"];
    let out = json!({
        "kind": "SubjectAccessReview",
        "apiVersion": API_VERSION,
        "metadata": managed_fields(manager, API_VERSION, &spec, &owned_self),
        "spec": spec,
        "status": Value::Object(status),
    });
    let result = if decision.allowed { "allowed" } else { "denied" };
    Ok(Outcome { kind: "subjectaccessreview", result, body: gojson::to_vec(&out) })
}
