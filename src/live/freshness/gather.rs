//! One request at a time, shared by every read that arrives before it is sent: the clock's
//! current-RV lists and a cache's metadata lists ([`super::Clock`], `Freshness::listed`).
//!
//! A read may use an answer only if its request was sent after the read arrived (it then
//! reflects every write that completed before the read). So a read takes the last answer if its
//! request was sent since, else joins the request not sent yet, else starts one; a request
//! waits [`GATHER`] before it is sent, so that the reads that come together (a node agent's
//! informers starting) go with it — [`GATHER_IN_BURST`] when the one before was sent a moment
//! ago — and one is in flight at a time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::sync::watch;

/// How long a shared request waits for more reads to join it before it is sent: a small part
/// of a proof's time (a list takes milliseconds; a probe ~1.5 s), enough for the reads a client
/// starts together.
pub const GATHER: Duration = Duration::from_millis(20);
/// How long it waits when the one before it was sent less than [`BURST`] ago: reads are coming
/// in a stream (another tier's nodes starting, each a moment after the other), and a request
/// per [`GATHER`] would cost the upstream one per few reads. Still a small part of a proof's
/// time; a read that comes alone waits [`GATHER`].
pub const GATHER_IN_BURST: Duration = Duration::from_millis(100);
/// See [`GATHER_IN_BURST`].
pub const BURST: Duration = Duration::from_millis(250);

/// One shared request at a time, and its last answer. Each read says what it needs of the
/// request (`D`: for a cache's metadata list, the namespace it reads, `None` for all); the
/// request is made for what every read that joined it needs ([`Gathered::get_for`]).
pub struct Gathered<T, D = ()> {
    /// The request readers can still join: not sent yet (`None` in its answer while it runs),
    /// and what they need of it.
    next: Mutex<Option<Next<T, D>>>,
    /// The last answer, with when its request was sent.
    last: Mutex<Option<(Instant, T)>>,
    /// Held while a request is in flight: one at a time (unless `overlap`).
    turn: tokio::sync::Mutex<()>,
    /// A request is sent when its gathering ends even while the one before is in flight: for
    /// requests that cost the upstream little (one namespace's metadata), where one at a time
    /// made each read wait for the request before its own to come back, then for its own.
    overlap: bool,
}

struct Next<T, D> {
    answer: watch::Receiver<Option<Option<T>>>,
    needs: Arc<Mutex<Vec<D>>>,
}

impl<T, D> Default for Gathered<T, D> {
    fn default() -> Self {
        Gathered {
            next: Mutex::new(None),
            last: Mutex::new(None),
            turn: tokio::sync::Mutex::new(()),
            overlap: false,
        }
    }
}

impl<T, D> Gathered<T, D> {
    /// Requests not one at a time: each is sent when its gathering ends ([`Gathered::overlap`]).
    pub fn overlapping() -> Self {
        Gathered { overlap: true, ..Gathered::default() }
    }
}

impl<T: Clone + Send + Sync + 'static> Gathered<T> {
    /// An answer whose request was sent at or after `arrived`: the last one, else that of the
    /// request not sent yet, else of a new one made by `fetch` (given when it is sent). `None`
    /// when the request failed.
    pub async fn get(
        self: &Arc<Self>,
        arrived: Instant,
        fetch: impl FnOnce(Instant) -> BoxFuture<'static, Option<T>> + Send + 'static,
    ) -> Option<T> {
        self.get_for(arrived, (), |_| true, move |sent, _| fetch(sent)).await
    }
}

impl<T: Clone + Send + Sync + 'static, D: Send + 'static> Gathered<T, D> {
    /// The last answer, if its request was sent at or after `arrived`.
    pub fn since(&self, arrived: Instant) -> Option<T> {
        self.since_where(arrived, |_| true)
    }

    /// The last answer, if its request was sent at or after `arrived` and it is `usable`.
    fn since_where(&self, arrived: Instant, usable: impl Fn(&T) -> bool) -> Option<T> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref().filter(|(sent, v)| *sent >= arrived && usable(v)).map(|(_, v)| v.clone())
    }

    /// How long the next request waits for reads to join it: longer in a burst.
    fn gather(&self) -> Duration {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &*last {
            Some((sent, _)) if sent.elapsed() < BURST => GATHER_IN_BURST,
            _ => GATHER,
        }
    }

    /// An answer whose request was sent at `sent` (by this or another way), kept as the last
    /// one unless a later one is.
    pub fn record(&self, sent: Instant, value: T) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_ref().is_none_or(|(at, _)| *at < sent) {
            *last = Some((sent, value));
        }
    }

    /// An answer whose request was sent at or after `arrived` and that gives the read what it
    /// `needs`: the last one if it is `usable`, else that of the request not sent yet (made for
    /// this read's needs too), else of a new one made by `fetch`, given when it is sent and what
    /// every read that joined needs. `None` when the request failed.
    pub async fn get_for(
        self: &Arc<Self>,
        arrived: Instant,
        needs: D,
        usable: impl Fn(&T) -> bool,
        fetch: impl FnOnce(Instant, Vec<D>) -> BoxFuture<'static, Option<T>> + Send + 'static,
    ) -> Option<T> {
        if let Some(v) = self.since_where(arrived, &usable) {
            return Some(v);
        }
        let mut rx = {
            let mut slot = self.next.lock().unwrap_or_else(|p| p.into_inner());
            match &*slot {
                Some(next) => {
                    next.needs.lock().unwrap_or_else(|p| p.into_inner()).push(needs);
                    next.answer.clone()
                }
                None => {
                    let (tx, rx) = watch::channel(None);
                    let all = Arc::new(Mutex::new(vec![needs]));
                    *slot = Some(Next { answer: rx.clone(), needs: all.clone() });
                    let this = self.clone();
                    tokio::spawn(async move {
                        let _turn = match this.overlap {
                            true => None,
                            false => Some(this.turn.lock().await),
                        };
                        tokio::time::sleep(this.gather()).await;
                        // From here on the request is (about to be) sent: a read arriving now
                        // needs the next. Every read that joined has said what it needs.
                        this.next.lock().unwrap_or_else(|p| p.into_inner()).take();
                        let needs =
                            std::mem::take(&mut *all.lock().unwrap_or_else(|p| p.into_inner()));
                        let sent = Instant::now();
                        let got = fetch(sent, needs).await;
                        if let Some(v) = &got {
                            this.record(sent, v.clone());
                        }
                        let _ = tx.send(Some(got));
                    });
                    rx
                }
            }
        };
        let got = rx.wait_for(Option::is_some).await.ok()?;
        (*got).clone().flatten()
    }
}

#[cfg(test)]
mod tests;
