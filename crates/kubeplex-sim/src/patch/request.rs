//! Applying PATCH bodies to stored objects, with the apiserver's patch types and errors.

use serde_json::Value;

use crate::kinds::Kind;
use crate::patch::{self, PatchError};
use crate::wire::status::Status;

fn status(e: PatchError) -> Status {
    e.status()
}

/// Applies a patch of the given content type to `current`.
pub fn apply(
    kind: &Kind,
    current: &Value,
    content_type: &str,
    body: &[u8],
) -> Result<Value, Status> {
    let key = (kind.group.as_str(), kind.resource.as_str());
    let patch_type = patch::patch_type(key, content_type).map_err(status)?;
    patch::apply_patch(key, current, patch_type, body).map_err(status)
}
