//! Reading one watch stream of the reflector (a watch's, or a streaming list's): its JSON
//! lines or protobuf frames as they arrive, each one event, until the upstream ends it at its
//! `timeoutSeconds`, it stays silent past that, or it breaks; between frames, a reload asked
//! for ends it, and on a fallback upstream it moves back to a returned one (`move_back`).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use super::error::ReflectError;
use super::event::Initial;
use super::move_back::{has_history, served_by, MOVE_GIVE_UP, MOVE_RETRY};
use super::{Ended, Reflector, WATCH_TIMEOUT_SECONDS};
use crate::live::feed::Feed;
use crate::live::metrics::OpenWatch;
use crate::upstream::compressed;
use crate::wire::proto::WatchFrameDecoder;
use crate::wire::resource::Encoding;

/// Largest single watch frame accepted from the upstream (a protobuf frame is length-prefixed).
const MAX_WATCH_FRAME: usize = 64 * 1024 * 1024;
/// How long past its timeout a watch may stay silent before it is abandoned.
const WATCH_DEADLINE_MARGIN_SECONDS: u64 = 60;

/// Reload requests, if the reflector takes them.
pub(super) type Reloads = Option<tokio::sync::watch::Receiver<u64>>;

/// Resolves when a reload is asked for; never when none can be (no channel, or it closed).
async fn reload_requested(reloads: &mut Reloads) -> bool {
    if let Some(r) = reloads.as_mut() {
        if r.changed().await.is_ok() {
            return true;
        }
    }
    std::future::pending().await
}

