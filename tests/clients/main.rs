//! Real clients, unchanged, against the fake apiserver and through kubeplex, one test binary:
//! kube-rs (lists, gets, watcher and reflector), kubectl (gets, watches, writes) and client-go
//! informers (`informer-check`). Each module is one former `tests/*.rs` file.

mod informer_check;
mod kube_rs;
mod kube_rs_watch;
mod kubectl;
mod proxy_kubectl;
mod proxy_kubectl_watch;
