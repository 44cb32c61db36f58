//! One event of a watch stream, as the reflector reads it (`wire::list_watch`): ADDED,
//! MODIFIED and DELETED yielded as changes — or, during a streaming list, ADDED collected as
//! its state until the initial-events-end bookmark; BOOKMARK moves the RV; an ERROR event is a
//! [`ReflectError`] (410: relist).

use std::sync::atomic::Ordering;

use super::error::ReflectError;
use super::Reflector;
use crate::cache::resource::EventKind;
use crate::cache::CachedObject;
use crate::live::feed::Feed;
use crate::wire::list_watch;
use crate::wire::resource::Encoding;

impl<F: Fn(Feed) + Send + Sync> Reflector<F> {
    /// Yields one event (a JSON line or a protobuf frame); returns the RV it moves to (0 for
    /// an initial event or a skipped object).
    pub(super) fn event(&self, frame: &[u8], initial: &mut Initial) -> Result<u64, ReflectError> {
        let list_watch::WatchEvent { event_type, object } =
            list_watch::parse_watch_event(self.encoding, frame).map_err(ReflectError::Decode)?;
        let kind = match event_type.as_str() {
            "ADDED" => EventKind::Added,
            "MODIFIED" => EventKind::Modified,
            "DELETED" => EventKind::Deleted,
            "BOOKMARK" => {
                let rv = list_watch::object_resource_version(self.encoding, &object)
                    .map_err(ReflectError::Decode)?;
                match initial.take() {
                    Some(objects) if list_watch::is_initial_events_end(self.encoding, &object) => {
                        // Not whole if an initial event was skipped.
                        let whole = self.whole.load(Ordering::Acquire);
                        (self.feed)(Feed::Loaded { objects, rv, whole });
                    }
                    // Bookmarks before the end of the initial events only move the RV.
                    Some(objects) => *initial = Some(objects),
                    None => (self.feed)(Feed::Bookmark(rv)),
                }
                return Ok(rv);
            }
            "ERROR" => return Err(error_event_status(self.encoding, &object)),
            other => {
                return Err(ReflectError::Decode(format!("unknown watch event type {other:?}")))
            }
        };
        // A skipped object stops the cache from answering (everything passes through) at
        // once, until a relist loads it completely.
        let obj = match CachedObject::from_watch_object(&self.info, self.encoding, object) {
            Ok(o) => o,
            Err(e) => {
                self.skipped(&e);
                (self.feed)(Feed::Skipped);
                return Ok(0);
            }
        };
        let rv = obj.resource_version;
        match initial {
            // Initial events carry each object's own RV, not the list's.
            Some(objects) if kind == EventKind::Added => {
                objects.push(obj);
                return Ok(0);
            }
            Some(_) => {
                return Err(ReflectError::Decode(format!(
                    "{event_type} before the initial events ended"
                )))
            }
            None => (self.feed)(Feed::Event(kind, obj)),
        }
        Ok(rv)
    }
}

/// The objects of a streaming list collected so far; `None` once its state is complete.
pub(super) type Initial = Option<Vec<CachedObject>>;

/// The error an upstream ERROR event stands for: 410 means relist, anything else a retry.
fn error_event_status(encoding: Encoding, object: &[u8]) -> ReflectError {
    match list_watch::error_code(encoding, object) {
        Some(410) => ReflectError::Gone,
        Some(c) => ReflectError::Status {
            status: u16::try_from(c).unwrap_or(500),
            message: "ERROR watch event".into(),
        },
        None => ReflectError::Decode("ERROR watch event without a Status code".into()),
    }
}
