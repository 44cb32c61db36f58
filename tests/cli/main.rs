//! The `kubeplex` binary as an operator runs it (`CARGO_BIN_EXE_kubeplex`), one test binary:
//! configuration checks, the first minute (`kubeplex demo` beside a cluster, listeners that
//! cannot bind, logs to a pipe), a rolling update's SIGTERM, and what `deploy/` promises about
//! it. Each module is one former `tests/*.rs` file.

mod cli_config;
mod cli_first_minute;
mod cli_shutdown;
mod deploy_metrics;