impl<F: Fn(Feed) + Send + Sync> Reflector<F> {
    /// Reads one watch stream. While `initial` is `Some`, ADDED events are collected into it
    /// until the initial-events-end bookmark, which yields them as the state.
    ///
    /// A stream on a fallback upstream moves back to an earlier one once it returns
    /// ([`Reflector::try_move`]): a watch from the newest RV seen is opened there, and the
    /// stream goes on from it only if that upstream has history from that RV — a returned pool
    /// whose caches started after it would answer 410, and a relist would follow. The old
    /// stream is read on meanwhile, and the move tried again, for up to [`MOVE_GIVE_UP`]; then
    /// the watch resumes there whatever it answers.
    pub(super) async fn stream(
        &self,
        path: &str,
        rv: u64,
        initial: &mut Initial,
        reloads: &mut Reloads,
    ) -> Result<Ended, ReflectError> {
        let mut started = Instant::now();
        let resp = self.get(path).await?;
        let _open = OpenWatch::enter(&self.calls.open_watches);
        self.apply_fed_state();
        self.apply_resumed_state();
        let mut served_by = served_by(&resp);
        // The cache is told it is watched once the stream is a watch of its state: now, or
        // when a streaming list's initial events end.
        let mut watching = false;
        let tell_watching = |initial: &Initial, served_by: usize, told: &mut bool| {
            if initial.is_none() && !*told {
                *told = true;
                let via_tier = !self.upstream.is_apiserver(served_by);
                (self.feed)(Feed::Watching { via_tier });
            }
        };
        tell_watching(initial, served_by, &mut watching);
        let mut active = self.upstream.active();
        let mut body = compressed::Chunks::new(resp);
        // The moved-to stream's first bytes, read to see whether it has history.
        let mut pending: Option<Bytes> = None;
        let mut next_move = started;
        let mut moving_since: Option<Instant> = None;
        let mut last = rv;
        let mut events = 0usize;
        let mut lines = BytesMut::new();
        // Where the search for the next newline resumes: earlier bytes hold none.
        let mut scanned = 0;
        let mut frames = WatchFrameDecoder::new(MAX_WATCH_FRAME);
        // The upstream ends the watch at timeoutSeconds; a connection that silently stopped
        // carrying data (a dropped NAT flow) is given up a little after that.
        let silent_after =
            Duration::from_secs(WATCH_TIMEOUT_SECONDS + WATCH_DEADLINE_MARGIN_SECONDS);
        let mut deadline = started + silent_after;
        loop {
            let next = match pending.take() {
                Some(data) => Ok(Some(Ok(data))),
                // A reload or a move is taken only between frames and once a streaming list's
                // state is in: a load is never cut short.
                None if initial.is_none() => {
                    let back = async {
                        let _ = active.wait_for(|a| *a < served_by).await;
                        tokio::time::sleep_until(next_move).await;
                    };
                    tokio::select! {
                        next = tokio::time::timeout_at(deadline, body.next()) => next,
                        true = reload_requested(reloads) => return Ok(Ended::Reload),
                        () = back, if served_by > 0 => {
                            let since = *moving_since.get_or_insert_with(Instant::now);
                            if since.elapsed() >= MOVE_GIVE_UP {
                                tracing::info!(resource = %self.describe, rv = last, "resuming the watch on the returned upstream");
                                return Ok(Ended::Moved(last));
                            }
                            match self.try_move(last, served_by).await {
                                Some(moved) => {
                                    tracing::info!(resource = %self.describe, rv = last, "watch moved back to the returned upstream");
                                    (body, served_by, pending) = moved;
                                    watching = false;
                                    tell_watching(initial, served_by, &mut watching);
                                    moving_since = None;
                                    started = Instant::now();
                                    deadline = started + silent_after;
                                    events = 0;
                                    // A partial frame of the old stream is read again, whole,
                                    // from the new one (it resumes after `last`).
                                    lines.clear();
                                    scanned = 0;
                                    frames = WatchFrameDecoder::new(MAX_WATCH_FRAME);
                                }
                                None => next_move = Instant::now() + MOVE_RETRY,
                            }
                            continue;
                        }
                    }
                }
                None => tokio::time::timeout_at(deadline, body.next()).await,
            };
            let data = match next {
                Ok(Some(data)) => data,
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(resource = %self.describe, "watch silent past its deadline; reconnecting");
                    break;
                }
            };
            let data = match data {
                Ok(data) => data,
                Err(e) => {
                    let e = ReflectError::Transport(e.to_string());
                    return if initial.is_none() { Ok(Ended::Broken(last, e)) } else { Err(e) };
                }
            };
            match self.encoding {
                Encoding::Json => {
                    lines.extend_from_slice(&data);
                    while let Some(pos) = lines[scanned..].iter().position(|b| *b == b'\n') {
                        let line = lines.split_to(scanned + pos + 1);
                        scanned = 0;
                        if line.len() > 1 {
                            events += 1;
                            last = last.max(self.event(&line, initial)?);
                        }
                    }
                    scanned = lines.len();
                    if lines.len() > MAX_WATCH_FRAME {
                        return Err(ReflectError::Decode("watch event over the size limit".into()));
                    }
                }
                Encoding::Protobuf => {
                    frames.push(&data);
                    while let Some(f) =
                        frames.next_frame().map_err(|e| ReflectError::Decode(e.to_string()))?
                    {
                        events += 1;
                        last = last.max(self.event(&f, initial)?);
                    }
                }
            }
            tell_watching(initial, served_by, &mut watching);
        }
        // A watch that ends at once with nothing in it is a failing upstream (or something in
        // front of it), not a routine timeout: back off rather than reconnect in a tight loop,
        // as client-go's reflector does.
        if events == 0 && started.elapsed() < Duration::from_secs(1) {
            return Err(ReflectError::Transport("watch ended immediately without events".into()));
        }
        Ok(Ended::Closed(last))
    }

    /// A watch from `rv` on the upstream now active, if it is earlier than `from` and has
    /// history from `rv` ([`has_history`]). Returns the stream, where it runs, and the bytes
    /// read of it.
    async fn try_move(
        &self,
        rv: u64,
        from: usize,
    ) -> Option<(compressed::Chunks, usize, Option<Bytes>)> {
        self.calls.watch.inc();
        let resp = self.get(&self.watch_path(rv)).await.ok()?;
        let at = served_by(&resp);
        if at >= from {
            return None;
        }
        let mut body = compressed::Chunks::new(resp);
        let read = has_history(&mut body, self.encoding, MAX_WATCH_FRAME).await?;
        Some((body, at, read))
    }
}
