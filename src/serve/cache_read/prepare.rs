//! What every read from the cache — a get, a list, a watch — works out before it is answered:
//! the cache (by encoding) that holds the negotiated form ([`cache_form`]), the selectors as
//! that cache evaluates them ([`selectors`], [`watch_filter`]), and, for a consistent read,
//! the proof that the cache holds the upstream's state as of the read's arrival
//! ([`consistent`]).

use crate::cache::fanout::Filter;
use crate::cache::resource::Encoding;
use crate::cache::select;
use crate::live::discovery::ResourceInfo;
use crate::wire::negotiate::{self, MediaType, MetaVersion, Representation};
use crate::wire::request::{ListOptions, ResourcePath};
use crate::wire::selector::field::{FieldOperator, FieldRequirement};
use crate::wire::selector::fields_by_kind;
use crate::wire::selector::{FieldSelector, LabelSelector};

/// What a cached answer is for: the representations each accepts differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    Get,
    List,
    Watch,
}

/// The cache (by encoding) that answers what the client negotiated, the encoding the answer is
/// written in, and whether it asked for metadata only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Form {
    pub(super) cache: Encoding,
    pub(super) answer: Encoding,
    pub(super) metadata: bool,
}

/// The [`Form`] of a read; `None` for what only the apiserver writes: Table (but see
/// `table.rs`), YAML, the v1beta1 meta types, a protobuf metadata watch of custom resources, and
/// a metadata type that does not fit the read (PartialObjectMetadataList for a get, or the other
/// way round: its 406). A watch's events carry PartialObjectMetadata whichever of the two the
/// client named. Custom resources are JSON only; their metadata in protobuf (what client-go's
/// metadata informers ask for first) is written from the JSON cache for gets and lists
/// (`wire::meta::unstructured::partial_object_metadata_message`).
pub(super) fn cache_form(
    info: &ResourceInfo,
    neg: &negotiate::Negotiated,
    read: Read,
) -> Option<Form> {
    let answer = match neg.media_type {
        MediaType::Json => Encoding::Json,
        MediaType::Protobuf => Encoding::Protobuf,
        _ => return None,
    };
    let metadata = match (neg.representation, read) {
        (Representation::Object, _) => false,
        (Representation::PartialObjectMetadata(MetaVersion::V1), Read::Get | Read::Watch)
        | (Representation::PartialObjectMetadataList(MetaVersion::V1), Read::List | Read::Watch) => {
            true
        }
        _ => return None,
    };
    let mut cache = answer;
    if metadata && answer == Encoding::Protobuf && !info.is_builtin() {
        if read == Read::Watch {
            return None;
        }
        cache = Encoding::Json;
    }
    Some(Form { cache, answer, metadata })
}

/// The request's label and field selectors as a cache of `encoding` evaluates them, or `None`
/// when it cannot evaluate them exactly: malformed ones (whose 400 the upstream words), fields
/// the encoding's cache does not hold, custom resources' selectable fields.
pub(super) fn selectors(
    info: &ResourceInfo,
    encoding: Encoding,
    opts: &ListOptions,
) -> Option<(Option<LabelSelector>, Option<FieldSelector>)> {
    let label = match &opts.label_selector {
        Some(s) => Some(LabelSelector::parse(s).ok()?),
        None => None,
    };
    let field = match &opts.field_selector {
        Some(s) => {
            let f = FieldSelector::parse(s).ok()?;
            fields_by_kind::validate(&info.group, &info.resource, &f).ok()?;
            // Old field names converted (pods' `spec.host` is `spec.nodeName`).
            Some(select::cacheable_field_selector(encoding, &info.group, &info.resource, &f)?)
        }
        None => None,
    };
    Some((label, field))
}

/// A watch's filter: namespace, label selector, and field selector (plus the name of a watch
/// on one object), or `None` when the cache cannot evaluate it exactly.
pub(super) fn watch_filter(
    info: &ResourceInfo,
    encoding: Encoding,
    rp: &ResourcePath,
    opts: &ListOptions,
) -> Option<Filter> {
    let (label, mut field) = selectors(info, encoding, opts)?;
    // A watch of one object is a watch filtered by its name.
    if let Some(name) = &rp.name {
        let mut reqs = field.map(|f| f.requirements().to_vec()).unwrap_or_default();
        reqs.push(FieldRequirement {
            field: "metadata.name".into(),
            operator: FieldOperator::Equals,
            value: name.clone(),
        });
        field = Some(FieldSelector::from_requirements(reqs));
    }
    Some(Filter { namespace: rp.namespace.clone().filter(|ns| !ns.is_empty()), label, field })
}
