//! The pool's way to the apiserver in a soak: a relay the outages cut.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The pool's way to the apiserver: a TCP relay that can be cut (an outage as the pool sees
/// one: its connections reset, new ones refused) and let through again.
pub struct Relay {
    pub addr: SocketAddr,
    down: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Relays 127.0.0.1:(a free port) to `to` (`host:port`, loopback).
    pub async fn start(to: String) -> anyhow::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (down, is_down) = watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                let client = match listener.accept().await {
                    Ok((c, _)) => c,
                    Err(_) => {
                        // Out of descriptors, or the like: try again in a moment.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if *is_down.borrow() {
                    continue;
                }
                let (to, mut cut) = (to.clone(), is_down.clone());
                tokio::spawn(async move {
                    let mut client = client;
                    let Ok(mut server) = TcpStream::connect(&to).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        // Cut (or the relay gone): both connections dropped.
                        _ = cut.wait_for(|d| *d) => {}
                    }
                });
            }
        });
        Ok(Relay { addr, down, task })
    }

    pub fn set_down(&self, down: bool) {
        self.down.send_replace(down);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.down.send_replace(true);
    }
}
