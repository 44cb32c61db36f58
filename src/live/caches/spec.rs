//! A cache named in the configuration (`caches`, `cacheScopes`): resource, encoding and scope.

use crate::cache::Scope;
use crate::wire::resource::ResourceInfo;

/// A cache named in the configuration: `resource` (core/v1) or `group/version/resource`,
/// optionally followed by `:protobuf` or `:json` (the default), and optionally by its scope's
/// selectors as a list's query carries them: `?fieldSelector=…&labelSelector=…` (a node's own
/// pods: `pods:protobuf?fieldSelector=spec.nodeName=NODE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSpec {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub encoding: crate::cache::Encoding,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
}

impl CacheSpec {
    /// Reads a spec; the error says what is wrong with it (a misspelled encoding or a path of
    /// the wrong shape is refused at start-up, not found out while readiness waits forever).
    pub fn parse(spec: &str) -> Result<CacheSpec, String> {
        use crate::cache::Encoding;
        let (spec, query) = match spec.split_once('?') {
            Some((s, q)) => (s, Some(q)),
            None => (spec, None),
        };
        let (path, encoding) = match spec.split_once(':') {
            Some((p, "protobuf")) => (p, Encoding::Protobuf),
            Some((p, "json")) => (p, Encoding::Json),
            Some((_, other)) => {
                return Err(format!("unknown encoding {other:?} (protobuf or json)"));
            }
            None => (spec, Encoding::Json),
        };
        let (group, version, resource) = match path.split('/').collect::<Vec<_>>().as_slice() {
            [r] => ("", "v1", *r),
            [g, v, r] => (*g, *v, *r),
            _ => return Err("expected RESOURCE or GROUP/VERSION/RESOURCE".to_string()),
        };
        // Resource names are lower-case DNS labels, groups DNS subdomains, versions like
        // v1beta1: anything else cannot name a resource on any apiserver.
        let label = |s: &str, dots: bool| {
            !s.is_empty()
                && s.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || dots && b == b'.'
                })
        };
        if !label(resource, false) {
            return Err(format!("{resource:?} is not a resource name (lower case, like pods)"));
        }
        if !group.is_empty() && !label(group, true) {
            return Err(format!("{group:?} is not an API group (like apps)"));
        }
        if !label(version, false) || !version.starts_with('v') {
            return Err(format!("{version:?} is not an API version (like v1)"));
        }
        let (mut label_selector, mut field_selector) = (None, None);
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let slot = match key.as_ref() {
                "labelSelector" => &mut label_selector,
                "fieldSelector" => &mut field_selector,
                other => {
                    return Err(format!(
                        "unknown parameter {other:?} after '?' (labelSelector or fieldSelector)"
                    ))
                }
            };
            if slot.replace(value.into_owned()).is_some() {
                return Err(format!("{key} given twice"));
            }
        }
        // The selectors as the apiserver would read them: one it would refuse is refused here.
        let scope = Scope::parse(
            group,
            resource,
            None,
            label_selector.as_deref(),
            field_selector.as_deref(),
        )
        .map_err(|e| {
            format!("{e} (in --cache and KUBEPLEX_CACHES, write a selector's commas as %2C)")
        })?;
        Ok(CacheSpec {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            encoding,
            label_selector: scope.label_selector(),
            field_selector: scope.field_selector(),
        })
    }

    /// The cache's scope, within `namespace` (the one caches are limited to) for a namespaced
    /// resource.
    pub fn scope(&self, info: &ResourceInfo, namespace: Option<&str>) -> Scope {
        let namespace = namespace.filter(|_| info.namespaced);
        Scope::parse(
            &self.group,
            &self.resource,
            namespace,
            self.label_selector.as_deref(),
            self.field_selector.as_deref(),
        )
        .unwrap_or_else(|_| Scope::new(namespace, None, None))
    }
}
