//! Caches rendered from the other encoding's cache of the same resource and scope
//! (`live::mirror`): which running cache a read's cache may be rendered from, starting one, and
//! sending a resource's encoding back to a list+watch of its own when an object cannot be
//! rendered exactly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{key_of, CacheKey, Caches, Live};
use crate::cache::transcode::Transcoder;
use crate::cache::{Encoding, Scope};
use crate::live::freshness::Freshness;
use crate::live::mirror;
use crate::wire::resource::ResourceInfo;

impl Caches {
    /// The running cache of `info` in the other encoding, fed by its own reflector, that
    /// contains `read` and that a cache in `encoding` may be rendered from (`live::mirror`):
    /// the schema covers the kind and the resource does not keep a watch of its own in
    /// `encoding` ([`Caches::fall_back`]).
    pub(super) fn source_for(
        &self,
        info: &ResourceInfo,
        encoding: Encoding,
        read: &Scope,
    ) -> Option<Arc<Live>> {
        Transcoder::new(info, encoding)?;
        if self.keeps_own_watch(info, encoding) {
            return None;
        }
        self.containing(info, other(encoding), read).filter(|source| source.source.is_none())
    }

    /// Whether `info`'s caches in `encoding` list and watch on their own: one rendered from the
    /// other encoding met an object the schema cannot render ([`Caches::fall_back`]).
    fn keeps_own_watch(&self, info: &ResourceInfo, encoding: Encoding) -> bool {
        let resource = (info.group.clone(), info.version.clone(), info.resource.clone(), encoding);
        self.own_watch.lock().unwrap_or_else(|p| p.into_inner()).contains(&resource)
    }

    /// A cache of a built-in resource in `encoding` and `scope`, rendered from the running cache
    /// of the same resource and scope in the other encoding (`live::mirror`) rather than
    /// listing and watching it again: one upstream watch per resource, whatever its readers
    /// read. `None` when there is no such cache, the schema does not cover the kind, or the
    /// resource keeps a watch of its own in `encoding` ([`Caches::fall_back`]).
    pub(super) fn start_rendered(
        &self,
        info: &Arc<ResourceInfo>,
        encoding: Encoding,
        scope: &Scope,
        map: &mut HashMap<CacheKey, Arc<Live>>,
    ) -> Option<(Arc<Live>, Attach)> {
        let transcoder = Transcoder::new(info, encoding)?;
        if self.keeps_own_watch(info, encoding) {
            return None;
        }
        let from = other(encoding);
        let source_key = key_of(info, from, scope.clone());
        let source = map.get(&source_key).filter(|s| s.source.is_none())?.clone();
        let key = key_of(info, encoding, scope.clone());
        // A state of its own read back from disk at start-up (`live::disk`) is kept for a cache
        // of its own: started while the upstream cannot be reached, it serves that state, where
        // a rendered cache would wait for the source's first load (a state the source restores
        // from disk is not fed to it).
        if self.stashed.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key) {
            return None;
        }
        let cache = self.new_cache(info, encoding, scope.clone());
        // Its proofs ask only what its readers would; its metadata lists are its source's (the
        // same scope, at the same RVs), and a reload they ask for is the source's, whose load
        // it receives.
        let calls = self.upstream_metrics.for_cache(cache.label(), encoding.as_str());
        let freshness = Freshness::new(
            self.upstream_for(info, scope),
            Arc::downgrade(&cache),
            self.config.freshness,
            calls,
            self.clock.clone(),
            source.reload.clone(),
        );
        let freshness = Arc::new(freshness.sharing_lists_of(&source.freshness));
        let broken: mirror::OnBroken = {
            let (caches, key) = (self.me.clone(), key.clone());
            Box::new(move |why: &str| {
                // Told under the source's feed: the map is changed from a task of its own.
                let (caches, key, why) = (caches.clone(), key.clone(), why.to_owned());
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        if let Some(caches) = caches.upgrade() {
                            caches.fall_back(&key, &why);
                        }
                    });
                }
            })
        };
        let tasks = Mutex::new(vec![self.sweeper(&cache)]);
        tracing::info!(resource = %cache.describe(), from = from.as_str(), "cache started, rendered from the other encoding's");
        let live = Arc::new(Live {
            cache,
            freshness,
            tasks,
            feeder: Mutex::new(None),
            mirror: Arc::default(),
            reload: source.reload.clone(),
            source: Some(source_key),
        });
        map.insert(key, live.clone());
        Some((live, Attach { source, transcoder, broken }))
    }

    /// A cache rendered from another encoding's met an object the schema cannot render exactly
    /// (`why`): it is stopped (its readers were ended), and the resource's caches in its
    /// encoding keep a list+watch of their own from now on — started by the next read, or at
    /// once for a configured cache.
    fn fall_back(&self, key: &CacheKey, why: &str) {
        let resource = (key.0.clone(), key.1.clone(), key.2.clone(), key.3);
        let first = self.own_watch.lock().unwrap_or_else(|p| p.into_inner()).insert(resource);
        let (live, others) = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let rendered = map.get(key).is_some_and(|l| l.source.is_some());
            let live = if rendered { map.remove(key) } else { None };
            (live, Self::same_resource(&map, key))
        };
        let Some(live) = live else { return };
        let labels = [live.label(), key.3.as_str()];
        self.upstream_metrics.render_fallbacks.with_label_values(&labels).inc();
        if first {
            tracing::warn!(resource = %live.describe(), reason = why, "an object cannot be rendered in this encoding from the other's cache: this resource's caches in this encoding list and watch it themselves");
        }
        live.stop(others);
        if live.is_pinned() {
            let info = Arc::new(live.info().clone());
            if let Some(own) = self.get_or_start(&info, key.3, key.4.clone()) {
                own.pin();
            }
        }
    }
}

/// A cache rendered from another encoding's, still to be attached to its source's feed
/// (`live::mirror`).
pub(super) struct Attach {
    source: Arc<Live>,
    transcoder: Transcoder,
    broken: mirror::OnBroken,
}

impl Attach {
    /// Feeds `twin` from its source from now on; if the source's state is one to take over,
    /// renders it off the source's reflector task (the events meanwhile are kept for the twin,
    /// bounded) and applies it.
    pub(super) fn run(self, twin: &Live) {
        let Attach { source, transcoder, broken } = self;
        let takeover = source.mirror.attach(&source.cache, &twin.cache, transcoder.clone(), broken);
        let Some(takeover) = takeover else { return };
        let (mirror, cache) = (source.mirror.clone(), twin.cache.clone());
        let task = tokio::spawn(async move {
            let rendered = tokio::task::spawn_blocking(move || {
                (mirror::render_state(&transcoder, &takeover), takeover)
            })
            .await;
            if let Ok((state, takeover)) = rendered {
                mirror.caught_up(&cache, state, &takeover);
            }
        });
        twin.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(task);
    }
}

/// The encoding a cache in `encoding` may be rendered from (`live::mirror`).
fn other(encoding: Encoding) -> Encoding {
    match encoding {
        Encoding::Json => Encoding::Protobuf,
        Encoding::Protobuf => Encoding::Json,
    }
}
