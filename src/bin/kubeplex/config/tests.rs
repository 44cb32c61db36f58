use kubeplex::serve::Mode;

use super::duration::Duration;
use super::read::{closest_key, API_VERSION, MAX_FILE_BYTES};
use super::*;

fn d(s: &str) -> std::time::Duration {
    s.parse::<Duration>().unwrap_or_else(|e| panic!("{s}: {e}")).0
}

/// The command line of `serve` with `args` (no variables: the env of `Arg`s is dropped, so
/// the test does not depend on the machine's environment).
fn matches(args: &[&str]) -> ArgMatches {
    let command =
        Settings::augment_args(clap::Command::new("serve")).mut_args(|a| a.env(None::<&str>));
    command.try_get_matches_from(std::iter::once("serve").chain(args.iter().copied())).unwrap()
}

#[test]
fn durations_follow_go_parse_duration() {
    use std::time::Duration as D;
    assert_eq!(d("0"), D::ZERO);
    assert_eq!(d("25s"), D::from_secs(25));
    assert_eq!(d("1m30s"), D::from_secs(90));
    assert_eq!(d("1.5h"), D::from_secs(5400));
    assert_eq!(d("500ms"), D::from_millis(500));
    assert_eq!(d("2h45m0.5s"), D::from_millis((2 * 3600 + 45 * 60) * 1000 + 500));
    assert_eq!(d("1us"), D::from_micros(1));
    assert_eq!(d("1µs"), D::from_micros(1));
    assert_eq!(d(".5s"), D::from_millis(500));
    for bad in ["", "5", "s", "1.2.3s", "1x", "-5s", "1m 2s", "5 s", ".s", "99999999999999999999h"]
    {
        assert!(bad.parse::<Duration>().is_err(), "{bad:?} parsed");
    }
}

#[test]
fn durations_print_in_a_form_that_parses_back() {
    for (text, printed) in [
        ("0", "0s"),
        ("90s", "1m30s"),
        ("1h", "1h"),
        ("3600s", "1h"),
        ("1500ms", "1s500ms"),
        ("2m0.25s", "2m250ms"),
        ("3us", "3us"),
    ] {
        let v: Duration = text.parse().unwrap();
        assert_eq!(v.to_string(), printed, "{text}");
        assert_eq!(printed.parse::<Duration>().unwrap(), v, "{printed}");
    }
}

#[test]
fn every_flag_is_a_key_of_the_file_and_print_shows_them_all() {
    let printed = Settings::defaults().to_yaml();
    let keys: Vec<&str> = printed
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('-'))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    let ids = Settings::ids();
    assert_eq!(keys.len(), ids.len() + 2, "apiVersion, kind and one key per flag:\n{printed}");
    for id in ids {
        assert!(keys.contains(&camel_case(&id).as_str()), "{id} not printed:\n{printed}");
    }
    assert_eq!(&keys[..2], ["apiVersion", "kind"]);
}

#[test]
fn print_output_is_a_file_that_reads_back_to_the_same_settings() {
    let (settings, _) = Settings::defaults()
        .overlay_command_line(&matches(&[
            "--mode=node",
            "--listen=127.0.0.1:6443",
            "--tls-cert-file=/pki/tls.crt",
            "--tls-private-key-file=/pki/tls.key",
            "--cache=pods:protobuf",
            "--cache=apps/v1/deployments",
            "--watch-slow-after=1m30s",
            "--log-format=json",
        ]))
        .unwrap();
    let text = settings.to_yaml();
    let back = Settings::from_yaml(&text).unwrap();
    assert_eq!(back.api_version.as_deref(), Some(API_VERSION));
    assert_eq!(Settings { api_version: None, kind: None, ..back }, settings, "{text}");
    assert!(settings.resolve().is_ok());
}

#[test]
fn an_empty_file_is_the_defaults() {
    assert_eq!(Settings::from_yaml("").unwrap(), Settings::defaults());
    assert_eq!(Settings::from_yaml("# nothing set\n").unwrap(), Settings::defaults());
}

#[test]
fn a_file_sets_only_its_keys() {
    let s = Settings::from_yaml("watchQueue: 5\ncaches: [pods]\n").unwrap();
    assert_eq!(s.watch_queue, 5);
    assert_eq!(s.caches, ["pods"]);
    assert_eq!(Settings { watch_queue: 1000, caches: vec![], ..s }, Settings::defaults());
}

