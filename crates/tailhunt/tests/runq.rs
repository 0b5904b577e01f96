//! End-to-end tests of `tailhunt runq` on the real kernel: BPF programs, cgroups and CPU hogs
//! the tests create themselves. They need root and kernel BTF (the CI machine has both) and
//! run one at a time: each owns CPU 0 for its workload while the tracer runs on CPU 1.

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::Duration;

use common::cgroups::{bpf_ready, Cgroups, HOG, SLEEPER, WORKER};
use common::{check_schema, retry_on_noise, Env, BIN};
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Starts `tailhunt runq ARGS --json` pinned to CPU 1.
fn start_runq(env: &Env, args: &[&str]) -> std::process::Child {
    Command::new("taskset")
        .args(["-c", "1", BIN, "--db"])
        .arg(env.db())
        .arg("runq")
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tailhunt runq")
}

fn finish(child: std::process::Child) -> Value {
    let out: Output = child.wait_with_output().expect("tailhunt runq");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tailhunt runq failed: {}\n{stderr}",
        out.status
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}); stderr: {stderr}"));
    check_schema("runq", &v);
    v
}

/// `group`'s row in each interval: (p99 ns, the row).
fn rows<'a>(doc: &'a Value, group: &str) -> Vec<Option<&'a Value>> {
    doc["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|iv| {
            iv["cgroups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["cgroup"] == group)
        })
        .collect()
}

fn p99s(rows: &[Option<&Value>]) -> Vec<f64> {
    rows.iter()
        .map(|r| r.and_then(|r| r["p99_ns"].as_f64()).unwrap_or(0.0))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The other cgroup with the most wait time over some rows (not the cgroup itself, not idle).
fn top_other(rows: &[Option<&Value>], me: &str) -> String {
    let mut by: std::collections::BTreeMap<String, f64> = Default::default();
    for r in rows.iter().flatten() {
        for b in r["by"].as_array().unwrap() {
            let name = b["cgroup"].as_str().unwrap();
            if name != me && name != "idle" {
                *by.entry(name.to_string()).or_default() += b["wait_ns"].as_f64().unwrap();
            }
        }
    }
    by.into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|x| x.0)
        .unwrap_or_default()
}

