//! Kubernetes `Status` objects: the one place where a failure becomes what a client sees.
//!
//! Every error a client receives — from the fake apiserver or, later, from the proxy — is built
//! here, with the apiserver's HTTP code, `reason`, message wording and `details`, so that client
//! libraries (which branch on `reason` and `code`) behave exactly as against kube-apiserver.

use serde_json::{json, Map, Value};

/// One entry of `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    /// Omitted from the JSON when empty, like Go's `omitempty`.
    pub field: String,
}

/// `details` of a Status (`metav1.StatusDetails`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    pub name: String,
    pub group: String,
    /// The apiserver puts the resource (plural) here for NotFound/Conflict/AlreadyExists.
    pub kind: String,
    pub causes: Vec<Cause>,
    pub retry_after_seconds: Option<u32>,
}

/// A request an authorizer refused, as a 403 names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refused<'a> {
    pub user: &'a str,
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// The path of a request that is not a resource's (discovery, `/version`); `None` for a
    /// resource request.
    pub path: Option<&'a str>,
}

/// Go's status text (`net/http.StatusText`, what kube-apiserver's status lines say) where it
/// differs from the `http` crate's canonical reason (which hyper writes).
pub fn go_reason_phrase(code: u16) -> Option<&'static str> {
    match code {
        413 => Some("Request Entity Too Large"),
        414 => Some("Request URI Too Long"),
        416 => Some("Requested Range Not Satisfiable"),
        _ => None,
    }
}

/// A failure `Status` (`status: "Failure"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u16,
    /// `StatusReason`; empty for a 500 with no reason.
    pub reason: String,
    pub message: String,
    pub details: Option<Box<Details>>,
    /// `metadata.continue` on a 410 for an expired continue token.
    pub continue_token: Option<String>,
}

impl Status {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    fn with_details(mut self, details: Details) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// With `details` naming the object as `apierrors.NewForbidden` and its kin do
    /// (`{"name": NAME, "kind": RESOURCE}`).
    pub fn with_name_and_kind(self, name: &str, resource: &str) -> Self {
        self.with_details(Details {
            name: name.into(),
            kind: resource.into(),
            ..Details::default()
        })
    }

