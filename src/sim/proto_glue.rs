//! Protobuf responses, assembled from each object's stored protobuf message.

use std::sync::Arc;

use super::encode::ListMeta;
use super::kinds::Kind;
use super::store::Obj;
use crate::wire::status::Status;

fn unavailable() -> Status {
    Status::not_acceptable("protobuf is not available yet")
}

pub fn object(_k: &Kind, _o: &Obj) -> Result<Vec<u8>, Status> {
    Err(unavailable())
}

pub fn list(_k: &Kind, _i: &[Arc<Obj>], _m: &ListMeta) -> Result<Vec<u8>, Status> {
    Err(unavailable())
}

pub fn watch_event(_k: &Kind, _t: &str, _o: &Obj) -> Result<Vec<u8>, Status> {
    Err(unavailable())
}

pub fn bookmark(_k: &Kind, _rv: u64, _end: bool) -> Vec<u8> {
    Vec::new()
}

pub fn error_event(_s: &Status) -> Vec<u8> {
    Vec::new()
}
