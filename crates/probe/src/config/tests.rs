use super::*;

fn cfg(text: &str) -> Result<Config, ProbeError> {
    parse_file(text, &Overrides::default())
}

fn err(text: &str) -> String {
    cfg(text).unwrap_err().to_string()
}

#[test]
fn a_full_file_reads_with_defaults_and_labels() {
    let c = cfg(r#"
        interval = "2s"
        timeout = "100ms"
        labels = { site = "lab" }
        [[probe]]
        name = "cache"
        kind = "redis"
        target = "localhost:6379"
        key = "k"
        compare = ["name", "pair"]
        labels = { zone = "a" }
        [[probe]]
        kind = "postgres"
        target = "127.0.0.1:5432"
        password = "secret"
        timeout = "300ms"
        [[probe]]
        kind = "dns"
        lookup = "example.test"
        resolver = "127.0.0.1:5353"
    "#)
    .unwrap();
    assert_eq!(c.interval, Duration::from_secs(2));
    let redis = &c.probes[0];
    assert_eq!(
        redis.variants(),
        ["by-name", "by-ip", "first", "second"].to_vec()
    );
    assert_eq!(redis.timeout, Duration::from_millis(100));
    assert_eq!(redis.labels["site"], "lab");
    assert_eq!(redis.labels["zone"], "a");
    let pg = &c.probes[1];
    assert_eq!(pg.name, "postgres-127.0.0.1:5432");
    assert_eq!(pg.timeout, Duration::from_millis(300));
    match &pg.detail {
        Detail::Database(d) => {
            assert_eq!(
                (d.user.as_str(), d.query.as_str()),
                ("postgres", "SELECT 1")
            );
            assert_eq!(d.password, "secret");
        }
        d => panic!("{d:?}"),
    }
    // The password never reaches the run's params.
    assert!(!serde_json::to_string(pg).unwrap().contains("secret"));
    assert_eq!(
        c.probes[2].resolver,
        Resolver::Server("127.0.0.1:5353".parse().unwrap())
    );
}

#[test]
fn mistakes_name_the_key_and_the_fix() {
    let e = err("intervl = \"1s\"\n[[probe]]\nkind = \"icmp\"\ntarget = \"x\"");
    assert!(e.contains("unknown field `intervl`"), "{e}");
    let e = err("[[probe]]\nkind = \"redis\"");
    assert!(
        e.contains("`target` is missing") && e.contains("target = \""),
        "{e}"
    );
    let e = err("[[probe]]\nkind = \"ping\"\ntarget = \"x\"");
    assert!(
        e.contains("kind = \"ping\" is not a probe kind") && e.contains("icmp"),
        "{e}"
    );
    let e = err("[[probe]]\nkind = \"tcp-connect\"\ntarget = \"a:1\"\nkey = \"k\"");
    assert!(e.contains("`key` does not apply"), "{e}");
    let e = err("[[probe]]\nkind = \"tcp-connect\"\ntarget = \"a:1\"\ncompare = [\"pair\"]");
    assert!(e.contains("can compare: name"), "{e}");
    let e = err("interval = \"1s\"\ntimeout = \"400ms\"\n[[probe]]\nkind = \"redis\"\ntarget = \"a:1\"\ncompare = [\"pair\"]");
    assert!(e.contains("raise the interval to at least 1.60s"), "{e}");
    let e = err("interval = \"soon\"\n[[probe]]\nkind = \"icmp\"\ntarget = \"x\"");
    assert!(e.contains("interval = \"soon\""), "{e}");
    let e = err(
        "[[probe]]\nkind = \"icmp\"\ntarget = \"x\"\n[[probe]]\nkind = \"icmp\"\ntarget = \"x\"",
    );
    assert!(e.contains("two probes are named"), "{e}");
    let e = err("[[probe]]\nkind = \"icmp\"\ntarget = \"x\"\nlabels = { kind = \"y\" }");
    assert!(e.contains("label `kind` is set by the prober"), "{e}");
    assert!(err("").contains("no probe"));
    let e = err("[[probe]]\nkind = \"dns\"\nlookup = \"a\"\nresolver = \"dns.google\"");
    assert!(e.contains("neither \"system\" nor"), "{e}");
}

#[test]
fn quick_form_urls_make_probes_named_by_their_url() {
    let urls: Vec<String> = [
        "tcp://127.0.0.1:7000",
        "redis://127.0.0.1:6379/k",
        "postgres://app:pw@127.0.0.1:5432/shop",
        "dns://127.0.0.1:5353/example.test",
        "dns:///localhost",
        "http://127.0.0.1:8080",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let over = Overrides {
        interval: Some(Duration::from_secs(1)),
        timeout: Some(Duration::from_millis(200)),
        seed: None,
    };
    let c = from_urls(&urls, &over).unwrap();
    let kinds: Vec<_> = c.probes.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::TcpConnect,
            Kind::Redis,
            Kind::Postgres,
            Kind::Dns,
            Kind::Dns,
            Kind::Http
        ]
    );
    assert_eq!(c.probes[1].detail, Detail::Key("k".into()));
    assert_eq!(c.probes[2].name, "postgres://app@127.0.0.1:5432/shop");
    assert_eq!(c.probes[3].detail, Detail::Query("example.test".into()));
    assert_eq!(c.probes[4].resolver, Resolver::System);
    assert_eq!(c.probes[5].detail, Detail::Path("/".into()));
    let e = from_urls(&["gopher://x:1".into()], &over)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown scheme"), "{e}");
    let e = from_urls(&[], &over).unwrap_err().to_string();
    assert!(e.contains("nothing to probe"), "{e}");
}

#[test]
fn a_timeout_nobody_set_is_shortened_to_fit_the_interval_and_a_set_one_is_kept() {
    // No timeout anywhere: the default (1 s) would not fit twice in half of 200 ms.
    let c = cfg(
        "interval = \"200ms\"\n[[probe]]\nkind = \"redis\"\ntarget = \"a:1\"\ncompare = [\"pair\"]",
    )
    .unwrap();
    assert_eq!(c.probes[0].timeout, Duration::from_millis(50));
    let urls = vec!["tcp://127.0.0.1:7000".to_string()];
    let over = Overrides {
        interval: Some(Duration::from_millis(200)),
        timeout: None,
        seed: None,
    };
    assert_eq!(
        from_urls(&urls, &over).unwrap().probes[0].timeout,
        Duration::from_millis(100)
    );
    // A long interval keeps the default.
    let c = cfg("interval = \"10s\"\n[[probe]]\nkind = \"icmp\"\ntarget = \"x\"").unwrap();
    assert_eq!(c.probes[0].timeout, DEFAULT_TIMEOUT);
    // A timeout the user set is never changed: it is refused with the fix instead.
    let e =
        err("interval = \"200ms\"\n[[probe]]\nkind = \"icmp\"\ntarget = \"x\"\ntimeout = \"1s\"");
    assert!(e.contains("raise the interval to at least 2.00s"), "{e}");
}
