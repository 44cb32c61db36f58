//! Caches fed by another encoding's cache of the same resource and scope: one upstream
//! list+watch per resource, whatever encodings its readers want (issue 31).
//!
//! A cache of a built-in resource in one encoding (the *source*, fed by its reflector) feeds
//! the caches of the same resource and scope in the other encoding (its *twins*): every
//! [`Feed`] event the source applies — loads, changes, bookmarks — is applied to each twin too,
//! its objects rendered with the schema (`cache::transcode`), in the source's reflector task,
//! right after the source. A twin's state is thus always the source's, at the same RVs, with
//! the same load marks, so its reads, watches and freshness proofs follow the same rules as any
//! cache's; its reloads are the source's (`live::caches`).
//!
//! A twin started while its source runs takes over the source's state: taken at once, rendered
//! off the reflector's task, while the events after it wait in a bounded queue, then applied in
//! order. An object the schema cannot render exactly ([`TranscodeError`]: a field a newer
//! apiserver has and 1.36 does not) breaks the twin: its readers are ended as after a skipped
//! object, and the live layer replaces it with a cache of its own list+watch
//! (`Caches::fall_back`), so a client never sees a wrong byte.

use std::sync::{Arc, Mutex, Weak};

use super::feed::{self, Feed};
use crate::cache::resource::{LoadMarks, ResourceCache};
use crate::cache::transcode::{TranscodeError, Transcoder};
use crate::cache::{CachedObject, Snapshot};

/// The most events a twin being started keeps while its first state is rendered; past it the
/// twin is broken (its cache of its own replaces it) rather than the queue unbounded.
pub const CATCH_UP_MAX: usize = 100_000;

/// Told once when a twin breaks, with why.
pub type OnBroken = Box<dyn Fn(&str) + Send + Sync>;

/// A source cache's twins.
///
/// Two locks: `feeding`, held for the whole of each feed event (the source's own apply
/// included, which may take the caches' map lock: the memory budget's check of a load) and by
/// whatever changes the twins — so a twin's start and first state fall between two events —
/// and `twins`, held only while the list is read or changed, never while another lock is
/// taken (the caches' reaper asks [`Mirror::has_twins`] under the map's lock). Neither is ever
/// taken under the map's lock ([`Mirror::attach`] is called after it is released).
#[derive(Default)]
pub struct Mirror {
    feeding: Mutex<()>,
    twins: Mutex<Vec<Twin>>,
}

struct Twin {
    cache: Weak<ResourceCache>,
    transcoder: Transcoder,
    /// While its first state is rendered: the source's events since that state was taken.
    catching_up: Option<Vec<Feed>>,
    broken: OnBroken,
}

/// What a twin started while its source runs takes over ([`Mirror::attach`]).
pub struct Takeover {
    pub snapshot: Snapshot,
    pub marks: LoadMarks,
}