fn detectors(doc: &Value) -> Vec<(String, String)> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["detector"].as_str().unwrap().to_string(),
                f["summary"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The weights of the neighbour scenarios: the batch job (`neighbour`) 8192 against the
/// service's 64, a share (under 1%) below the sleeper's ~5% of a CPU, so the hogs slow it every
/// second (near its fair share the kernel often runs it at once on wakeup: the effect comes and
/// goes). The test's own group outweighs ten root tasks, so other work on the host (builds
/// beside the test) does not spoil the calm seconds.
fn small_service_next_to_a_batch_job(cg: &Cgroups) {
    cg.set_top_v1("cpu.shares", "10240");
    cg.set_v1("victim", "cpu.shares", "64");
    cg.set_v1("neighbour", "cpu.shares", "8192");
}

/// Ten one-second intervals; three hogs start 4.5 s in, in `hog_group` (or the root cgroup),
/// on the victim's CPU. Returns the document and the victim's p99s when calm (intervals 1-3)
/// and with the hogs (6-9).
fn neighbour_run(
    cg: &mut Cgroups,
    env: &Env,
    hog_group: Option<&str>,
) -> (Value, Vec<f64>, Vec<f64>) {
    let base = cg.v2_dir(None);
    let runq = start_runq(
        env,
        &["--duration", "10s", "--cgroup", base.to_str().unwrap()],
    );
    sleep(Duration::from_millis(4500));
    for _ in 0..3 {
        cg.spawn(hog_group, 0, HOG, 6.5);
    }
    let doc = finish(runq);
    let p = p99s(&rows(&doc, &cg.display("victim")));
    assert!(p.len() >= 10, "ten intervals expected: {p:?}");
    let (calm, hog) = (p[1..4].to_vec(), p[6..10].to_vec());
    (doc, calm, hog)
}

/// Each cgroup's share of `me`'s wait time over some rows (itself and idle included).
fn wait_shares(rows: &[Option<&Value>]) -> std::collections::BTreeMap<String, f64> {
    let mut by: std::collections::BTreeMap<String, f64> = Default::default();
    for r in rows.iter().flatten() {
        for b in r["by"].as_array().unwrap() {
            *by.entry(b["cgroup"].as_str().unwrap().to_string())
                .or_default() += b["wait_ns"].as_f64().unwrap();
        }
    }
    let total: f64 = by.values().sum::<f64>().max(1.0);
    by.values_mut().for_each(|v| *v /= total);
    by
}

/// The checks both neighbour scenarios share: a >10x rise, the attribution and the finding.
fn neighbour_checks(
    doc: &Value,
    cg: &Cgroups,
    calm: Vec<f64>,
    hog: Vec<f64>,
    neighbour: &str,
    said: &str,
) {
    let (calm_p99, hog_p99) = (median(calm.clone()), median(hog.clone()));
    assert!(
        hog_p99 > 10.0 * calm_p99,
        "victim p99 calm {calm:?} vs with the hogs {hog:?}"
    );
    let me = cg.display("victim");
    let victim = rows(doc, &me);
    let top = top_other(&victim[6..10], &me);
    assert!(
        top == neighbour,
        "the victim waited most behind {top}, not {neighbour}"
    );
    let found = detectors(doc);
    assert!(
        found
            .iter()
            .any(|(d, s)| d == "noisy-neighbor" && s.contains(&me) && s.contains(said)),
        "no noisy-neighbor finding naming {said}: {found:#?}"
    );
    assert!(
        !found.iter().any(|(d, _)| d == "cpu-throttled"),
        "throttling claimed: {found:#?}"
    );
}

#[test]
fn root_runq_names_the_noisy_neighbour_cgroup() {
    if !bpf_ready("root_runq_names_the_noisy_neighbour_cgroup") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    retry_on_noise("noisy neighbour", || {
        let env = Env::new();
        let mut cg = Cgroups::new("nn");
        cg.group("victim");
        cg.group("neighbour");
        // A batch container with a large CPU request next to a small service.
        small_service_next_to_a_batch_job(&cg);
        cg.spawn(Some("victim"), 0, SLEEPER, 12.0);
        let (doc, calm, hog) = neighbour_run(&mut cg, &env, Some("neighbour"));
        let neighbour = cg.display("neighbour");
        neighbour_checks(&doc, &cg, calm, hog, &neighbour, &neighbour);
        // The hogs mostly wait behind each other: a wait is charged to whoever ran during it,
        // not to the sleeper that sits in most hand-overs between them (it runs 5% of the time).
        let hogs = wait_shares(&rows(&doc, &neighbour)[6..10]);
        let victim = cg.display("victim");
        let behind_sleeper = hogs.get(&victim).copied().unwrap_or(0.0);
        let behind_each_other = hogs.get(&neighbour).copied().unwrap_or(0.0);
        assert!(
            behind_sleeper < 0.25 && behind_each_other > 0.5,
            "the hogs' wait by who ran: {hogs:?}"
        );
        // And all of a wait is charged: the parts add up to the histogram's sum.
        for r in rows(&doc, &victim).into_iter().flatten() {
            let parts: f64 = r["by"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["wait_ns"].as_f64().unwrap())
                .sum();
            let sum = r["mean_ns"].as_f64().unwrap() * r["waits"].as_f64().unwrap();
            assert!(
                (parts - sum).abs() <= 0.01 * sum + 1e6,
                "charged {parts} ns of {sum} ns: {r}"
            );
        }
        // The stored run diagnoses the same way.
        let again = env.json("diagnose", &["diagnose", doc["run_id"].as_str().unwrap()]);
        let stored = again["findings"].as_array().unwrap();
        assert!(
            stored.iter().any(|f| f["detector"] == "noisy-neighbor"),
            "diagnose of the stored run: {again:#}"
        );
    });
}

#[test]
fn root_runq_names_system_services_when_the_hog_is_outside_any_container() {
    if !bpf_ready("root_runq_names_system_services_when_the_hog_is_outside_any_container") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    retry_on_noise("system service", || {
        let env = Env::new();
        let mut cg = Cgroups::new("sys");
        cg.group("victim");
        // A service in a cgroup2 slice without CPU accounting, on a host whose own services
        // want the CPU.
        cg.spawn_v2("victim", 0, SLEEPER, 12.0);
        let (doc, calm, hog) = neighbour_run(&mut cg, &env, None);
        neighbour_checks(&doc, &cg, calm, hog, "system", "system services")
    });
}

#[test]
fn root_runq_judges_a_run_slow_from_the_start_against_a_baseline_run() {
    if !bpf_ready("root_runq_judges_a_run_slow_from_the_start_against_a_baseline_run") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    retry_on_noise("baseline run", || {
        let env = Env::new();
        let mut cg = Cgroups::new("base");
        cg.group("victim");
        cg.group("neighbour");
        small_service_next_to_a_batch_job(&cg);
        cg.spawn(Some("victim"), 0, SLEEPER, 12.0);
        let base = cg.v2_dir(None);
        let cgroup = base.to_str().unwrap();
        let calm = finish(start_runq(&env, &["--duration", "3s", "--cgroup", cgroup]));
        let calm_run = calm["run_id"].as_str().unwrap().to_string();
        for _ in 0..3 {
            cg.spawn(Some("neighbour"), 0, HOG, 6.0);
        }
        sleep(Duration::from_millis(300));
        let args = ["--duration", "4s", "--cgroup", cgroup];
        // Slow from its first second: alone, nothing to compare with.
        let alone = finish(start_runq(&env, &args));
        assert!(detectors(&alone).is_empty(), "{:#?}", detectors(&alone));
        let judged = finish(start_runq(
            &env,
            &[&args[..], &["--baseline", &calm_run]].concat(),
        ));
        let found = detectors(&judged);
        assert!(
            found
                .iter()
                .any(|(d, s)| d == "noisy-neighbor" && s.contains(&cg.display("neighbour"))),
            "{found:#?}"
        );
        let note = judged["findings"][0]["evidence"][0]["note"]
            .as_str()
            .unwrap_or("");
        assert!(note.contains("in the baseline run"), "{note}");
    });
}

#[test]
fn root_runq_says_cpu_throttled_not_neighbour_when_the_quota_bites() {
    if !bpf_ready("root_runq_says_cpu_throttled_not_neighbour_when_the_quota_bites") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    retry_on_noise("cpu quota", || {
        let env = Env::new();
        let mut cg = Cgroups::new("quota");
        cg.group("victim");
        cg.spawn(Some("victim"), 0, WORKER, 11.0);
        let base = cg.v2_dir(None);
        let runq = start_runq(
            &env,
            &["--duration", "9s", "--cgroup", base.to_str().unwrap()],
        );
        sleep(Duration::from_millis(4500));
        // 10 ms of CPU per 100 ms for a task that wants two thirds of a CPU.
        cg.set_v1("victim", "cpu.cfs_period_us", "100000");
        cg.set_v1("victim", "cpu.cfs_quota_us", "10000");
        let doc = finish(runq);
        let victim = rows(&doc, &cg.display("victim"));
        let p = p99s(&victim);
        assert!(
            median(p[6..9].to_vec()) > 10.0 * median(p[1..4].to_vec()),
            "victim p99s {p:?}"
        );
        let throttled: u64 = victim[6..9]
            .iter()
            .flatten()
            .map(|r| r["throttled_periods"].as_u64().unwrap_or(0))
            .sum();
        assert!(throttled > 0, "no throttling counted: {victim:#?}");
        let found = detectors(&doc);
        assert!(
            found
                .iter()
                .any(|(d, s)| d == "cpu-throttled" && s.contains("10.0ms per 100ms")),
            "no cpu-throttled finding with the quota: {found:#?}"
        );
        assert!(
            !found.iter().any(|(d, _)| d == "noisy-neighbor"),
            "a neighbour was blamed: {found:#?}"
        );
    });
}

#[test]
fn root_runq_kernel_histograms_agree_with_every_event() {
    if !bpf_ready("root_runq_kernel_histograms_agree_with_every_event") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let mut cg = Cgroups::new("events");
    cg.group("victim");
    cg.group("neighbour");
    cg.spawn(Some("victim"), 0, SLEEPER, 6.0);
    cg.spawn(Some("neighbour"), 0, HOG, 6.0);
    let base = cg.v2_dir(None);
    let doc = finish(start_runq(
        &env,
        &[
            "--duration",
            "3s",
            "--all-events",
            "--store",
            "task-storage",
            "--cgroup",
            base.to_str().unwrap(),
        ],
    ));
    // (Task storage here; the other tests use the default array.)
    assert_eq!(doc["started"]["store"], "task-storage");
    let counters = &doc["overhead"]["counters"];
    assert_eq!(
        counters["ring_dropped"], 0,
        "events were dropped: {counters}"
    );
    let run = doc["run_id"].as_str().unwrap();

    let store = tailhunt_store::Store::open_existing(&env.db()).unwrap();
    let victim = cg.display("victim");
    let mut kernel =
        tailhunt_histogram::Histogram::with_layout(tailhunt_histogram::Layout::new(4).unwrap());
    let mut events: Vec<u64> = Vec::new();
    for info in store.series(run).unwrap() {
        if info.labels.get("cgroup") != Some(&victim) {
            continue;
        }
        match (info.name.as_str(), store.load_series(&info).unwrap().data) {
            ("runq_latency", tailhunt_model::SeriesData::Histograms(hs)) => {
                hs.iter().for_each(|h| kernel.merge(&h.histogram))
            }
            ("runq_event", tailhunt_model::SeriesData::Samples(s)) => {
                events.extend(s.iter().map(|x| x.latency_ns() as u64))
            }
            _ => {}
        }
    }
    assert!(events.len() > 1000, "only {} events", events.len());
    assert_eq!(
        kernel.count(),
        events.len() as u64,
        "histogram and event stream disagree on the count"
    );
    // Bucket by bucket: the kernel computed the same index as the Rust layout.
    let mut rebucketed =
        tailhunt_histogram::Histogram::with_layout(tailhunt_histogram::Layout::new(4).unwrap());
    events.iter().for_each(|&v| rebucketed.record(v));
    assert_eq!(kernel.counts(), rebucketed.counts());
    // Quantiles within the bucket bound of the exact ones.
    events.sort_unstable();
    for q in [0.5, 0.9, 0.99, 0.999] {
        let exact =
            events[(tailhunt_histogram::nearest_rank(q, events.len() as u64) - 1) as usize] as f64;
        let from_kernel = kernel.quantile(q).unwrap() as f64;
        assert!(
            (from_kernel - exact).abs() <= exact / 16.0,
            "q{q}: kernel {from_kernel} vs events {exact}"
        );
    }
}

#[test]
fn root_runq_raw_tracepoints_trace_too() {
    if !bpf_ready("root_runq_raw_tracepoints_trace_too") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let mut cg = Cgroups::new("raw");
    cg.group("victim");
    cg.spawn(Some("victim"), 0, SLEEPER, 4.0);
    let base = cg.v2_dir(None);
    let doc = finish(start_runq(
        &env,
        &[
            "--duration",
            "2s",
            "--attach",
            "raw-tp",
            "--cgroup",
            base.to_str().unwrap(),
        ],
    ));
    assert_eq!(doc["started"]["attach"], "raw-tp");
    assert_eq!(doc["started"]["store"], "array");
    let waits: u64 = rows(&doc, &cg.display("victim"))
        .iter()
        .flatten()
        .map(|r| r["waits"].as_u64().unwrap())
        .sum();
    assert!(
        waits > 500,
        "raw_tp counted {waits} waits of a 1 kHz sleeper in 2 s"
    );
    let per_hook = doc["overhead"]["ns_per_hook"].as_f64().unwrap();
    assert!(per_hook > 0.0);
    // `analyze` reads the stored histograms, with the kernel layout's bound (3.125%).
    let run = doc["run_id"].as_str().unwrap();
    let analysis = env.json("analyze", &["analyze", run]);
    let series = analysis["series"].as_array().unwrap();
    assert!(!series.is_empty());
    for s in series {
        assert_eq!(s["series"]["name"], "runq_latency", "{}", s["series"]);
        assert_eq!(s["analysis"]["summary"]["relative_error_bound"], 0.03125);
    }
}

#[test]
fn root_runq_degraded_mode_reads_schedstat() {
    if !bpf_ready("root_runq_degraded_mode_reads_schedstat") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let mut cg = Cgroups::new("degraded");
    cg.group("victim");
    cg.spawn(Some("victim"), 0, SLEEPER, 4.0);
    sleep(Duration::from_millis(300));
    let doc = finish(start_runq(&env, &["--duration", "2s", "--degraded"]));
    assert_eq!(doc["mode"], "schedstat");
    assert!(doc["degraded_reason"]
        .as_str()
        .unwrap()
        .contains("--degraded"));
    let victim = cg.display("victim");
    let slices: u64 = doc["degraded_intervals"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|iv| iv["cgroups"].as_array().unwrap())
        .filter(|c| c["path"] == victim.as_str())
        .map(|c| c["timeslices"].as_u64().unwrap())
        .sum();
    assert!(slices > 500, "victim ran {slices} timeslices in 2 s");
}

#[test]
fn runq_without_privileges_says_what_to_do_or_degrades() {
    if !bpf_ready("runq_without_privileges_says_what_to_do_or_degrades") {
        return; // dropping privileges needs root to start with
    }
    let env = Env::new();
    std::fs::set_permissions(
        env.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let nobody = |extra: &[&str]| {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                BIN,
                "--db",
            ])
            .arg(env.db())
            .args(["runq", "--duration", "1s", "-q"])
            .args(extra)
            .output()
            .expect("setpriv")
    };
    let refused = nobody(&["--require-bpf"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("CAP_BPF and CAP_PERFMON") && err.contains("run as root"),
        "{err}"
    );
    let degraded = nobody(&[]);
    let err = String::from_utf8_lossy(&degraded.stderr);
    assert!(degraded.status.success(), "{err}");
    assert!(
        err.contains("BPF unavailable") && err.contains("schedstat"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&degraded.stdout).contains("degraded mode"));
}

#[test]
fn runq_bad_input_is_named() {
    let env = Env::new();
    assert!(env
        .fails(&["runq", "--interval", "1ms", "--duration", "1s"])
        .contains("too short"));
    assert!(env
        .fails(&["runq", "--duration", "0s"])
        .contains("--duration 0"));
    let err = env.fails(&["runq", "--outlier", "soon"]);
    assert!(err.contains("--outlier") && err.contains("'soon'"), "{err}");
    let imported = env.import(&env.trimodal("t.csv", 1, 0.0), &[]);
    let err = env.fails(&["runq", "--duration", "1s", "--baseline", &imported]);
    assert!(
        err.contains("give a run recorded by `tailhunt runq`"),
        "{err}"
    );
    if bpf_ready("runq_bad_input_is_named (cgroup part)") {
        let err = env.fails(&["runq", "--duration", "1s", "--cgroup", "/tmp"]);
        assert!(err.contains("'/tmp' is not a cgroup directory"), "{err}");
        // Nothing was measured, so no run is left behind.
        let runs = env.json("runs", &["runs"]);
        let runq = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "runq")
            .count();
        assert_eq!(runq, 0, "{runs}");
    }
}