#[test]
fn flags_beat_the_file_and_only_the_flags_given() {
    let file = Settings::from_yaml("watchQueue: 5\nwatchSlowAfter: 10s\n").unwrap();
    let (s, given) = file.overlay_command_line(&matches(&["--watch-queue", "9"])).unwrap();
    assert_eq!(s.watch_queue, 9, "the flag");
    assert_eq!(
        s.watch_slow_after.0,
        std::time::Duration::from_secs(10),
        "the file, not the flag's default"
    );
    assert_eq!(s.min_request_timeout.0, std::time::Duration::from_secs(1800), "the default");
    assert_eq!(given, ["watchQueue"]);
}

#[test]
fn file_errors_are_one_line_with_the_line_and_the_key() {
    let cases = [
        (
            "mode: sidecar\nwatchQueu: 5\n",
            "2: unknown key \"watchQueu\" (did you mean \"watchQueue\"?)",
        ),
        ("nonsense: 1\n", "1: unknown key \"nonsense\" (`kubeplex config print` lists every key)"),
        ("listen: 127.0.0.1:1\nwatchQueue: lots\n", "2: watchQueue: "),
        ("shutdownGracePeriod: 25\n", "1: shutdownGracePeriod: "),
        ("mode: nod\n", "1: mode: unknown variant `nod`"),
        ("anonymousAuth: maybe\n", "1: anonymousAuth: "),
    ];
    for (text, want) in cases {
        let e = Settings::from_yaml(text).unwrap_err().0;
        assert!(e.starts_with(want), "{text:?}: {e:?} does not start with {want:?}");
        assert!(!e.contains('\n'), "{text:?}: {e:?} is more than one line");
    }
}

#[test]
fn cache_scopes_take_the_node_name_and_the_apiservers_selectors() {
    let text =
        "nodeName: node-7\ncaches:\n  - pods:protobuf?fieldSelector=spec.nodeName={nodeName}\n  \
                - discovery.k8s.io/v1/endpointslices:protobuf?labelSelector=!b,!a\n  - services\n";
    let c = Settings::from_yaml(text).unwrap().resolve().unwrap();
    assert_eq!(
        c.caches.preload,
        [
            "pods:protobuf?fieldSelector=spec.nodeName=node-7",
            "discovery.k8s.io/v1/endpointslices:protobuf?labelSelector=!b,!a",
            "services"
        ]
    );
    let spec = kubeplex::serve::CacheSpec::parse(&c.caches.preload[1]).unwrap();
    assert_eq!(spec.label_selector.as_deref(), Some("!a,!b"), "as the apiserver sorts them");
    assert_eq!(spec.field_selector, None);
    // On the command line a comma separates caches: a selector's are written %2C.
    let (s, _) = Settings::defaults()
        .overlay_command_line(&matches(&[
            "--node-name=n1",
            "--cache=pods?fieldSelector=spec.nodeName%3D{nodeName}%2Cstatus.phase!%3DFailed,nodes",
        ]))
        .unwrap();
    let c = s.resolve().unwrap();
    let spec = kubeplex::serve::CacheSpec::parse(&c.caches.preload[0]).unwrap();
    assert_eq!(spec.field_selector.as_deref(), Some("spec.nodeName=n1,status.phase!=Failed"));
    assert_eq!(c.caches.preload[1], "nodes");
}

