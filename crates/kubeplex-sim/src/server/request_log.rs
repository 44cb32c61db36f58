//! Every request the fake apiserver receives, one line each, when `KUBEPLEX_SIM_REQUEST_LOG`
//! names a file: the apiserver's audit log at its `Metadata` level reduced to what a cost
//! analysis needs (when, verb, URI, who), for reading which requests a tier sent (the
//! `kubeplex-bench nodes` figures per request kind). Off unless set; nothing else reads it.

use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

struct Log {
    start: Instant,
    file: Mutex<std::io::BufWriter<std::fs::File>>,
}

fn log() -> Option<&'static Log> {
    static LOG: OnceLock<Option<Log>> = OnceLock::new();
    LOG.get_or_init(|| {
        let path = std::env::var_os("KUBEPLEX_SIM_REQUEST_LOG")?;
        let file = std::fs::File::create(path).ok()?;
        Some(Log { start: Instant::now(), file: Mutex::new(std::io::BufWriter::new(file)) })
    })
    .as_ref()
}

pub(crate) fn record<B>(req: &http::Request<B>) {
    let Some(log) = log() else { return };
    let line = format!(
        "{:.3} {} {} {}\n",
        log.start.elapsed().as_secs_f64(),
        req.method(),
        req.uri(),
        caller(req.headers()),
    );
    write(log, &line);
}

/// A SubjectAccessReview's spec, on a line of its own after its POST: whose access was
/// reviewed, for what (`scripts/request-log.py --reviews`).
pub(crate) fn review(caller: Option<&str>, body: &[u8]) {
    let (Some(log), Some(caller)) = (log(), caller) else { return };
    let spec = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("spec").cloned())
        .unwrap_or_default();
    let line = format!("{:.3} REVIEW {} {}\n", log.start.elapsed().as_secs_f64(), spec, caller);
    write(log, &line);
}

/// [`caller`], when requests are logged.
pub(crate) fn caller_if_logging(headers: &http::HeaderMap) -> Option<String> {
    log().map(|_| caller(headers))
}

fn caller(headers: &http::HeaderMap) -> String {
    let header =
        |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
    let who = match header("authorization") {
        a if a.starts_with("Bearer ") => a.chars().take(7 + 24).collect::<String>(),
        a => a,
    };
    format!(
        "who={} as={} ua={}",
        who.replace(' ', "_"),
        header("impersonate-user"),
        header("user-agent").replace(' ', "_"),
    )
}

fn write(log: &Log, line: &str) {
    let mut file = log.file.lock().unwrap_or_else(|p| p.into_inner());
    let _ = file.write_all(line.as_bytes());
    let _ = file.flush();
}
