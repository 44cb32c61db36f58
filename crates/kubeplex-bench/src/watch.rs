//! `watch`: W concurrent watchers while a writer changes the seeded objects at E events/s.
//!
//! The writer stamps each change with the wall-clock time (annotation `kubeplex-bench/ts`,
//! Unix nanoseconds); a watcher takes the delay from that stamp to the moment the event's line
//! is read as the delivery latency. Every watcher also counts the writer's events it should see
//! (by its field selector) and the ones it did: the difference is lost events, which must be 0.
//! Lines are scanned, not parsed, so thousands of watchers in this process stay cheap.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::Method;
use http_body_util::combinators::BoxBody;
use http_body_util::BodyExt;
use serde::Serialize;
use serde_json::json;

use super::hist::{Histogram, Summary};
use super::target::{cpu_seconds, cpu_split, rss_bytes, Target};

const TS_KEY: &str = "kubeplex-bench/ts";

#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// `/api/v1/namespaces/NS/configmaps` (or pods).
    pub collection: String,
    /// Names of the objects the writer changes, in turn.
    pub names: Vec<String>,
    pub watchers: usize,
    pub rate: f64,
    pub duration: Duration,
    /// `metadata.name=X` or `spec.nodeName=node-K`; which of the writer's changes a watcher
    /// should see is worked out from it (pods `bench-i` are on `node-(i % nodes)`).
    pub field_selector: Option<String>,
    pub nodes: usize,
    /// The measured server's process, for its RSS.
    pub pid: Option<u32>,
    /// How long to wait after the writer stops for the last events.
    pub settle: Duration,
    /// Multiplex the watchers over this many HTTP/2 connections (prior knowledge, plain
    /// HTTP) instead of one HTTP/1.1 connection each.
    pub h2_connections: Option<usize>,
}

/// How a watcher reaches the server: a connection of its own from the client's pool, or a
/// stream on a shared HTTP/2 connection.
#[derive(Clone)]
enum Conn {
    Own(Arc<Target>),
    Shared {
        sender: hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
        base: String,
    },
}

impl Conn {
    async fn watch(
        &self,
        path: &str,
    ) -> anyhow::Result<http::Response<BoxBody<bytes::Bytes, hyper::Error>>> {
        match self {
            Conn::Own(target) => Ok(target
                .send(Method::GET, path, &[("Accept", "application/json")], None)
                .await?
                .map(BodyExt::boxed)),
            Conn::Shared { sender, base } => {
                let req = http::Request::get(format!("{base}{path}"))
                    .header("accept", "application/json")
                    .body(http_body_util::Empty::new())?;
                let mut sender = sender.clone();
                sender.ready().await?;
                Ok(sender.send_request(req).await?.map(BodyExt::boxed))
            }
        }
    }
}

/// `n` HTTP/2 connections to the target (plain HTTP, prior knowledge).
async fn h2_connections(target: &Target, n: usize) -> anyhow::Result<Vec<Conn>> {
    let authority = target.url.split("://").nth(1).unwrap_or("").split('/').next().unwrap_or("");
    anyhow::ensure!(
        target.url.starts_with("http://"),
        "--h2-connections needs a plain http:// server"
    );
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let tcp = tokio::net::TcpStream::connect(authority).await?;
        let _ = tcp.set_nodelay(true);
        let (sender, conn) =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .handshake(hyper_util::rt::TokioIo::new(tcp))
                .await?;
        tokio::spawn(conn);
        conns.push(Conn::Shared { sender, base: target.url.clone() });
    }
    Ok(conns)
}

#[derive(Debug, Clone, Serialize)]
pub struct WatchReport {
    pub target: String,
    pub watchers: usize,
    pub watchers_failed: usize,
    pub events_written: u64,
    pub write_rate: f64,
    pub events_expected: u64,
    pub events_received: u64,
    pub events_lost: u64,
    /// Events whose resourceVersion was not above the previous one on the same watch.
    pub out_of_order: u64,
    /// Streams the server ended early; the watcher resumed from its last resourceVersion.
    pub watch_ends: u64,
    /// Resumes refused with 410 Expired.
    pub watch_expired: u64,
    pub latency: Summary,
    pub rss_before_bytes: Option<u64>,
    pub rss_watching_bytes: Option<u64>,
    pub rss_per_watcher_bytes: Option<f64>,
    /// CPU the measured server used while the writer ran and the events were delivered.
    pub target_cpu_seconds: Option<f64>,
    /// The kernel's part of `target_cpu_seconds` (socket writes, TCP, wakeups).
    pub target_system_cpu_seconds: Option<f64>,
    /// CPU this tool (the watchers and the writer) used meanwhile: on a shared machine it
    /// competes with the target.
    pub bench_cpu_seconds: Option<f64>,
    pub seconds: f64,
}

