//! Which cache answers a read (the module's "What a cache may cost"): a running one whose scope
//! contains it, the narrowest first; a declared scope that contains it; else one of exactly
//! the read's scope, started for it — never for a read of one named object, and at most
//! [`MAX_SCOPES_PER_RESOURCE`] per resource and encoding.

use std::sync::Arc;

use super::{key_of, Caches, Live, MAX_SCOPES_PER_RESOURCE};
use crate::cache::{Encoding, Scope};
use crate::live::reflector::FirstLoad;
use crate::wire::resource::ResourceInfo;

impl Caches {
    /// The scope a configured cache of `info` has when its spec names none: the whole
    /// resource, or the namespace caches are limited to (`cacheNamespace`).
    pub fn default_scope(&self, info: &ResourceInfo) -> Scope {
        match (&self.config.namespace, info.namespaced) {
            (Some(ns), true) => Scope::new(Some(ns), None, None),
            _ => Scope::everything(),
        }
    }

    /// The cache that answers a read of scope `read` in `encoding` (module documentation,
    /// "What a cache may cost"): the narrowest running cache whose scope contains it; else a
    /// new cache of exactly `read`, unless the read names one object or the resource has
    /// [`MAX_SCOPES_PER_RESOURCE`] caches. `None`: the read passes through.
    /// `first`: how a cache started for it loads — as the read would ask directly
    /// ([`FirstLoad`]).
    pub fn for_read(
        &self,
        info: &Arc<ResourceInfo>,
        encoding: Encoding,
        read: &Scope,
        first: FirstLoad,
    ) -> Option<Arc<Live>> {
        if let Some(live) = self.containing(info, encoding, read) {
            return Some(live);
        }
        if let Some(source) = self.source_for(info, encoding, read) {
            // Rendered from a running cache of the other encoding: no upstream cost, so
            // whatever the read (a named one too), and that cache's scope.
            return self.start(info, encoding, source.scope().clone(), FirstLoad::Stream);
        }
        if let Some(declared) = self.declared(info, encoding, read) {
            // Wider than the read: its answer cannot be the cache's first load.
            return self.start(info, encoding, declared, first.unfed());
        }
        if read.name().is_some() || self.scopes_of(info, encoding) >= MAX_SCOPES_PER_RESOURCE {
            return None;
        }
        self.start(info, encoding, read.clone(), first)
    }

    /// Whether a named read (which starts no cache of its own) has a cache to be served by: a
    /// running one that contains it, or a declared scope that does.
    pub fn holds_named(&self, info: &ResourceInfo, encoding: Encoding, read: &Scope) -> bool {
        self.declared(info, encoding, read).is_some()
            || self.containing(info, encoding, read).is_some()
            || self.source_for(info, encoding, read).is_some()
    }

    /// The narrowest declared scope (`cacheScopes`) of `info` in `encoding` that contains
    /// `read`.
    fn declared(&self, info: &ResourceInfo, encoding: Encoding, read: &Scope) -> Option<Scope> {
        let namespace = self.config.namespace.as_deref().filter(|_| info.namespaced);
        self.declared
            .iter()
            .filter(|(s, _)| {
                (s.group.as_str(), s.version.as_str(), s.resource.as_str(), s.encoding)
                    == (
                        info.group.as_str(),
                        info.version.as_str(),
                        info.resource.as_str(),
                        encoding,
                    )
            })
            // Within the namespace caches are limited to, if any.
            .filter(|(_, scope)| {
                scope.contains(read) && namespace.is_none_or(|ns| read.namespace() == Some(ns))
            })
            .max_by_key(|(_, scope)| scope.terms())
            .map(|(_, scope)| match namespace {
                Some(ns) => scope.clone().within(ns),
                None => scope.clone(),
            })
    }

    /// The narrowest running cache of `info` in `encoding` whose scope contains `read`.
    pub fn containing(
        &self,
        info: &ResourceInfo,
        encoding: Encoding,
        read: &Scope,
    ) -> Option<Arc<Live>> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let live = map
            .iter()
            .filter(|((g, v, r, e, scope), _)| {
                (g, v, r, *e) == (&info.group, &info.version, &info.resource, encoding)
                    && scope.contains(read)
            })
            // The narrowest: fewest objects to filter, and the one the read is most likely of.
            .min_by_key(|(_, live)| live.object_count())
            .map(|(_, live)| live.clone())?;
        live.touch();
        Some(live)
    }

    /// How many caches of `info` in `encoding` run.
    fn scopes_of(&self, info: &ResourceInfo, encoding: Encoding) -> usize {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        Self::same_resource(&map, &key_of(info, encoding, Scope::everything()))
    }
}
