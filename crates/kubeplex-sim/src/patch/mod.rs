//! The PATCH request bodies kubectl and clients send, applied to stored objects the way
//! kube-apiserver 1.36 applies them, with the status codes and messages it answers with.
//!
//! | `Content-Type`                            | [`PatchType`]      | semantics (module)              |
//! |-------------------------------------------|--------------------|---------------------------------|
//! | `application/json-patch+json`             | `Json`             | RFC 6902 (`json.rs`)            |
//! | `application/merge-patch+json`            | `Merge`            | RFC 7386 (`merge.rs`)           |
//! | `application/strategic-merge-patch+json`  | `StrategicMerge`   | Kubernetes (`strategic/`)       |
//! | `application/apply-patch+yaml`            | `Apply`            | not served: 415                 |
//!
//! The apiserver does not implement RFC 6902 and 7386 itself: it uses
//! `gopkg.in/evanphx/json-patch.v4`, whose quirks are reproduced (negative array indices,
//! `replace` of a missing object key adds it, nulls pruned inside arrays of a merge patch...),
//! and `k8s.io/apimachinery/pkg/util/strategicpatch` for strategic merge patches.
//!
//! # Where the sim differs from the apiserver
//!
//! - **Typed decoding is not modelled.** The apiserver decodes the patched JSON into the Go
//!   type, which drops unknown fields, turns `null` into zero values, rejects wrong types
//!   (422, field `patch`), applies defaults, and re-encodes in Go field order. Here the result
//!   is the patched JSON value: new keys are appended after existing ones, unknown fields and
//!   explicit nulls written by a JSON patch stay. The one exception: strategic merge patch
//!   directive keys (`$patch`, `$retainKeys`, `$setElementOrder/…`,
//!   `$deleteFromPrimitiveList/…`) that the algorithm leaves in its result are removed, as
//!   no Go field could hold them.
//! - **`fieldValidation`** (`Strict`/`Warn`: duplicate and unknown fields) is not checked.
//! - **Server-side apply** (`application/apply-patch+yaml`) is out of scope: it is answered
//!   415 with the list of the types the sim accepts, as a server without apply would.
//! - **Strategic merge metadata** comes from a table generated from the Go struct tags of the
//!   kinds the sim serves (`schema/`). A field unknown to that table is merged as a
//!   plain map or replaced as a plain list, where the apiserver would fail with "unable to find
//!   api field" (it cannot meet such a field: typed objects have none).
//! - **Map iteration order.** Go visits a patch's keys in random order; here they are visited
//!   in document order. Results only differ for patches mixing errors, or a
//!   `$deleteFromPrimitiveList` with the list it deletes from.
//! - **Raw JSON comparison.** evanphx compares numbers and strings of a `test` operation by
//!   their compacted bytes (`1.0` ≠ `1.00`, `"\u0041"` ≠ `"A"`); here decoded values are
//!   compared, so only integer-versus-float differences are kept.
//! - **Depth.** Bodies nested deeper than 256 levels are refused (400, Go's "exceeded max
//!   depth" message); Go allows 10000.
//! - **Go slice aliasing.** Strategic merge writes into the live list's backing array, and
//!   `$setElementOrder` orders by what it then holds; that is reproduced assuming the array is
//!   exactly as long as the list (as the apiserver's conversions allocate). The one aliasing
//!   left out: a live list of scalars holding duplicates, patched with an empty list.
//!
//! Panics of the Go code (a `replace` or `test` of the root without `value`, comparing two maps
//! as merge keys, a list starting with `null` in a strategic merge...) are reproduced as the
//! apiserver reports them: 500 with a plain-text body, [`PatchError::ServerPanic`].

use serde_json::Value;

mod gojson;
mod json;
mod merge;
pub(crate) mod request;
mod schema;
mod strategic;

/// Content types of the four patch kinds.
pub const JSON_PATCH: &str = "application/json-patch+json";
pub const MERGE_PATCH: &str = "application/merge-patch+json";
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// What the apiserver's PATCH route accepts for built-in resources (CBOR apply is behind an
/// alpha gate, off by default), in the order its 415 message lists them.
const BUILTIN_TYPES: &[&str] = &[JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH];
/// Custom resources have no Go struct to read merge keys from: no strategic merge.
const CUSTOM_TYPES: &[&str] = &[JSON_PATCH, MERGE_PATCH, APPLY_PATCH];

/// The apiserver's limit on the operations of one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// A patch kind, named by the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