    /// 400 BadRequest: malformed selectors, continue tokens, query values, bodies.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::new(400, "BadRequest", message)
    }

    /// 404 NotFound for `resource` (plural) `name`, e.g. `configmaps "nope" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Status::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(group, resource)))
            .with_details(Details {
                name: name.to_string(),
                group: group.to_string(),
                kind: resource.to_string(),
                ..Details::default()
            })
    }

    /// 404 for a path the server does not serve at all (no details, like the apiserver's mux).
    pub fn path_not_found() -> Self {
        Status::new(404, "NotFound", "the server could not find the requested resource")
            .with_details(Details::default())
    }

    /// 409 AlreadyExists on create.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Status::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: resource.to_string(),
            ..Details::default()
        })
    }

    /// 409 Conflict on an update with a stale resourceVersion (fixture `err-conflict`).
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        Status::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
        )
        .with_details(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: resource.to_string(),
            ..Details::default()
        })
    }

    /// 422 Invalid with field causes, e.g. for ListOptions (fixture `err-rvmatch-exact-unset`).
    ///
    /// The message is `<Kind>.<group> "<name>" is invalid: <errors>`, where one error is written
    /// bare and several as `[e1, e2]` (apimachinery's `field.ErrorList.ToAggregate`).
    pub fn invalid(group: &str, kind: &str, name: &str, errors: Vec<FieldError>) -> Self {
        let qualified_kind =
            if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let joined = match errors.as_slice() {
            [one] => one.to_string(),
            many => {
                format!("[{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
            }
        };
        let causes = errors
            .iter()
            .map(|e| Cause {
                reason: e.kind.cause_reason().to_string(),
                message: e.detail_message(),
                field: e.field.clone(),
            })
            .collect();
        Status::new(422, "Invalid", format!("{qualified_kind} \"{name}\" is invalid: {joined}"))
            .with_details(Details {
                name: name.to_string(),
                group: group.to_string(),
                kind: kind.to_string(),
                causes,
                retry_after_seconds: None,
            })
    }

    /// 410 Expired, e.g. `too old resource version: 5 (100)`.
    pub fn expired(message: impl Into<String>) -> Self {
        Status::new(410, "Expired", message)
    }

    /// 504 for a "not older than N" read the server could not reach within its wait
    /// (fixture `err-too-large-rv`).
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        Status::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(Details {
            causes: vec![Cause {
                reason: "ResourceVersionTooLarge".into(),
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: Some(1),
            ..Details::default()
        })
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_supported(group: &str, resource: &str, action: &str) -> Self {
        Status::new(
            405,
            "MethodNotAllowed",
            format!(
                "{action} is not supported on resources of kind {:?}",
                qualified(group, resource)
            ),
        )
        .with_details(Details {
            group: group.to_string(),
            kind: resource.to_string(),
            ..Details::default()
        })
    }

    /// 406 when no acceptable representation exists.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Status::new(406, "NotAcceptable", message)
    }

    /// 415 for a request body type the endpoint cannot decode.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Status::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got {content_type:?}"),
        )
    }

    /// 500 for a failure inside the server.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Status::new(500, "InternalError", format!("Internal error occurred: {message}"))
            .with_details(Details {
                causes: vec![Cause {
                    reason: String::new(),
                    message: message.to_string(),
                    field: String::new(),
                }],
                ..Details::default()
            })
    }

    /// 401 for credentials that do not authenticate (fixture `err-unauthorized`).
    pub fn unauthorized() -> Self {
        Status::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 as the apiserver's authorization filter writes it (`responsewriters.Forbidden`):
    /// `apierrors.NewForbidden` around `forbiddenMessage`, with the authorizers' reason after a
    /// colon when there is one, HTML-escaped — `configmaps is forbidden: User "U" cannot list
    /// resource "configmaps" in API group "" in the namespace "NS"` (fixture
    /// `err-forbidden-list`), `... at the cluster scope` (`err-forbidden-watch`),
    /// `pods "x" is forbidden: ...` for a named object (`err-forbidden-get-protobuf`), and
    /// `forbidden: User "U" cannot get path "/p"` for a request that is not a resource's.
    pub fn forbidden_request(refused: &Refused<'_>, reason: &str) -> Self {
        use crate::gojson::quote;
        let user = quote(refused.user);
        let message = match refused.path {
            Some(path) => format!("User {user} cannot {} path {}", refused.verb, quote(path)),
            None => {
                let resource = if refused.subresource.is_empty() {
                    refused.resource.to_string()
                } else {
                    format!("{}/{}", refused.resource, refused.subresource)
                };
                let scope = if refused.namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace {}", quote(refused.namespace))
                };
                format!(
                    "User {user} cannot {} resource {} in API group {} {scope}",
                    refused.verb,
                    quote(&resource),
                    quote(refused.group)
                )
            }
        };
        // The response writer's sanitizer.
        let message = message.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        let err = if reason.is_empty() { message } else { format!("{message}: {reason}") };
        let qualified = match (refused.path, refused.group.is_empty()) {
            (Some(_), _) => String::new(),
            (None, true) => refused.resource.to_string(),
            (None, false) => format!("{}.{}", refused.resource, refused.group),
        };
        let full = if qualified.is_empty() {
            format!("forbidden: {err}")
        } else if refused.name.is_empty() {
            format!("{qualified} is forbidden: {err}")
        } else {
            format!("{qualified} {} is forbidden: {err}", quote(refused.name))
        };
        let resource_request = refused.path.is_none();
        Status::new(403, "Forbidden", full).with_details(Details {
            name: refused.name.to_string(),
            group: if resource_request { refused.group.to_string() } else { String::new() },
            kind: if resource_request { refused.resource.to_string() } else { String::new() },
            ..Details::default()
        })
    }

    /// 503 while the server is not ready or is shutting down.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Status::new(503, "ServiceUnavailable", message)
    }

    /// 429 with `Retry-After`, as priority-and-fairness rejects a request.
    pub fn too_many_requests(retry_after_seconds: u32) -> Self {
        Status::too_many_requests_because(
            "Too many requests, please try again later.",
            retry_after_seconds,
        )
    }

    /// 429 TooManyRequests with the apiserver's own message (`errors.NewTooManyRequests`), as
    /// its watch cache answers while it is (re)initializing: `storage is (re)initializing`.
    pub fn too_many_requests_because(message: &str, retry_after_seconds: u32) -> Self {
        Status::new(429, "TooManyRequests", message).with_details(Details {
            retry_after_seconds: Some(retry_after_seconds),
            ..Details::default()
        })
    }

    /// The Status as a JSON value, fields in the apiserver's order.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("kind".into(), json!("Status"));
        obj.insert("apiVersion".into(), json!("v1"));
        let mut meta = Map::new();
        if let Some(c) = &self.continue_token {
            meta.insert("continue".into(), json!(c));
        }
        obj.insert("metadata".into(), Value::Object(meta));
        obj.insert("status".into(), json!("Failure"));
        if !self.message.is_empty() {
            obj.insert("message".into(), json!(self.message));
        }
        if !self.reason.is_empty() {
            obj.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            obj.insert("details".into(), details_value(d));
        }
        obj.insert("code".into(), json!(self.code));
        Value::Object(obj)
    }

    /// The Status as JSON bytes, byte-identical to the apiserver's.
    pub fn to_json(&self) -> Vec<u8> {
        crate::gojson::to_vec(&self.to_value())
    }

    /// `Retry-After` header value, when the apiserver sends one.
    /// The Status as a protobuf body (`k8s\0` envelope), for protobuf clients.
    pub fn to_protobuf(&self) -> Vec<u8> {
        use super::proto;
        let causes: Vec<proto::StatusCause<'_>> = self
            .details
            .iter()
            .flat_map(|d| d.causes.iter())
            .map(|c| proto::StatusCause { reason: &c.reason, message: &c.message, field: &c.field })
            .collect();
        let details = self.details.as_ref().map(|d| proto::StatusDetails {
            name: &d.name,
            group: &d.group,
            kind: &d.kind,
            uid: "",
            causes: &causes,
            retry_after_seconds: d.retry_after_seconds.map_or(0, |r| r as i32),
        });
        proto::encode_status(&proto::StatusRef {
            status: "Failure",
            message: &self.message,
            reason: &self.reason,
            code: i32::from(self.code),
            details,
            continue_token: self.continue_token.as_deref().unwrap_or(""),
        })
    }

    pub fn retry_after(&self) -> Option<u32> {
        self.details.as_ref().and_then(|d| d.retry_after_seconds)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for Status {}

fn details_value(d: &Details) -> Value {
    let mut m = Map::new();
    if !d.name.is_empty() {
        m.insert("name".into(), json!(d.name));
    }
    if !d.group.is_empty() {
        m.insert("group".into(), json!(d.group));
    }
    if !d.kind.is_empty() {
        m.insert("kind".into(), json!(d.kind));
    }
    if !d.causes.is_empty() {
        let causes = d
            .causes
            .iter()
            .map(|c| {
                let mut cm = Map::new();
                if !c.reason.is_empty() {
                    cm.insert("reason".into(), json!(c.reason));
                }
                if !c.message.is_empty() {
                    cm.insert("message".into(), json!(c.message));
                }
                if !c.field.is_empty() {
                    cm.insert("field".into(), json!(c.field));
                }
                Value::Object(cm)
            })
            .collect();
        m.insert("causes".into(), Value::Array(causes));
    }
    if let Some(s) = d.retry_after_seconds {
        m.insert("retryAfterSeconds".into(), json!(s));
    }
    Value::Object(m)
}

/// `resource.group`, or just `resource` for the core group, as apiserver messages name things.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// The kinds of `field.Error` the apiserver's validation produces that kubeplex needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    Forbidden,
    /// `Unsupported value`, with the supported values listed.
    NotSupported {
        value: String,
        supported: Vec<String>,
    },
    Invalid {
        value: String,
    },
    Required,
}

