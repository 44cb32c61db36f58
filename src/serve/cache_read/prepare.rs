//! What every read from the cache — a get, a list, a watch — works out before it is answered:
//! the cache (by encoding) that holds the negotiated form ([`cache_form`]), the selectors as
//! that cache evaluates them ([`selectors`], [`watch_filter`]), and, for a consistent read,
//! the proof that the cache holds the upstream's state as of the read's arrival
//! ([`consistent`]).

use super::fresh::{self, Listing, Unproven};
use crate::cache::fanout::Filter;
use crate::cache::resource::Encoding;
use crate::cache::select;
use crate::live::caches::Live;
use crate::live::discovery::ResourceInfo;
use crate::live::freshness::Proven;
use crate::serve::state::ProxyState;
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

/// The cache (by encoding) that answers what the client negotiated, and whether it asked for
/// metadata only; `None` for what only the apiserver writes: Table (but see `table.rs`), YAML,
/// the v1beta1 meta types, protobuf metadata of custom resources, and a metadata type that does
/// not fit the read (PartialObjectMetadataList for a get, or the other way round: its 406).
/// A watch's events carry PartialObjectMetadata whichever of the two the client named.
pub(super) fn cache_form(
    info: &ResourceInfo,
    neg: &negotiate::Negotiated,
    read: Read,
) -> Option<(Encoding, bool)> {
    let encoding = match neg.media_type {
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
    if metadata && encoding == Encoding::Protobuf && !info.is_builtin() {
        return None;
    }
    Some((encoding, metadata))
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

/// The freshness proof of a consistent read of `filter` (a list, or a watch from the current
/// state), and the metadata list it was proven by if it was: for a read of about all of a small
/// cache, or of its namespace in it (a kubelet's watch of one ConfigMap in a namespace of few,
/// a node's list or watch of its Node or pods, the services kube-proxy reads, another tier's
/// `limit=1` current-RV list: [`fresh::listing`]), a metadata list of that, which costs the
/// upstream no more than the read would directly; else the cache's own proof — for a list, a
/// probe only where the scope is large enough to be worth one (a small list passes through
/// rather than wait for it); for a watch, a reload for a small cache the watch mostly covers.
pub(super) async fn consistent(
    state: &ProxyState,
    cache: &Live,
    info: &ResourceInfo,
    filter: &Filter,
    limit: Option<usize>,
    read: Read,
    arrived: std::time::Instant,
) -> Result<(Proven, Option<Listing>), Unproven> {
    if let Some(listing) = fresh::listing(cache, info.namespaced, filter, limit) {
        let namespace = filter.namespace.as_deref();
        let proven = fresh::consistent_listed(state, cache, listing, namespace, arrived).await?;
        return Ok((proven, Some(listing)));
    }
    let proven = match read {
        Read::Watch => {
            let reload = || fresh::reload_covers(cache, info.namespaced, filter);
            fresh::consistent(state, cache, arrived, || true, reload).await?
        }
        Read::Get | Read::List => {
            let min_bytes = state.caches.freshness_config().probe_min_list_bytes;
            let namespace = filter.namespace.as_deref();
            let worth_it = || fresh::scope_bytes(&cache.current(), namespace) >= min_bytes;
            fresh::consistent(state, cache, arrived, worth_it, || false).await?
        }
    };
    Ok((proven, None))
}
