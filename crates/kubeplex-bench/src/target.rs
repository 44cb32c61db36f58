//! The server a run measures, and the readings taken from outside it.

use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};

use kubeplex::upstream::{ResponseBody, Upstream, UpstreamConfig};

/// An apiserver (or kubeplex) to send requests to, with the credentials its kubeconfig names.
pub struct Target {
    pub client: Upstream,
    pub url: String,
}

impl Target {
    /// From `--server URL` (no credentials) or a kubeconfig. Refuses hosts that are not
    /// loopback unless `allow_remote`: a load tool must not be pointed at a real cluster by
    /// accident.
    pub fn open(
        server: Option<&str>,
        kubeconfig: Option<&Path>,
        allow_remote: bool,
    ) -> anyhow::Result<Target> {
        let config = match (server, kubeconfig) {
            (Some(url), _) => {
                let dir =
                    std::env::temp_dir().join(format!("kubeplex-bench-{}", std::process::id()));
                std::fs::create_dir_all(&dir)?;
                let path: PathBuf = dir.join(format!("{}.kubeconfig", url_file_name(url)));
                std::fs::write(&path, kubeplex_sim::kubeconfig_for(url, "bench"))?;
                UpstreamConfig::resolve(Some(&path), None)?
            }
            (None, path) => UpstreamConfig::resolve(path, None)?,
        };
        let authority = config.server.authority.clone();
        if !allow_remote && !is_loopback(&authority) {
            bail!("{authority} is not a loopback address; pass --allow-remote to load it anyway");
        }
        let scheme = if config.server.https { "https" } else { "http" };
        let url = format!("{scheme}://{authority}{}", config.server.path_prefix);
        Ok(Target { client: Upstream::new(config).context("building the client")?, url })
    }

    /// Sends a request; the response body streams.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<http::Response<ResponseBody>> {
        let mut req = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        // JSON unless the caller names the body's type (a patch).
        if body.is_some() && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let body = Full::new(Bytes::from(body.unwrap_or_default()))
            .map_err(|never| match never {})
            .boxed();
        // A request that carries its own credentials (an agent a node tier passes on) goes with
        // them, on a connection without this client's certificate.
        let own = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        let req = req.body(body)?;
        Ok(if own { self.client.send_as_is(req).await? } else { self.client.send(req).await? })
    }

    /// A whole response: status and body.
    pub async fn fetch(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let resp = self.send(method, path, headers, body).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// The list's `metadata.resourceVersion` for `path` (a one-item list).
    pub async fn current_rv(&self, collection: &str) -> anyhow::Result<String> {
        let (status, body) =
            self.fetch(Method::GET, &format!("{collection}?limit=1"), &[], None).await?;
        if !status.is_success() {
            bail!("listing {collection}: {status}");
        }
        let v: serde_json::Value = serde_json::from_slice(&body)?;
        Ok(v["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_string())
    }
}

fn url_file_name(url: &str) -> String {
    url.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// Whether every address `host[:port]` resolves to is loopback.
pub fn is_loopback(authority: &str) -> bool {
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        authority.to_string()
    } else {
        format!("{authority}:443")
    };
    match with_port.to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            !addrs.is_empty() && addrs.iter().all(IpAddr::is_loopback)
        }
        Err(_) => false,
    }
}

/// `apiserver_request_total` (or `kubeplex_upstream_calls_total`) summed by verb for a
/// resource, from a Prometheus text page.
pub fn calls_by_verb(metrics: &str, resource: &str) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for line in metrics.lines() {
        if !line.starts_with("apiserver_request_total{") {
            continue;
        }
        if !line.contains(&format!("resource=\"{resource}\"")) {
            continue;
        }
        let verb = line
            .split("verb=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("")
            .to_string();
        let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        *out.entry(verb).or_insert(0) += value as u64;
    }
    out
}

/// Reads a `/metrics` page.
pub async fn scrape(url: &str, allow_remote: bool) -> anyhow::Result<String> {
    let target = Target::open(Some(base_of(url)), None, allow_remote)?;
    let path = url.strip_prefix(base_of(url)).unwrap_or("/metrics");
    let path = if path.is_empty() { "/metrics" } else { path };
    let (status, body) = target.fetch(Method::GET, path, &[], None).await?;
    if !status.is_success() {
        bail!("{url}: {status}");
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// `scheme://authority` of a URL.
fn base_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// Resident set size of a process, from `/proc/PID/status`.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU time (user + system) a process has used, from `/proc/PID/stat` (in clock ticks of
/// 10 ms, Linux's USER_HZ).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    cpu_split(pid).map(|(user, system)| user + system)
}

/// A process's CPU seconds so far in user space and in the kernel (for a server writing to
/// many sockets, the kernel's share is the part no user-space change can remove).
pub fn cpu_split(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime / 100.0, stime / 100.0))
}

/// Waits until `f` holds, polling, for at most `within`.
pub async fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f()
}

#[cfg(test)]
mod tests;
