//! Which representation a request asked for (the sim's view of content negotiation).

use http::{header, HeaderMap};

use crate::wire::status::Status;

/// A negotiated response representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    Json,
    Protobuf,
    /// `as=Table;g=meta.k8s.io;v=v1`: what `kubectl get` asks for.
    Table,
    /// `as=PartialObjectMetadata` / `PartialObjectMetadataList`.
    Meta,
}

/// Picks the first acceptable media range, like the apiserver's negotiation: protobuf only for
/// types that have it (custom resources fall through to the next range), `*/*` means JSON.
pub fn negotiate(headers: &HeaderMap, has_protobuf: bool) -> Result<Repr, Status> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if accept.trim().is_empty() {
        return Ok(Repr::Json);
    }
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut as_kind = None;
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim() == "as" {
                    as_kind = Some(v.trim().to_string());
                }
            }
        }
        match (media.as_str(), as_kind.as_deref()) {
            ("application/json" | "application/*" | "*/*", None) => return Ok(Repr::Json),
            ("application/json", Some("Table")) => return Ok(Repr::Table),
            ("application/json", Some("PartialObjectMetadata" | "PartialObjectMetadataList")) => {
                return Ok(Repr::Meta)
            }
            ("application/vnd.kubernetes.protobuf", None) if has_protobuf => {
                return Ok(Repr::Protobuf)
            }
            _ => {}
        }
    }
    Err(Status::not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, \
         application/vnd.kubernetes.protobuf",
    ))
}