impl std::fmt::Display for WatchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "watch against {}: {} watchers ({} failed), {} events written at {:.1}/s",
            self.target, self.watchers, self.watchers_failed, self.events_written, self.write_rate
        )?;
        writeln!(
            f,
            "  delivered {} of {} expected: {} lost, {} out of order; {} streams ended early and resumed, {} resumes expired",
            self.events_received,
            self.events_expected,
            self.events_lost,
            self.out_of_order,
            self.watch_ends,
            self.watch_expired
        )?;
        write!(f, "  latency {}", self.latency)?;
        if let (Some(target), Some(bench)) = (self.target_cpu_seconds, self.bench_cpu_seconds) {
            write!(
                f,
                "\n  CPU over {:.1} s: target {target:.1} s (kernel {:.1} s), this tool {bench:.1} s",
                self.seconds,
                self.target_system_cpu_seconds.unwrap_or(0.0)
            )?;
        }
        if let (Some(before), Some(during)) = (self.rss_before_bytes, self.rss_watching_bytes) {
            write!(
                f,
                "\n  target RSS {:.1} MiB idle, {:.1} MiB with the watchers open: {:.0} bytes per watcher",
                before as f64 / 1048576.0,
                during as f64 / 1048576.0,
                self.rss_per_watcher_bytes.unwrap_or(0.0)
            )?;
        }
        Ok(())
    }
}

/// Which of the writer's objects a watcher with this field selector sees; `None` when it
/// cannot be told (then nothing is counted as lost).
fn selection(spec: &WatchSpec) -> Option<Vec<bool>> {
    let Some(selector) = &spec.field_selector else {
        return Some(vec![true; spec.names.len()]);
    };
    if let Some(name) = selector.strip_prefix("metadata.name=") {
        return Some(spec.names.iter().map(|n| n == name).collect());
    }
    let node = selector.strip_prefix("spec.nodeName=")?;
    Some(
        spec.names
            .iter()
            .map(|n| {
                let i: Option<usize> = n.strip_prefix("bench-").and_then(|i| i.parse().ok());
                i.is_some_and(|i| format!("node-{}", i % spec.nodes.max(1)) == node)
            })
            .collect(),
    )
}

#[derive(Default)]
struct Tally {
    hist: Histogram,
    received: u64,
    out_of_order: u64,
    /// Streams the server ended before the run did (the watcher then resumes from its RV).
    ends: u64,
    /// Resumes refused with 410 Expired (the watcher then stops: a client would relist).
    expired: u64,
}

