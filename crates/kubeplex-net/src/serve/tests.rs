//! The accepted connection's socket options.

use super::*;

/// An accepted connection probes a silent peer as the apiserver's listener does: keep-alive on,
/// after 15 s idle, every 15 s, 9 probes — so a node gone without a FIN is let go.
#[tokio::test]
async fn accepted_connections_probe_a_silent_peer_as_the_apiservers_do() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (accepted, _) = listener.accept().await.expect("accept");
    let sock = socket2::SockRef::from(&accepted);
    assert!(!sock.keepalive().expect("SO_KEEPALIVE"), "off until tuned");
    tune(&accepted);
    assert!(sock.keepalive().expect("SO_KEEPALIVE"));
    assert_eq!(sock.tcp_keepalive_time().expect("TCP_KEEPIDLE"), Duration::from_secs(15));
    assert_eq!(sock.tcp_keepalive_interval().expect("TCP_KEEPINTVL"), Duration::from_secs(15));
    assert_eq!(sock.tcp_keepalive_retries().expect("TCP_KEEPCNT"), 9);
    assert!(accepted.nodelay().expect("TCP_NODELAY"));
}
