//! The lifecycle of a custom resource's CRD, as kube-apiserver 1.36 shows it to clients
//! (captured by `scripts/realcluster/crd-capture.py`: tests/fixtures/realcluster/custom/
//! `lifecycle.*`). The sim's custom resources (`discovery::builtin`'s `custom` entries) are
//! installed when it starts; these withdraw, restore and restart them.
//!
//! | what happens to the CRD | what clients see (the real apiserver) |
//! |---|---|
//! | deleted | a DELETED event for each object (the CRD's finalizer deletes them), the watch ends (~2 s later), then `404 page not found` for every path, and discovery no longer lists it |
//! | its version no longer served | no event, the watch ends (~2 s), `404 page not found` at once; the objects stay stored |
//! | its storage version changed | no event, the watch ends (~2 s), every request `429 storage is (re)initializing` for ~0.1 s |
//! | a version added (served again) | as any change of its spec: the storage version's row; then the version's paths answer |
//!
//! The sim ends the watches at once where the real one takes ~2 s: a client must cope with
//! either, and sooner is no kinder to it.

use std::time::Duration;

use crate::wire::status::Status;
use crate::{write, Sim};

/// How long a CRD's storage answers `429 storage is (re)initializing` after its spec changed:
/// ~0.1 s on kube-apiserver 1.36 (lifecycle.storage.reads).
pub const STORAGE_REINITIALIZING: Duration = Duration::from_millis(100);

impl Sim {
    /// Deletes the CRD of the custom resource `group`/`resource`: every object is deleted (a
    /// DELETED event each, each at its own resourceVersion), then the resource is withdrawn —
    /// its watches end, its paths answer `404 page not found`, discovery drops it. Returns how
    /// many objects were deleted.
    pub fn delete_custom_resource_definition(
        &self,
        group: &str,
        resource: &str,
    ) -> Result<usize, Status> {
        let kind = self.custom_kind(group, resource)?;
        let objects: Vec<_> = match self.state.store.snapshot(&kind, None) {
            Ok((_, items)) => items.values().map(|o| o.value.clone()).collect(),
            Err(_) => Vec::new(),
        };
        for o in &objects {
            let namespace = o.pointer("/metadata/namespace").and_then(|v| v.as_str());
            let name = o.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or_default();
            write::store_delete(&self.state, &kind, namespace.unwrap_or_default(), name, None)?;
        }
        self.state.served.write().unwrap_or_else(|p| p.into_inner()).withdraw(group, resource);
        self.state.store.drop_watchers_of(&kind);
        Ok(objects.len())
    }

    /// Creates the CRD of `group`/`resource` again (or serves its version again): served
    /// from now on, with whatever is stored (nothing, after a deletion).
    pub fn create_custom_resource_definition(
        &self,
        group: &str,
        resource: &str,
    ) -> Result<(), Status> {
        self.custom_kind(group, resource)?;
        self.state.served.write().unwrap_or_else(|p| p.into_inner()).restore(group, resource);
        Ok(())
    }

    /// Marks the custom resource's version served or not (`spec.versions[].served`). Not
    /// served: its watches end, its paths answer `404 page not found`, discovery drops it; its
    /// objects stay stored and are served again with the version.
    pub fn serve_custom_resource(
        &self,
        group: &str,
        resource: &str,
        served: bool,
    ) -> Result<(), Status> {
        let kind = self.custom_kind(group, resource)?;
        let mut set = self.state.served.write().unwrap_or_else(|p| p.into_inner());
        if served {
            set.restore(group, resource);
        } else {
            set.withdraw(group, resource);
            drop(set);
            self.state.store.drop_watchers_of(&kind);
        }
        Ok(())
    }

    /// A version of the custom resource added to what its CRD serves (`served: true`), or taken
    /// from it (`served: false`; `serve_custom_resource` takes the resource's only version).
    /// Any change of a CRD's spec sets its storage up again, for every version: watches end
    /// with no event and requests get `429` for a moment (`reinitialize_custom_resource_storage`,
    /// lifecycle.added.*); the version's paths answer from then on, or `404 page not found`.
    pub fn serve_custom_resource_version(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        served: bool,
    ) -> Result<(), Status> {
        self.custom_kind(group, resource)?;
        if self.state.registry.at(group, version, resource).is_none() {
            let gvr = format!("{group}/{version}/{resource}");
            return Err(Status::bad_request(format!("the sim has no version {gvr}")));
        }
        let mut set = self.state.served.write().unwrap_or_else(|p| p.into_inner());
        set.serve_version(group, version, resource, served);
        drop(set);
        self.reinitialize_custom_resource_storage(group, resource, STORAGE_REINITIALIZING)
    }

    /// The CRD's storage version (or schema) changed: the resource's storage is set up again —
    /// its watches end with no event, and every request of it is answered
    /// `429 storage is (re)initializing` for `window` (~0.1 s on the real apiserver).
    pub fn reinitialize_custom_resource_storage(
        &self,
        group: &str,
        resource: &str,
        window: Duration,
    ) -> Result<(), Status> {
        let kind = self.custom_kind(group, resource)?;
        let until = std::time::Instant::now() + window;
        self.state.faults.storage_initializing.lock().unwrap_or_else(|p| p.into_inner()).push((
            group.to_string(),
            resource.to_string(),
            until,
        ));
        self.state.store.drop_watchers_of(&kind);
        Ok(())
    }

    /// The registry's kind of a custom resource, served or not.
    fn custom_kind(
        &self,
        group: &str,
        resource: &str,
    ) -> Result<std::sync::Arc<crate::kinds::Kind>, Status> {
        let kind = self.state.registry.get(group, resource).filter(|k| k.custom);
        kind.cloned().ok_or_else(|| {
            Status::bad_request(format!("{resource}.{group} is not a custom resource of the sim"))
        })
    }
}