impl PatchType {
    /// The type a `Content-Type` names. Like the apiserver: parameters after the first `;`
    /// are dropped (unless the header starts with one), then the media type must match
    /// exactly, case included.
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = match content_type.split_once(';') {
            Some((head, _)) if !head.is_empty() => head,
            _ => content_type,
        };
        match media_type {
            JSON_PATCH => Some(PatchType::Json),
            MERGE_PATCH => Some(PatchType::Merge),
            STRATEGIC_MERGE_PATCH => Some(PatchType::StrategicMerge),
            APPLY_PATCH => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// A failed patch, as the apiserver answers it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// 415 `UnsupportedMediaType`: a `Content-Type` the resource's PATCH route does not take.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {}",
        accepted.join(", ")
    )]
    UnsupportedMediaType { accepted: Vec<&'static str> },
    /// 400 `BadRequest` with this message (undecodable body, malformed directive).
    #[error("{0}")]
    BadRequest(String),
    /// 413 `RequestEntityTooLarge`: more than [`MAX_JSON_PATCH_OPERATIONS`] operations.
    #[error(
        "Request entity too large: The allowed maximum operations in a JSON patch is {max}, got {0}",
        max = MAX_JSON_PATCH_OPERATIONS
    )]
    TooManyOperations(usize),
    /// 422 `Invalid`. The apiserver wraps these errors in a generic server response that
    /// drops the cause: the client only sees "the server rejected our request due to an error
    /// in our request". The cause (a failed `test`, a missing path...) is kept here for logs.
    #[error("{0}")]
    Rejected(String),
    /// 500 with an empty reason: an error the apiserver does not classify (most strategic merge
    /// errors: a list item without its merge key, an unknown `$patch` directive...).
    #[error("{0}")]
    Internal(String),
    /// The Go code panicked; the apiserver's panic filter answers 500 with a plain-text body.
    #[error("the patch made the apiserver panic: {0}")]
    ServerPanic(String),
}

impl PatchError {
    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            PatchError::UnsupportedMediaType { .. } => 415,
            PatchError::BadRequest(_) => 400,
            PatchError::TooManyOperations(_) => 413,
            PatchError::Rejected(_) => 422,
            PatchError::Internal(_) | PatchError::ServerPanic(_) => 500,
        }
    }

    /// The Status `reason` (empty where the apiserver leaves it unset).
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::TooManyOperations(_) => "RequestEntityTooLarge",
            PatchError::Rejected(_) => "Invalid",
            PatchError::Internal(_) | PatchError::ServerPanic(_) => "",
        }
    }

    /// The Status `message` the client sees.
    pub fn message(&self) -> String {
        match self {
            PatchError::Rejected(_) => {
                "the server rejected our request due to an error in our request".to_owned()
            }
            other => other.to_string(),
        }
    }

    /// The response: status code, `Content-Type` and body. A `Status` object (JSON, with the
    /// newline the encoder adds) for every error but a panic, which gets the panic filter's
    /// text.
    /// The Status the apiserver answers with (see [`PatchError::response`] for the one case
    /// that is not a Status).
    pub fn status(&self) -> crate::wire::status::Status {
        let mut s = crate::wire::status::Status::new(self.code(), self.reason(), self.message());
        // NewGenericServerResponse always sets Details, here with nothing in it.
        if let PatchError::Rejected(_) = self {
            s.details = Some(Box::default());
        }
        s
    }

    pub fn response(&self) -> (u16, &'static str, Vec<u8>) {
        if let PatchError::ServerPanic(_) = self {
            let text = "This request caused apiserver to panic. Look in the logs for details.\n";
            return (500, "text/plain; charset=utf-8", text.as_bytes().to_vec());
        }
        let mut body = self.status().to_json();
        body.push(b'\n');
        (self.code(), "application/json", body)
    }
}

/// Whether strategic merge patches apply to this resource: built-in kinds the sim knows the Go
/// struct of. Custom resources get 415 from the apiserver. A `resource/subresource` name is
/// looked up by its resource.
pub fn supports_strategic_merge(group: &str, resource: &str) -> bool {
    schema::root(group, base_resource(resource)).is_some()
}

/// The patch type of a request's `Content-Type`, or the 415 the apiserver answers for this
/// resource (its message lists the types the route accepts, apply included).
pub fn patch_type(kind_key: (&str, &str), content_type: &str) -> Result<PatchType, PatchError> {
    let accepted = accepted_types(kind_key);
    match PatchType::from_content_type(content_type) {
        Some(PatchType::StrategicMerge) if !accepted.contains(&STRATEGIC_MERGE_PATCH) => {
            Err(PatchError::UnsupportedMediaType { accepted })
        }
        Some(patch_type) => Ok(patch_type),
        None => Err(PatchError::UnsupportedMediaType { accepted }),
    }
}

/// Applies a patch body to `target` (the stored object of resource `kind_key` = (group,
/// resource)) and returns the patched object.
pub fn apply_patch(
    kind_key: (&str, &str),
    target: &Value,
    patch_type: PatchType,
    patch_body: &[u8],
) -> Result<Value, PatchError> {
    let (group, resource) = kind_key;
    match patch_type {
        PatchType::Json => json::apply(target, patch_body),
        PatchType::Merge => merge::apply(target, patch_body),
        PatchType::StrategicMerge => match schema::root(group, base_resource(resource)) {
            Some(root) => strategic::apply(target, patch_body, root),
            None => Err(PatchError::UnsupportedMediaType { accepted: accepted_types(kind_key) }),
        },
        // A server without apply lists what it does take.
        PatchType::Apply => {
            let mut accepted = accepted_types(kind_key);
            accepted.retain(|t| *t != APPLY_PATCH);
            Err(PatchError::UnsupportedMediaType { accepted })
        }
    }
}

fn accepted_types((group, resource): (&str, &str)) -> Vec<&'static str> {
    if supports_strategic_merge(group, resource) {
        BUILTIN_TYPES.to_vec()
    } else {
        CUSTOM_TYPES.to_vec()
    }
}

fn base_resource(resource: &str) -> &str {
    resource.split('/').next().unwrap_or(resource)
}

#[cfg(test)]
mod tests;