impl FieldErrorKind {
    fn cause_reason(&self) -> &'static str {
        match self {
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::NotSupported { .. } => "FieldValueNotSupported",
            FieldErrorKind::Invalid { .. } => "FieldValueInvalid",
            FieldErrorKind::Required => "FieldValueRequired",
        }
    }
}

/// One validation error on a field, as apimachinery's `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub kind: FieldErrorKind,
    pub detail: String,
}

impl FieldError {
    pub fn forbidden(field: &str, detail: &str) -> Self {
        FieldError { field: field.into(), kind: FieldErrorKind::Forbidden, detail: detail.into() }
    }

    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::NotSupported {
                value: value.into(),
                supported: supported.iter().map(|s| s.to_string()).collect(),
            },
            detail: String::new(),
        }
    }

    pub fn invalid(field: &str, value: &str, detail: &str) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Invalid { value: value.into() },
            detail: detail.into(),
        }
    }

    pub fn required(field: &str, detail: &str) -> Self {
        FieldError { field: field.into(), kind: FieldErrorKind::Required, detail: detail.into() }
    }

    /// `field.Error.ErrorBody()`: the message without the field path (used in `causes`).
    fn detail_message(&self) -> String {
        match &self.kind {
            FieldErrorKind::Forbidden => join_detail("Forbidden", &self.detail),
            FieldErrorKind::Required => join_detail("Required value", &self.detail),
            FieldErrorKind::Invalid { value } => {
                join_detail(&format!("Invalid value: {value:?}"), &self.detail)
            }
            FieldErrorKind::NotSupported { value, supported } => {
                let list =
                    supported.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
                format!("Unsupported value: {value:?}: supported values: {list}")
            }
        }
    }
}

fn join_detail(head: &str, detail: &str) -> String {
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {detail}")
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.detail_message())
    }
}

#[cfg(test)]
mod tests;