/// Runs the watchers against `target` while `writer` (the same server, or the upstream behind
/// it, where writes land in a real cluster) takes the changes.
pub async fn run(
    target: Arc<Target>,
    writer: Arc<Target>,
    spec: WatchSpec,
) -> anyhow::Result<WatchReport> {
    anyhow::ensure!(!spec.names.is_empty(), "no objects to write: seed first");
    let rss_before = spec.pid.and_then(rss_bytes);
    let rv = target.current_rv(&spec.collection).await?;
    let start_rv: u64 = rv.parse().unwrap_or(0);
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("watch", "1").append_pair("allowWatchBookmarks", "true").append_pair(
        "timeoutSeconds",
        &(spec.duration + spec.settle).as_secs().saturating_add(60).to_string(),
    );
    if let Some(s) = &spec.field_selector {
        query.append_pair("fieldSelector", s);
    }
    // The resourceVersion goes last: a resumed watch changes only it.
    let path = format!("{}?{}&resourceVersion=", spec.collection, query.finish());
    let tally = Arc::new(Mutex::new(Tally::default()));
    let connected = Arc::new(AtomicUsize::new(0));
    // Events received so far by all watchers (their tallies are merged when they end).
    let live = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let deadline = Instant::now() + spec.duration + spec.settle + Duration::from_secs(120);
    let shared = match spec.h2_connections {
        Some(n) => h2_connections(&target, n).await?,
        None => Vec::new(),
    };
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..spec.watchers {
        let conn = match shared.get(w % shared.len().max(1)) {
            Some(c) => c.clone(),
            None => Conn::Own(target.clone()),
        };
        let (path, tally, connected, failed, stop, live) = (
            path.clone(),
            tally.clone(),
            connected.clone(),
            failed.clone(),
            stop.clone(),
            live.clone(),
        );
        tasks.spawn(async move {
            let counters = Counters { connected: &connected, failed: &failed, received: &live };
            let local = watch_one(&conn, &path, start_rv, counters, &stop, deadline).await;
            let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
            t.hist.merge(&local.hist);
            t.received += local.received;
            t.out_of_order += local.out_of_order;
            t.ends += local.ends;
            t.expired += local.expired;
        });
        // Open connections in waves rather than all at once.
        if tasks.len() % 200 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let open = super::target::eventually(Duration::from_secs(60), || {
        connected.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) >= spec.watchers
    })
    .await;
    anyhow::ensure!(open, "watchers did not all connect within 60 s");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_watching = spec.pid.and_then(rss_bytes);

    let cpu_before = (spec.pid.and_then(cpu_split), cpu_seconds(std::process::id()));
    let writing = Instant::now();
    let (written, write_rate) = write(&writer, &spec).await?;
    let selected = selection(&spec);
    let per_watcher: Option<u64> = selected.as_ref().map(|sel| {
        written.iter().filter(|&&i| sel.get(i).copied().unwrap_or(false)).count() as u64
    });
    let watching = (spec.watchers - failed.load(Ordering::Relaxed)) as u64;
    let expected = per_watcher.map(|n| n * watching);
    // Wait for the last events, then end the watches.
    let settle_until = Instant::now() + spec.settle;
    while Instant::now() < settle_until {
        let received = live.load(Ordering::Relaxed);
        if expected.is_some_and(|e| received >= e) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        if tasks.is_empty() {
            break;
        }
    }
    let cpu_after = (spec.pid.and_then(cpu_split), cpu_seconds(std::process::id()));
    let seconds = writing.elapsed().as_secs_f64();
    // Give the in-flight tallies a moment, then stop every watcher.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.notify_waiters();
    while tasks.join_next().await.is_some() {}
    let t = tally.lock().unwrap_or_else(|p| p.into_inner());
    let expected = expected.unwrap_or(t.received);
    Ok(WatchReport {
        target: target.url.clone(),
        watchers: spec.watchers,
        watchers_failed: failed.load(Ordering::Relaxed),
        events_written: written.len() as u64,
        write_rate,
        events_expected: expected,
        events_received: t.received,
        events_lost: expected.saturating_sub(t.received),
        out_of_order: t.out_of_order,
        watch_ends: t.ends,
        watch_expired: t.expired,
        target_cpu_seconds: cpu_before.0.zip(cpu_after.0).map(|(b, a)| (a.0 + a.1) - (b.0 + b.1)),
        target_system_cpu_seconds: cpu_before.0.zip(cpu_after.0).map(|(b, a)| a.1 - b.1),
        bench_cpu_seconds: cpu_before.1.zip(cpu_after.1).map(|(b, a)| a - b),
        seconds,
        latency: t.hist.summary(),
        rss_before_bytes: rss_before,
        rss_watching_bytes: rss_watching,
        rss_per_watcher_bytes: match (rss_before, rss_watching) {
            (Some(b), Some(w)) if spec.watchers > 0 => {
                Some((w as f64 - b as f64) / spec.watchers as f64)
            }
            _ => None,
        },
    })
}

