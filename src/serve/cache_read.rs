//! Reading from the cache: everything between routing and the bytes of an answer the cache
//! gives. [`answer`] is the one way in — for gets, lists, watches and discovery documents — and
//! reads top to bottom: whether the client may be answered from a cache at all (its identity),
//! which part of which resource the read sees ([`Scope`]), what the cache would answer with
//! ([`cached::plan`] for gets and lists, [`watch::plan`] for watches, both through
//! [`prepare`]), the client's authorization (node mode's gate, `auth::gate`), then the answer
//! ([`cached::answer`], [`watch::answer`]: the cache fetched or started and its first sync
//! waited for by [`read`], the state picked by the resourceVersion rules and proven fresh where
//! a rule needs it by [`fresh`], the bytes written by [`encode`], [`table`] and [`pages`]).
//! [`pass`] is the way out when the cache does not answer: the passthrough, whose answer feeds
//! a cold cache's first load when the read started one ([`feed_load`]).

mod cached;
mod encode;
mod feed_load;
mod fresh;
pub mod pages;
mod prepare;
mod read;
mod table;
mod watch;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use http::Response;
use tower::{Service, ServiceExt};

use self::feed_load::Feeding;
pub use self::read::Attempt;
use self::read::CachedRead;
use crate::auth::gate::{Decision, Gate};
use crate::auth::review::ResourceAttributes;
use crate::auth::Identity;
use crate::cache::Scope;
use crate::serve::body::{self, Body};
use crate::serve::metrics::Source;
use crate::serve::request::{impersonates, Classified, Verb};
use crate::serve::state::ProxyState;
use crate::wire::negotiate;
use crate::wire::request::ApiPath;

/// A GET of a resource collection or object (not a subresource) whose resource supports
/// list+watch is offered to the cache, in three steps: what the cache would answer with
/// ([`cached::plan`] for gets and lists, [`watch::plan`] for watches; `None` where only the
/// apiserver answers exactly), the client's authorization (node mode's gate, `auth::gate`),
/// and the answer ([`cached::answer`], [`watch::answer`]; `None` to pass it through after
/// all). A GET of a group-version's discovery document goes to [`discovery`].
pub async fn answer(
    state: &Arc<ProxyState>,
    classified: &Classified,
    attempt: &Attempt,
) -> Option<Response<Body>> {
    let Classified { req, class, identity } = classified;
    match identity {
        // A client with credentials of its own is authorized by the apiserver, request by
        // request; the cache (filled with kubeplex's identity) must not answer for it.
        Identity::Shared if class.credentials => return None,
        Identity::Unreviewed => return None,
        Identity::Anonymous if impersonates(req.headers()) => return None,
        _ => {}
    }
    let ApiPath::Resource(rp) = &class.path else { return discovery(state, classified).await };
    if rp.subresource.is_some() {
        return None;
    }
    // Only GETs have options; malformed ones get the upstream's own 400/422.
    let opts = class.options.as_ref()?;
    let info = state.resources.lookup(&rp.group, &rp.version, &rp.resource).await?;
    if !(info.supports("list") && info.supports("watch"))
        || (rp.namespace.is_some() && !info.namespaced)
    {
        return None;
    }
    // Caches limited to one namespace hold nothing of the others: what reaches past it (another
    // namespace, every namespace) is the upstream's to answer.
    if let Some(scope) = state.caches.namespace().filter(|_| info.namespaced) {
        if rp.namespace.as_deref() != Some(scope) {
            return None;
        }
    }
    // The part of the resource the read can see: a cache whose scope contains it answers.
    let scope = Scope::parse(
        &rp.group,
        &rp.resource,
        rp.namespace.as_deref(),
        opts.label_selector.as_deref(),
        opts.field_selector.as_deref(),
    )
    .ok()?;
    let scope = match &rp.name {
        Some(name) => scope.named(name),
        None => scope,
    };
    let read = CachedRead { info: &info, rp, opts, scope: &scope, attempt };
    let (headers, query) = (req.headers(), req.uri().query());
    // What the cache would answer with; `None` where only the apiserver answers.
    let plan = match opts.watch {
        true => Plan::Watch(watch::plan(&read, headers, query)?),
        false => Plan::Read(cached::plan(state, &read, headers, query)?),
    };
    if !read.may_be_cached(state, plan.encoding()) {
        return None;
    }
    // Authorization (node mode): nothing from the cache reaches a client the upstream would
    // refuse; asked once the cache could answer, before any cache is read or started.
    let node = match (state.node.as_deref(), identity.user()) {
        (Some(node), Some(user)) => Some((node, user, class.read_attributes()?)),
        _ => None,
    };
    let gate = Gate {
        node,
        impersonation: impersonates(req.headers()).then_some(req.headers()),
        watch: class.verb == Verb::Watch,
        caches: &state.caches,
    };
    match gate.open(attempt.afresh).await {
        Decision::Granted => {}
        Decision::Denied => {
            attempt.deny();
            return None;
        }
        Decision::Unverified => return None,
        Decision::Throttled => return Some(body::too_many_requests()),
    }
    // The cache that answers, started if need be, and its first sync waited for (bounded): the
    // reads of a cold cache share its one upstream load. `None`: no cache may answer (the cost
    // rule, the memory budget), the read feeds the cache's first load, or the wait ran out —
    // the read passes through.
    let cache = read.cache(state, plan.encoding(), plan.whole())?;
    if !fresh::synced(state, &cache).await {
        return None;
    }
    let mut answer = match plan {
        Plan::Watch(plan) => watch::answer(state, &read, &cache, plan).await,
        Plan::Read(plan) => cached::answer(state, &read, &cache, plan, headers, query).await,
    }?;
    answer.extensions_mut().insert(Source::Cache);
    Some(answer)
}

