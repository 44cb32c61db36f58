//! Which representation a request asked for: the apiserver's content negotiation
//! ([`crate::wire::negotiate`]) reduced to what the sim can produce.

use http::{header, HeaderMap};

use crate::wire::negotiate::{self, Endpoint, MediaType, Representation};
use crate::wire::status::Status;

/// A negotiated response representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    Json,
    Protobuf,
    /// `as=Table;g=meta.k8s.io;v=v1`: what `kubectl get` asks for.
    Table,
    /// `as=PartialObjectMetadata(List)` in JSON.
    Meta,
    /// `as=PartialObjectMetadata(List)` in protobuf.
    MetaProtobuf,
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

/// Negotiates the response of a get, list (`watch == false`) or watch.
pub fn negotiate(headers: &HeaderMap, has_protobuf: bool, watch: bool) -> Result<Repr, Status> {
    let endpoint = if has_protobuf { Endpoint::BuiltIn } else { Endpoint::CustomResource };
    let n = if watch {
        negotiate::negotiate_watch(accept(headers), endpoint)
    } else {
        negotiate::negotiate_output(accept(headers), endpoint)
    }
    .map_err(|e| Status::new(e.code(), e.reason(), e.to_string()))?;
    match (n.media_type, n.representation) {
        (MediaType::Json, Representation::Object) => Ok(Repr::Json),
        (MediaType::Protobuf, Representation::Object) => Ok(Repr::Protobuf),
        (MediaType::Json, Representation::Table(negotiate::MetaVersion::V1)) => Ok(Repr::Table),
        (
            MediaType::Json,
            Representation::PartialObjectMetadata(negotiate::MetaVersion::V1)
            | Representation::PartialObjectMetadataList(negotiate::MetaVersion::V1),
        ) => Ok(Repr::Meta),
        (
            MediaType::Protobuf,
            Representation::PartialObjectMetadata(negotiate::MetaVersion::V1)
            | Representation::PartialObjectMetadataList(negotiate::MetaVersion::V1),
        ) => Ok(Repr::MetaProtobuf),
        // YAML output and the v1beta1 meta types are not produced by the sim.
        _ => Err(Status::not_acceptable(
            "only the following media types are accepted: application/json, \
             application/vnd.kubernetes.protobuf",
        )),
    }
}

/// The encoding of an error Status for this request (protobuf clients get protobuf).
pub fn error_is_protobuf(headers: &HeaderMap) -> bool {
    negotiate::negotiate_error(accept(headers)) == Some(MediaType::Protobuf)
}

impl Repr {
    pub fn is_protobuf(self) -> bool {
        matches!(self, Repr::Protobuf | Repr::MetaProtobuf)
    }
}
