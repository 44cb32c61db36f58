//! Routing: the cache when it can answer a read exactly (and, in node mode, the client may read
//! it from the cache), the passthrough stack otherwise.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Response;
use tower::{Service, ServiceExt};

use super::body::{self, Body};
use super::feed_load::{self, Feeding};
use super::metrics::Source;
use super::read::{Attempt, CachedRead};
use super::request::{impersonates, Classified, Verb};
use super::state::ProxyState;
use super::{cached, graph_retry, watch};
use crate::auth::authorize::Verdict;
use crate::auth::gate::{Decision, Gate};
use crate::auth::graph_lag::{window_until, Backoff, GraphRead};
use crate::auth::review::ResourceAttributes;
use crate::auth::Identity;
use crate::cache::Scope;
use crate::wire::negotiate;
use crate::wire::request::ApiPath;

/// The cache's answer when it has one, else `passthrough`'s. In node mode, a node's read the
/// Node authorizer refuses for want of a pod just bound in its graph is sent again until it
/// caught up ([`retry_graph_refusals`]).
pub async fn route<P>(state: &Arc<ProxyState>, req: Classified, passthrough: P) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible> + Clone,
{
    match graph_retry::graph_read(state, &req) {
        Some(read) => retry_graph_refusals(state, req, read, passthrough).await,
        None => answer(state, req, passthrough, &Attempt::default()).await,
    }
}

/// The cache's answer to `req`, else the passthrough's.
async fn answer<P>(
    state: &Arc<ProxyState>,
    req: Classified,
    passthrough: P,
    attempt: &Attempt,
) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible>,
{
    if let Some(mut answer) = from_cache(state, &req, attempt).await {
        answer.extensions_mut().insert(Source::Cache);
        return answer;
    }
    pass(passthrough, req, attempt).await
}

/// The passthrough's answer to `req` — which feeds the first load of the cold cache the read
/// started, if it does ([`feed_load`]).
async fn pass<P>(passthrough: P, req: Classified, attempt: &Attempt) -> Response<Body>
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

/// A node's read refused by the Node authorizer for want of a binding in its graph, while a
/// cache of pods shows a binding it may depend on received less than `nodeGraphLag` ago, is
/// sent again after short, growing back-offs until granted or that window ends, and the
/// upstream's last answer is the client's (`auth::graph_lag`). It is not delayed before a
/// refusal: the first send is at once. A retry asks the review afresh (a remembered denial
/// would outlive the apiserver's), so that a read the cache can answer is answered from it
/// once granted; a retry that review refuses sends nothing more upstream — except the
/// window's last, which goes on as any read does, so that the client's answer is the
/// upstream's at that moment.
async fn retry_graph_refusals<P>(
    state: &Arc<ProxyState>,
    req: Classified,
    read: GraphRead,
    passthrough: P,
) -> Response<Body>
where
    P: Service<Classified, Response = Response<Body>, Error = Infallible> + Clone,
{
    let replay = graph_retry::Replay::of(&req);
    let first = answer(state, req, passthrough.clone(), &Attempt::default()).await;
    let (mut last, refused) = graph_retry::graph_refusal(first).await;
    let refused_at = Instant::now();
    let lag = state.node.as_deref().map_or(Duration::ZERO, |n| n.graph_lag);
    let window = refused.then(|| window_until(&state.caches, lag, &read, refused_at)).flatten();
    let Some(until) = window else { return last };
    let metrics = &state.metrics.reviews;
    let mut backoff = Backoff::new(until);
    let result = loop {
        let Some(retry) = backoff.next(Instant::now()) else { break "refused" };
        tokio::time::sleep_until(retry.at.into()).await;
        metrics.graph_retry_requests.inc();
        let attempt = Attempt::retry();
        let req = replay.request();
        if let Some(mut answer) = from_cache(state, &req, &attempt).await {
            answer.extensions_mut().insert(Source::Cache);
            last = answer;
            break "granted";
        }
        if attempt.denied() && !retry.last {
            // Refused again by the upstream's review: the refusal the read would get.
            continue;
        }
        let sent = pass(passthrough.clone(), req, &attempt).await;
        let refused;
        (last, refused) = graph_retry::graph_refusal(sent).await;
        if !refused {
            break if last.status().is_success() { "granted" } else { "other" };
        }
    };
    metrics.graph_retries.with_label_values(&[result]).observe(refused_at.elapsed().as_secs_f64());
    last
}

/// A GET of a resource collection or object (not a subresource) whose resource supports
/// list+watch is offered to the cache, in three steps: what the cache would answer with
/// ([`cached::plan`] for gets and lists, [`watch::plan`] for watches; `None` where only the
/// apiserver answers exactly), the client's authorization (node mode's gate, `auth::gate`),
/// and the answer ([`cached::answer`], [`watch::answer`]; `None` to pass it through after
/// all). A GET of a group-version's discovery document goes to [`discovery`].
async fn from_cache(
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
    match plan {
        Plan::Watch(plan) => watch::answer(state, &read, plan).await,
        Plan::Read(plan) => cached::answer(state, &read, plan, headers, query).await,
    }
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
    if let Some(node) = state.node.as_deref() {
        let get = ResourceAttributes::non_resource("get", &path);
        if node.may_read_cached(&identity.user()?, &get, false).await != Verdict::Granted {
            return None;
        }
    }
    Some(body::respond_bytes(200, body::JSON, document))
}