impl Mirror {
    /// Whether any twin is fed from here.
    pub fn has_twins(&self) -> bool {
        let twins = self.lock();
        twins.iter().any(|t| t.cache.strong_count() > 0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Twin>> {
        self.twins.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `apply` (the source's own), then each twin fed: the source's feed.
    pub fn sink(
        self: &Arc<Self>,
        apply: impl Fn(Feed) + Send + Sync + 'static,
    ) -> impl Fn(Feed) + Send + Sync + 'static {
        let mirror = self.clone();
        move |event| mirror.feed(event, &apply)
    }

    fn feed(&self, event: Feed, apply: &(impl Fn(Feed) + ?Sized)) {
        let _feeding = self.feeding.lock().unwrap_or_else(|p| p.into_inner());
        let (keep, rendered_load) = {
            let mut twins = self.lock();
            twins.retain(|t| t.cache.strong_count() > 0);
            if twins.is_empty() {
                drop(twins);
                return apply(event);
            }
            let keep = twins.iter().any(|t| t.catching_up.is_some());
            // A load's objects are rendered before the source takes them (a copy of a whole
            // load is kept only for a twin catching up).
            let load = matches!(event, Feed::Loaded { .. });
            (keep, load.then(|| render_for(&twins, &event)))
        };
        let (rendered, kept) = match rendered_load {
            Some(rendered) if keep => {
                apply(event.clone());
                (rendered, Some(event))
            }
            Some(rendered) => {
                apply(event);
                (rendered, None)
            }
            // Any other event goes to the source first, so its watchers wait for no rendering.
            None => {
                apply(event.clone());
                (render_for(&self.lock(), &event), Some(event))
            }
        };
        // The list is as it was: only what holds `feeding` changes it.
        let mut twins = self.lock();
        let mut broken = Vec::new();
        for (i, (twin, rendered)) in twins.iter_mut().zip(rendered).enumerate() {
            match (&mut twin.catching_up, rendered, &kept) {
                (Some(queue), _, _) if queue.len() >= CATCH_UP_MAX => broken.push((
                    i,
                    format!(
                        "more than {CATCH_UP_MAX} events came while its first state was rendered"
                    ),
                )),
                (Some(queue), _, Some(event)) => queue.push(event.clone()),
                (None, Some(Ok(feed)), _) => {
                    if let Some(cache) = twin.cache.upgrade() {
                        feed::apply(&cache, feed);
                    }
                }
                (None, Some(Err(e)), _) => broken.push((i, e.to_string())),
                _ => {}
            }
        }
        break_twins(&mut twins, broken);
    }

    /// Feeds `twin` from now on with what `transcoder` renders. If this cache's state is one to
    /// take over ([`ResourceCache::load_marks`]), it is returned, and the events after it are
    /// kept until [`Mirror::caught_up`] is given it rendered; otherwise the twin waits for this
    /// cache's next load.
    pub fn attach(
        &self,
        source: &ResourceCache,
        twin: &Arc<ResourceCache>,
        transcoder: Transcoder,
        broken: OnBroken,
    ) -> Option<Takeover> {
        let _feeding = self.feeding.lock().unwrap_or_else(|p| p.into_inner());
        let mut twins = self.lock();
        // Under the lock the source's feed waits: its state and marks are those the events
        // after this one follow from.
        let takeover =
            source.load_marks().map(|marks| Takeover { snapshot: source.current(), marks });
        let catching_up = takeover.as_ref().map(|_| Vec::new());
        twins.push(Twin { cache: Arc::downgrade(twin), transcoder, catching_up, broken });
        takeover
    }

    /// `twin`'s first state, rendered from the [`Takeover`]: applied, then the events since,
    /// and from then on it is fed as the source is.
    pub fn caught_up(
        &self,
        twin: &Arc<ResourceCache>,
        state: Result<Vec<CachedObject>, TranscodeError>,
        takeover: &Takeover,
    ) {
        let _feeding = self.feeding.lock().unwrap_or_else(|p| p.into_inner());
        let mut twins = self.lock();
        let Some(i) = twins.iter().position(|t| Weak::ptr_eq(&t.cache, &Arc::downgrade(twin)))
        else {
            return;
        };
        let objects = match state {
            Ok(objects) => objects,
            Err(e) => return break_twins(&mut twins, vec![(i, e.to_string())]),
        };
        twin.replace_like(objects, takeover.snapshot.resource_version(), takeover.marks);
        let queued = twins[i].catching_up.take().unwrap_or_default();
        for event in queued {
            match render(&twins[i].transcoder, &event) {
                Ok(feed) => feed::apply(twin, feed),
                Err(e) => return break_twins(&mut twins, vec![(i, e.to_string())]),
            }
        }
    }
}

/// The state `takeover` holds, rendered by `transcoder`.
pub fn render_state(
    transcoder: &Transcoder,
    takeover: &Takeover,
) -> Result<Vec<CachedObject>, TranscodeError> {
    takeover.snapshot.items().values().map(|o| transcoder.object(o)).collect()
}

/// Each twin's rendering of `event`; `None` for one catching up (it keeps the source's event).
fn render_for(twins: &[Twin], event: &Feed) -> Vec<Option<Result<Feed, TranscodeError>>> {
    twins.iter().map(|t| t.catching_up.is_none().then(|| render(&t.transcoder, event))).collect()
}

/// `event` as the twin `transcoder` renders for receives it.
fn render(transcoder: &Transcoder, event: &Feed) -> Result<Feed, TranscodeError> {
    Ok(match event {
        Feed::Loaded { objects, rv, whole } => Feed::Loaded {
            objects: objects.iter().map(|o| transcoder.object(o)).collect::<Result<_, _>>()?,
            rv: *rv,
            whole: *whole,
        },
        Feed::Event(kind, object) => Feed::Event(*kind, transcoder.object(object)?),
        other => other.clone(),
    })
}

/// Ends the twins at `broken` (index, why): their watchers and readers as after a skipped
/// object, then each told.
fn break_twins(twins: &mut Vec<Twin>, broken: Vec<(usize, String)>) {
    for (i, why) in broken.into_iter().rev() {
        let twin = twins.remove(i);
        if let Some(cache) = twin.cache.upgrade() {
            feed::apply(&cache, Feed::Skipped);
        }
        (twin.broken)(&why);
    }
}

#[cfg(test)]
mod tests;
