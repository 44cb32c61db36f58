#![forbid(unsafe_code)]
//! The Kubernetes wire: formats and rules that both the proxy and the fake apiserver follow.
//! Nothing here does I/O.

pub mod codec;
pub mod continue_token;
pub mod gojson;
pub mod gotime;
pub mod groups;
pub mod gzip;
pub mod list_watch;
pub mod meta;
pub mod names;
pub mod negotiate;
pub mod pod;
pub mod proto;
pub mod request;
pub mod resource;
pub mod selector;
pub mod status;
pub mod table;