#[test]
fn resolve_refuses_what_cannot_run_naming_the_key() {
    let cases = [
        ("mode: node\n", "mode: node needs tlsCertFile"),
        ("tlsCertFile: /a\n", "tlsCertFile: only for mode: node"),
        ("listen: 0.0.0.0:8001\n", "listen: 0.0.0.0:8001 is not a loopback address"),
        ("caches: [\"pods:protobuff\"]\n", "caches: \"pods:protobuff\": unknown encoding"),
        ("caches: [apps/deployments]\n", "caches: \"apps/deployments\": expected RESOURCE or"),
        ("caches: [Pods]\n", "caches: \"Pods\": \"Pods\" is not a resource name"),
        (
            "caches: [apps/1/deployments]\n",
            "caches: \"apps/1/deployments\": \"1\" is not an API version",
        ),
        (
            "caches: [\"pods?fieldSelector=spec.nope=x\"]\n",
            "caches: \"pods?fieldSelector=spec.nope=x\": field label not supported: spec.nope",
        ),
        (
            "caches: [\"pods?labelSelecter=a\"]\n",
            "caches: \"pods?labelSelecter=a\": unknown parameter",
        ),
        (
            "caches: [\"pods?fieldSelector=spec.nodeName={nodeName}\"]\n",
            "caches: \"pods?fieldSelector=spec.nodeName={nodeName}\": {nodeName} needs nodeName",
        ),
        ("nodeName: Node_1\n", "nodeName: \"Node_1\" is not a node name"),
        ("watchQueue: 0\n", "watchQueue: must be at least 1"),
        ("watchBookmarkInterval: 0s\n", "watchBookmarkInterval: must be more than 0s"),
        ("reviewTimeout: 0s\n", "reviewTimeout: must be more than 0s"),
        ("cacheNamespace: Team-0\n", "cacheNamespace: \"Team-0\" is not a namespace name"),
        ("cacheNamespace: \"\"\n", "cacheNamespace: \"\" is not a namespace name"),
        ("cacheNamespace: a-\n", "cacheNamespace: \"a-\" is not a namespace name"),
        ("apiVersion: v1\n", "apiVersion: \"v1\" is not"),
        ("kind: Pod\n", "kind: \"Pod\" is not"),
        ("logLevel: \"info,[\"\n", "logLevel: "),
    ];
    for (text, want) in cases {
        let e = Settings::from_yaml(text).unwrap().resolve().unwrap_err().0;
        assert!(e.starts_with(want), "{text:?}: {e:?} does not start with {want:?}");
    }
    // What is allowed with its escape hatch.
    let shared = "listen: 0.0.0.0:8001\nallowSharedIdentityListener: true\n";
    assert!(Settings::from_yaml(shared).unwrap().resolve().is_ok());
}

#[test]
fn resolved_settings_reach_each_part() {
    let text = "mode: node\ntlsCertFile: /c\ntlsPrivateKeyFile: /k\naccessReviewDeniedTtl: 3s\n\
                caches: [pods]\nwatchHistoryMib: 2\ncacheSyncWait: 0s\nshutdownGracePeriod: 1m\n\
                authOutageGrace: 0s\nreviewTimeout: 3s\ncacheNamespace: team-0\n\
                authOutageRecent: 2m\n";
    let c = Settings::from_yaml(text).unwrap().resolve().unwrap();
    let Mode::Node(node) = &c.mode else { panic!("not node mode: {:?}", c.mode) };
    assert_eq!(node.reviews.denied_ttl, std::time::Duration::from_secs(3));
    assert_eq!(node.reviews.outage_grace, std::time::Duration::ZERO, "0s turns it off");
    assert_eq!(node.reviews.timeout, std::time::Duration::from_secs(3));
    assert_eq!(node.reviews.outage_recent, std::time::Duration::from_secs(120));
    assert!(node.anonymous);
    assert_eq!(c.caches.preload, ["pods"]);
    assert_eq!(c.caches.namespace.as_deref(), Some("team-0"));
    assert_eq!(c.caches.watch.history_bytes, 2 << 20);
    assert_eq!(c.caches.freshness.sync_wait, std::time::Duration::ZERO);
    assert_eq!(c.shutdown_grace_period, std::time::Duration::from_secs(60));
    assert!(c.log_filter.ends_with(",kubeplex::access=off"), "{}", c.log_filter);
    let c = Settings::from_yaml("accessLog: true\nlogLevel: warn\n").unwrap().resolve().unwrap();
    assert_eq!(c.log_filter, "warn,kubeplex::access=info");
}

