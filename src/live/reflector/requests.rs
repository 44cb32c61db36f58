//! The reflector's requests to the upstream, each counted by verb: a paged list
//! (`limit`/`continue`, at `resourceVersion=0` or not older than an RV where asked), a
//! streaming list (`sendInitialEvents=true`), a watch from an RV (`allowWatchBookmarks`, the
//! server-side `timeoutSeconds`) — and the GET they all are, gzip accepted as Go clients ask,
//! whose refusals become [`ReflectError`]s (410 Gone, 429 with `Retry-After`, another status).

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};

use super::error::ReflectError;
use super::stream::Reloads;
use super::{Ended, Reflector, LIST_PAGE_SIZE, MAX_LIST_PAGE_BYTES, WATCH_TIMEOUT_SECONDS};
use crate::cache::CachedObject;
use crate::live::feed::Feed;
use crate::upstream::{compressed, ResponseBody, UpstreamBody};
use crate::wire::list_watch::{self, ListPage};

impl<F: Fn(Feed) + Send + Sync> Reflector<F> {
    pub(super) async fn get(
        &self,
        path_and_query: &str,
    ) -> Result<http::Response<ResponseBody>, ReflectError> {
        let accept = self.encoding.media_type();
        let body: UpstreamBody = Empty::new().map_err(|never| match never {}).boxed();
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(path_and_query)
            .header(header::ACCEPT, accept)
            .header(header::USER_AGENT, concat!("kubeplex/", env!("CARGO_PKG_VERSION")))
            .body(body)
            .map_err(|e| ReflectError::Transport(e.to_string()))?;
        // As Go clients ask: a large list page comes compressed (about a tenth of its bytes).
        compressed::accept_gzip(req.headers_mut());
        let resp =
            self.upstream.send(req).await.map_err(|e| ReflectError::Transport(e.to_string()))?;
        match resp.status() {
            StatusCode::OK => Ok(resp),
            StatusCode::GONE => Err(ReflectError::Gone),
            StatusCode::TOO_MANY_REQUESTS => {
                let retry_after = resp
                    .headers()
                    .get(header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                Err(ReflectError::Throttled { retry_after })
            }
            s => {
                let body = collect(resp, 64 * 1024).await.unwrap_or_default();
                Err(ReflectError::Status {
                    status: s.as_u16(),
                    message: String::from_utf8_lossy(&body).into_owned(),
                })
            }
        }
    }

    /// A complete paged list; replaces the cache's contents. Returns the list's RV.
    pub(super) async fn list(&self) -> Result<u64, ReflectError> {
        self.calls.list.inc();
        // The first load of a cache started by a read of any state asks for any state; every
        // other load is consistent.
        let first = !self.listed.swap(true, Ordering::AcqRel);
        let rv_query = match self.not_older_than() {
            _ if first && self.first.any_state() => "&resourceVersion=0".into(),
            Some(rv) => format!("&resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
            None => String::new(),
        };
        self.load_started(rv_query.is_empty());
        let result = self.list_pages(&rv_query).await;
        if let Err(e) = &result {
            (self.feed)(Feed::LoadFailed {
                unreachable: e.unreachable(),
                forbidden: e.forbidden(),
            });
        }
        result
    }

    async fn list_pages(&self, rv_query: &str) -> Result<u64, ReflectError> {
        let base = self.collection.clone();
        let mut objects = Vec::new();
        let mut list_rv: Option<u64> = None;
        let mut token: Option<String> = None;
        loop {
            let mut path = format!("{base}?limit={LIST_PAGE_SIZE}{rv_query}{}", self.selectors);
            if let Some(t) = &token {
                path.push_str("&continue=");
                path.extend(form_urlencoded::byte_serialize(t.as_bytes()));
            }
            let resp = self.get(&path).await?;
            let body = collect(resp, MAX_LIST_PAGE_BYTES).await?;
            let page: ListPage =
                list_watch::parse_list_page(self.encoding, &body).map_err(ReflectError::Decode)?;
            for item in page.items {
                match CachedObject::from_list_item(&self.info, self.encoding, item) {
                    Ok(o) => objects.push(o),
                    Err(e) => self.skipped(&e),
                }
            }
            list_rv.get_or_insert(page.resource_version);
            match page.continue_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
        let rv = list_rv.unwrap_or(0);
        let whole = self.whole.load(Ordering::Acquire);
        (self.feed)(Feed::Loaded { objects, rv, whole });
        Ok(rv)
    }

    /// One watch stream from `rv`, yielded as it arrives, until it ends (with the newest RV
    /// seen) or a reload is asked for.
    pub(super) async fn watch(
        &self,
        rv: u64,
        reloads: &mut Reloads,
    ) -> Result<Ended, ReflectError> {
        self.calls.watch.inc();
        self.stream(&self.watch_path(rv), rv, &mut None, reloads).await
    }

    /// A streaming list: the state as ADDED events up to the initial-events-end bookmark (the
    /// state is yielded then), then changes, on one stream, until it ends (with the newest RV
    /// seen) or — once the state is in — a reload is asked for.
    pub(super) async fn stream_list(&self, reloads: &mut Reloads) -> Result<Ended, ReflectError> {
        self.calls.watchlist.inc();
        let from = self.not_older_than();
        let rv_query = from.map(|rv| format!("&resourceVersion={rv}")).unwrap_or_default();
        let path = format!(
            "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan{rv_query}&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECONDS}{}",
            self.collection, self.selectors
        );
        let mut initial = Some(Vec::new());
        self.load_started(from.is_none());
        let result = self.stream(&path, 0, &mut initial, reloads).await;
        if result.is_err() || initial.is_some() {
            // Nothing was replaced (or, after the state, the stream failed: the load itself
            // completed and `Loaded` already ended it; this only clears a load left open).
            let err = result.as_ref().err();
            let unreachable = err.is_some_and(ReflectError::unreachable);
            let forbidden = err.is_some_and(ReflectError::forbidden);
            (self.feed)(Feed::LoadFailed { unreachable, forbidden });
        }
        let last = result?;
        if initial.is_some() {
            // The stream ended before the state was complete: nothing was applied.
            return Err(ReflectError::Transport(
                "streaming list ended before its initial events did".into(),
            ));
        }
        Ok(last)
    }

    pub(super) fn watch_path(&self, rv: u64) -> String {
        format!(
            "{}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECONDS}{}",
            self.collection, self.selectors
        )
    }
}

/// Reads a whole body (decompressed if the upstream compressed it), refusing more than `limit`
/// bytes.
async fn collect(resp: http::Response<ResponseBody>, limit: usize) -> Result<Bytes, ReflectError> {
    compressed::read(resp, limit).await.map_err(|e| ReflectError::Transport(e.to_string()))
}