/// Changes the objects in turn at the spec's rate (up to 32 writes in flight, so a slow write
/// does not lower the rate); returns which object each change touched, and the rate achieved.
async fn write(writer: &Arc<Target>, spec: &WatchSpec) -> anyhow::Result<(Vec<usize>, f64)> {
    let started = Instant::now();
    let total = (spec.rate * spec.duration.as_secs_f64()).round().max(1.0) as u64;
    let period = Duration::from_secs_f64(1.0 / spec.rate.max(0.001));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let in_flight = Arc::new(tokio::sync::Semaphore::new(32));
    let errors = Arc::new(AtomicU64::new(0));
    let mut writes = tokio::task::JoinSet::new();
    for n in 0..total {
        tick.tick().await;
        let permit = in_flight.clone().acquire_owned().await?;
        let i = (n as usize) % spec.names.len();
        let path = format!("{}/{}", spec.collection, spec.names[i]);
        let (writer, errors) = (writer.clone(), errors.clone());
        writes.spawn(async move {
            let _permit = permit;
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
            let patch = json!({"metadata": {"annotations": {TS_KEY: now.to_string()}}});
            let body = serde_json::to_vec(&patch).ok()?;
            let ct = [("Content-Type", "application/merge-patch+json")];
            match writer.fetch(Method::PATCH, &path, &ct, Some(body)).await {
                Ok((status, _)) if status.is_success() => Some(i),
                other => {
                    if errors.fetch_add(1, Ordering::Relaxed) == 0 {
                        tracing::warn!(result = ?other.map(|(s, _)| s), "write failed");
                    }
                    None
                }
            }
        });
    }
    let mut written = Vec::with_capacity(total as usize);
    while let Some(done) = writes.join_next().await {
        written.extend(done.ok().flatten());
    }
    let rate = written.len() as f64 / started.elapsed().as_secs_f64();
    Ok((written, rate))
}

/// One watcher, as a client behaves: when the server ends the stream it watches again from the
/// last resourceVersion it saw (event or bookmark).
/// Shared counters a watcher updates as it goes.
struct Counters<'a> {
    connected: &'a AtomicUsize,
    failed: &'a AtomicUsize,
    received: &'a AtomicU64,
}

async fn watch_one(
    conn: &Conn,
    path_prefix: &str,
    start_rv: u64,
    counters: Counters<'_>,
    stop: &tokio::sync::Notify,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let stopped = stop.notified();
    tokio::pin!(stopped);
    let mut last_rv = start_rv;
    let mut first = true;
    while Instant::now() < deadline {
        let path = format!("{path_prefix}{last_rv}");
        let resp = tokio::select! {
            r = conn.watch(&path) => r,
            _ = &mut stopped => return tally,
        };
        let resp = match resp {
            Ok(r) if r.status().is_success() => r,
            other => {
                if let Err(e) = other.map(|r| r.status()) {
                    tracing::debug!(error = %e, "watch failed");
                }
                if first {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    return tally;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if std::mem::take(&mut first) {
            counters.connected.fetch_add(1, Ordering::Relaxed);
        }
        let mut body = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = &mut stopped => return tally,
                _ = tokio::time::sleep_until(deadline.into()) => return tally,
            };
            let Some(Ok(frame)) = frame else {
                tally.ends += 1;
                break;
            };
            let Ok(data) = frame.into_data() else { continue };
            buf.extend_from_slice(&data);
            let mut start = 0;
            while let Some(pos) = buf[start..].iter().position(|b| *b == b'\n') {
                let line = &buf[start..start + pos];
                start += pos + 1;
                if line.starts_with(b"{\"type\":\"ERROR\"") {
                    tally.expired += 1;
                    return tally;
                }
                let rv = string_after(line, b"\"resourceVersion\":\"").and_then(|s| s.parse().ok());
                if line.starts_with(b"{\"type\":\"BOOKMARK\"") {
                    last_rv = last_rv.max(rv.unwrap_or(0));
                    continue;
                }
                let Some(ts) = string_after(line, b"\"kubeplex-bench/ts\":\"") else { continue };
                let now =
                    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
                if let Ok(ts) = ts.parse::<u128>() {
                    tally.hist.record(Duration::from_nanos(now.saturating_sub(ts) as u64));
                }
                tally.received += 1;
                counters.received.fetch_add(1, Ordering::Relaxed);
                if let Some(rv) = rv {
                    if rv <= last_rv {
                        tally.out_of_order += 1;
                    }
                    last_rv = last_rv.max(rv);
                }
            }
            buf.drain(..start);
        }
    }
    tally
}

/// The JSON string value that follows `key` in `line` (no escapes expected).
fn string_after<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let at = line.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = line.get(at..)?;
    let end = rest.iter().position(|b| *b == b'"')?;
    std::str::from_utf8(rest.get(..end)?).ok()
}

#[cfg(test)]
mod tests;