#[test]
fn a_file_error_from_resolve_names_the_file_and_line_of_its_key() {
    let dir = std::env::temp_dir().join(format!("kubeplex-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("k.yaml");
    std::fs::write(&path, "# comment\nmode: sidecar\nlisten: 0.0.0.0:1\n").unwrap();
    let e = check(&path).unwrap_err().0;
    assert!(e.starts_with(&format!("{}:3: listen: ", path.display())), "{e}");
    // Given as a flag, the same key is not blamed on the file.
    let e = load(Some(&path), &matches(&["--listen", "0.0.0.0:2"])).unwrap_err().0;
    assert!(e.starts_with("listen: 0.0.0.0:2 is not"), "{e}");
    std::fs::write(&path, vec![b'#'; (MAX_FILE_BYTES + 1) as usize]).unwrap();
    assert!(check(&path).unwrap_err().0.contains("more than the"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_misspelled_key_is_matched_to_the_nearest() {
    assert_eq!(closest_key("cache").as_deref(), Some("caches"));
    assert_eq!(closest_key("discoveryTTL").as_deref(), Some("discoveryTtl"));
    assert_eq!(closest_key("clientCAFile").as_deref(), Some("clientCaFile"));
    assert_eq!(closest_key("somethingElseEntirely"), None);
}

#[test]
fn guardrails_default_to_the_apiservers_and_reach_the_proxy() {
    let c = Settings::from_yaml("").unwrap().resolve().unwrap();
    assert_eq!(c.guardrails, kubeplex::serve::guardrails::Guardrails::default());
    assert_eq!(c.guardrails.max_requests_inflight, 400);
    assert_eq!(c.guardrails.max_mutating_requests_inflight, 200);
    assert_eq!(c.guardrails.max_request_body_bytes, 3 << 20);
    assert_eq!(c.guardrails.header_read_timeout, std::time::Duration::from_secs(32));
    assert_eq!(c.guardrails.idle_timeout, std::time::Duration::from_secs(90));
    assert_eq!(c.guardrails.max_header_bytes, 1 << 20);
    assert_eq!(c.guardrails.max_connections, 10_000);
    assert_eq!(c.guardrails.queue_wait, std::time::Duration::from_secs(15));
    let text = "maxRequestsInflight: 2\nmaxMutatingRequestsInflight: 0\nmaxRequestBodyBytes: 10\n\
                inflightQueueWait: 0s\n";
    let c = Settings::from_yaml(text).unwrap().resolve().unwrap();
    assert_eq!(c.guardrails.max_requests_inflight, 2);
    assert_eq!(c.guardrails.max_mutating_requests_inflight, 0);
    assert_eq!(c.guardrails.max_request_body_bytes, 10);
    assert_eq!(c.guardrails.queue_wait, std::time::Duration::ZERO);
}

#[test]
fn disk_state_is_off_by_default_and_reaches_the_caches() {
    use kubeplex::live::disk::DiskConfig;
    let c = Settings::from_yaml("").unwrap().resolve().unwrap();
    assert_eq!(c.caches.disk, DiskConfig::default());
    assert_eq!(c.caches.disk.dir, None);
    let text = "diskStateDir: /var/lib/kubeplex\ndiskStateInterval: 30s\ndiskStateMaxBytes: 1024\n";
    let c = Settings::from_yaml(text).unwrap().resolve().unwrap();
    assert_eq!(c.caches.disk.dir.as_deref(), Some(std::path::Path::new("/var/lib/kubeplex")));
    assert_eq!(c.caches.disk.interval, std::time::Duration::from_secs(30));
    assert_eq!(c.caches.disk.max_bytes, 1024);
    let err = Settings::from_yaml("diskStateInterval: 0s\n").unwrap().resolve().unwrap_err();
    assert!(err.0.contains("diskStateInterval"), "{}", err.0);
}

#[test]
fn the_memory_budget_is_off_by_default_and_reaches_the_caches() {
    let c = Settings::from_yaml("").unwrap().resolve().unwrap();
    assert_eq!(c.caches.memory_budget, None);
    let c = Settings::from_yaml("cacheMemoryBudget: 1073741824\n").unwrap().resolve().unwrap();
    assert_eq!(c.caches.memory_budget, Some(1 << 30));
    assert!(Settings::from_yaml("cacheMemoryBudget: -1\n").is_err());
}

#[test]
fn listener_limits_reach_the_guardrails() {
    let text =
        "headerReadTimeout: 5s\nidleTimeout: 0s\nmaxHeaderBytes: 65536\nmaxConnections: 50\n";
    let c = Settings::from_yaml(text).unwrap().resolve().unwrap();
    assert_eq!(c.guardrails.header_read_timeout, std::time::Duration::from_secs(5));
    assert_eq!(c.guardrails.idle_timeout, std::time::Duration::ZERO);
    assert_eq!(c.guardrails.max_header_bytes, 65536);
    assert_eq!(c.guardrails.max_connections, 50);
}

#[test]
fn a_setting_is_named_by_its_key_flag_and_variable() {
    assert_eq!(setting_names("listen"), "listen: --listen, KUBEPLEX_LISTEN");
    assert_eq!(setting_names("adminListen"), "adminListen: --admin-listen, KUBEPLEX_ADMIN_LISTEN");
    // The one flag that is not the key's (it is repeated, one cache each).
    assert_eq!(setting_names("caches"), "caches: --cache, KUBEPLEX_CACHES");
    assert_eq!(setting_names("nosuchKey"), "nosuchKey:");
}