/// What the cache would answer a read with ([`cached::plan`], [`watch::plan`]).
enum Plan {
    Read(cached::Plan),
    Watch(watch::Plan),
}

impl Plan {
    fn encoding(&self) -> crate::cache::Encoding {
        match self {
            Plan::Read(plan) => plan.encoding(),
            Plan::Watch(plan) => plan.encoding(),
        }
    }

    /// Whether the read asks for what a cache of its scope loads (`CachedRead::cache`): only a
    /// list can.
    fn whole(&self) -> bool {
        match self {
            Plan::Read(plan) => plan.whole(),
            Plan::Watch(_) => false,
        }
    }
}

/// A group-version's discovery document (`GET /api/v1`, `/apis/G/V`), answered with kubeplex's
/// own copy of it ([`Resources::document`](crate::live::discovery::Resources::document)): node
/// tiers in front of a pool each ask for the same few documents when they start, one request to
/// the apiserver each otherwise. Only the compact JSON form without a query, never for a client
/// acting as someone else, and — in node mode — only once the upstream grants the client `get`
/// of that path (system:discovery), as for any read from the cache. [`from_cache`]'s identity
/// rules apply first.
async fn discovery(state: &ProxyState, classified: &Classified) -> Option<Response<Body>> {
    let Classified { req, class, identity } = classified;
    let (group, version) = match &class.path {
        ApiPath::LegacyResources => ("", "v1"),
        ApiPath::GroupResources(group, version) => (group.as_str(), version.as_str()),
        _ => return None,
    };
    let path = crate::live::discovery::document_path(group, version);
    let header = |name| req.headers().get(name).map(|v| v.to_str().unwrap_or("?"));
    let accept = header(http::header::ACCEPT);
    // As the apiserver's discovery handler negotiates — DefaultEndpointRestrictions, no
    // conversions, the same as for an error Status (`negotiate_error`): JSON, and not
    // indented, which it is for `pretty` and for curl's, wget's and browsers' User-Agent.
    let json = negotiate::negotiate_error(accept) == Some(negotiate::MediaType::Json);
    let pretty = negotiate::is_pretty_print(None, header(http::header::USER_AGENT))
        || accept.is_some_and(|a| a.contains("pretty"));
    if req.method() != http::Method::GET
        || req.uri().path() != path
        || req.uri().query().is_some()
        || impersonates(req.headers())
        || !json
        || pretty
    {
        return None;
    }
    // The document first, as a read of a resource path looks its group-version up first: a
    // group-version the upstream does not serve costs no review.
    let document = state.resources.document(group, version).await?;
    let get = ResourceAttributes::non_resource("get", &path);
    let node = match (state.node.as_deref(), identity.user()) {
        (Some(node), Some(user)) => Some((node, user, &get)),
        (Some(_), None) => return None,
        (None, _) => None,
    };
    let gate = Gate { node, impersonation: None, watch: false, caches: &state.caches };
    let mut answer = match gate.open(false).await {
        Decision::Granted => body::respond_bytes(200, body::JSON, document),
        Decision::Throttled => return Some(body::too_many_requests()),
        Decision::Denied | Decision::Unverified => return None,
    };
    answer.extensions_mut().insert(Source::Cache);
    Some(answer)
}

/// The passthrough's answer to `req` — which feeds the first load of the cold cache the read
/// started, if it does ([`feed_load`]).
pub async fn pass<P>(passthrough: P, req: Classified, attempt: &Attempt) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible>,
{
    let requested = Instant::now();
    let feeding = attempt.take_feeder().map(|(feeder, consistent, media_type)| Feeding {
        feeder,
        consistent,
        media_type,
        requested,
    });
    let resp = match passthrough.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    match feeding {
        Some(feeding) => feed_load::tee(resp, feeding),
        None => resp,
    }
}
