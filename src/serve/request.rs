//! The request model: what a request is (`Class`: verb, API path, list options, whether it
//! carries credentials of its own), read once from its method, path, query and headers by the
//! classification layer (`stack`), and what every layer below it takes (`Classified`).

use std::sync::OnceLock;

use http::header::{self, HeaderMap};
use http::{Method, Request};

use crate::auth::authorize::read_attributes;
use crate::auth::review::ResourceAttributes;
use crate::auth::Identity;
use crate::net::h1::ReqBody;
use crate::wire::request::{go_url, parse_path, ApiPath, ListOptions};

/// The verb a request stands for, as the apiserver's metrics and audit name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Post,
    Put,
    Patch,
    Delete,
    Other,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
            Verb::Other => "OTHER",
        }
    }
}

/// What a request is, read once from its method, path, query and headers.
#[derive(Debug, Clone)]
pub struct Class {
    /// `OTHER` for paths that are not a resource's.
    pub verb: Verb,
    pub path: ApiPath,
    /// The list options of a GET of a resource; `None` for other requests, and for malformed
    /// options (the upstream gives those its own 400/422).
    pub options: Option<ListOptions>,
    /// The client sent credentials of its own (a bearer token, impersonation headers): the
    /// apiserver authorizes it request by request, and the cache (filled with kubeplex's
    /// identity) must not answer for it.
    pub credentials: bool,
    /// [`Class::read_attributes`], once asked.
    attributes: OnceLock<Option<ResourceAttributes>>,
}

impl Class {
    /// The class of a request; a path Go cannot decode is `Other`.
    pub fn of<B>(req: &Request<B>) -> Class {
        Class::decoded(req).unwrap_or_else(|| Class::with_path(req, ApiPath::Other))
    }

    /// The class of a request whose path Go's net/http decodes (the apiserver routes on the
    /// decoded `URL.Path`); `None` for one it refuses before any handler runs.
    pub fn decoded<B>(req: &Request<B>) -> Option<Class> {
        let path = go_url::unescape_path(req.uri().path())?;
        Some(Class::with_path(req, parse_path(&path)))
    }

    fn with_path<B>(req: &Request<B>, path: ApiPath) -> Class {
        let query = req.uri().query();
        let (verb, options) = match (req.method(), &path) {
            // A named GET is a get whatever its query says (the apiserver's `GetResource`
            // reads only `GetOptions`).
            (&Method::GET, ApiPath::Resource(rp)) if rp.name.is_some() => {
                (Verb::Get, ListOptions::parse_get(query).ok())
            }
            (&Method::GET, ApiPath::Resource(_)) => {
                let options = ListOptions::parse(query).ok();
                let watch = options.as_ref().map_or_else(|| watch_flag(query), |o| o.watch);
                (if watch { Verb::Watch } else { Verb::List }, options)
            }
            (method, ApiPath::Resource(_)) => (verb(method), None),
            _ => (Verb::Other, None),
        };
        let credentials = has_credentials(req.headers());
        Class { verb, path, options, credentials, attributes: OnceLock::new() }
    }

    /// A read's attributes as the apiserver's authorizers see them
    /// (`auth::authorize::read_attributes`: verb, resource, namespace, name, selectors) —
    /// worked out once per request, for node mode's gate, the graph's retries and the
    /// passthrough alike; `None` for a request that is not a GET of a resource.
    pub fn read_attributes(&self) -> Option<&ResourceAttributes> {
        let attributes = || match (&self.path, self.verb) {
            (ApiPath::Resource(rp), Verb::Get | Verb::List | Verb::Watch) => {
                Some(read_attributes(rp, self.options.as_ref(), self.verb == Verb::Watch))
            }
            _ => None,
        };
        self.attributes.get_or_init(attributes).as_ref()
    }
}

fn verb(method: &Method) -> Verb {
    match *method {
        Method::POST => Verb::Post,
        Method::PUT => Verb::Put,
        Method::PATCH => Verb::Patch,
        Method::DELETE => Verb::Delete,
        _ => Verb::Other,
    }
}

/// `watch` set to anything but `0`/`false` in its first value (the apiserver's RequestInfo
/// reading, which the metrics follow, also for options that do not decode).
fn watch_flag(query: Option<&str>) -> bool {
    go_url::first(&go_url::parse_query(query.unwrap_or("")), "watch")
        .is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
}

/// A request and its class, as the layers below the classification take it.
pub struct Classified {
    pub req: Request<ReqBody>,
    pub class: Class,
    /// Set by the authentication layer; `Shared` until then (and in the sidecar mode).
    pub identity: Identity,
}

/// Whether the client presented credentials of its own, or asks to act as someone else
/// (`Impersonate-*`): either way the apiserver must decide, so the cache never answers.
pub fn has_credentials(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
        || headers.keys().any(|k| k.as_str().starts_with("impersonate-"))
}

/// Whether a request asks to act as someone else.
pub fn impersonates(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| k.as_str().starts_with("impersonate-"))
}

#[cfg(test)]
mod tests;
