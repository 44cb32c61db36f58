use super::*;

#[test]
fn only_loopback_is_allowed_by_default() {
    assert!(is_loopback("127.0.0.1:8001"));
    assert!(is_loopback("[::1]:6443"));
    assert!(is_loopback("localhost:1"));
    assert!(!is_loopback("10.0.0.1:6443"));
    assert!(!is_loopback("192.168.1.1"));
    assert!(!is_loopback("no-such-host.invalid:443"));
}

#[test]
fn calls_are_summed_by_verb() {
    let text = "apiserver_request_total{code=\"200\",resource=\"pods\",verb=\"LIST\"} 3\n\
                apiserver_request_total{code=\"410\",resource=\"pods\",verb=\"LIST\"} 1\n\
                apiserver_request_total{code=\"200\",resource=\"pods\",verb=\"WATCH\"} 2\n\
                apiserver_request_total{code=\"200\",resource=\"configmaps\",verb=\"LIST\"} 9\n";
    let calls = calls_by_verb(text, "pods");
    assert_eq!(calls.get("LIST"), Some(&4));
    assert_eq!(calls.get("WATCH"), Some(&2));
    assert_eq!(base_of("http://127.0.0.1:9090/metrics"), "http://127.0.0.1:9090");
    assert_eq!(base_of("http://127.0.0.1:9090"), "http://127.0.0.1:9090");
}

#[test]
fn rss_and_cpu_of_this_process_are_read() {
    assert!(rss_bytes(std::process::id()).is_some_and(|b| b > 0));
    assert_eq!(rss_bytes(u32::MAX), None);
    // Spin until the kernel has charged this process a tick (10 ms of CPU): on a loaded machine
    // 50 ms of wall time may not be one. Bounded at 5 s.
    let spin = std::time::Instant::now();
    let mut used = 0.0;
    while spin.elapsed() < Duration::from_secs(5) {
        used = cpu_seconds(std::process::id()).expect("this process's CPU time");
        if used > 0.0 {
            break;
        }
    }
    assert!(used > 0.0, "no CPU time read after 5 s of spinning");
    assert_eq!(cpu_seconds(u32::MAX), None);
}
