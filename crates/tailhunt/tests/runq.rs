//! End-to-end tests of `tailhunt runq` on the real kernel: BPF programs, cgroups and CPU hogs
//! the tests create themselves. They need root and kernel BTF (the CI machine has both) and
//! run one at a time: each owns CPU 0 for its workload while the tracer runs on CPU 1.

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::Duration;

use common::cgroups::{bpf_ready, Cgroups, HOG, SLEEPER, WORKER};
use common::{check_schema, Env, BIN};
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

/// Ten one-second intervals; the hog starts 4.5 s in. Returns the document and the victim's
/// p99s when calm (intervals 1-3) and with the hog (6-9).
fn neighbour_run(
    cg: &mut Cgroups,
    env: &Env,
    hog_group: Option<&str>,
) -> (Value, Vec<f64>, Vec<f64>) {
    cg.spawn(Some("victim"), 0, SLEEPER, 12.0);
    let base = cg.v2_dir(None);
    let runq = start_runq(
        env,
        &["--duration", "10s", "--cgroup", base.to_str().unwrap()],
    );
    sleep(Duration::from_millis(4500));
    for _ in 0..2 {
        cg.spawn(hog_group, 0, HOG, 6.5);
    }
    let doc = finish(runq);
    let victim = rows(&doc, &cg.display("victim"));
    let p = p99s(&victim);
    assert!(p.len() >= 10, "ten intervals expected: {p:?}");
    (doc.clone(), p[1..4].to_vec(), p[6..10].to_vec())
}

#[test]
fn root_runq_names_the_noisy_neighbour_cgroup() {
    if !bpf_ready("root_runq_names_the_noisy_neighbour_cgroup") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let mut cg = Cgroups::new("nn");
    cg.group("victim");
    cg.group("neighbour");
    // A batch container with a large CPU request next to a small service.
    cg.set_v1("neighbour", "cpu.shares", "8192");
    let (doc, calm, hog) = neighbour_run(&mut cg, &env, Some("neighbour"));
    let (calm_p99, hog_p99) = (median(calm.clone()), median(hog.clone()));
    assert!(
        hog_p99 > 10.0 * calm_p99,
        "victim p99 calm {calm:?} vs hog {hog:?}"
    );
    let victim = rows(&doc, &cg.display("victim"));
    let neighbour = cg.display("neighbour");
    assert_eq!(top_other(&victim[6..10], &cg.display("victim")), neighbour);
    let found = detectors(&doc);
    assert!(
        found.iter().any(|(d, s)| d == "noisy-neighbor"
            && s.contains(&cg.display("victim"))
            && s.contains(&neighbour)),
        "{found:#?}"
    );
    assert!(
        !found.iter().any(|(d, _)| d == "cpu-throttled"),
        "{found:#?}"
    );
    // The stored run diagnoses the same way.
    let run = doc["run_id"].as_str().unwrap();
    let again = env.json("diagnose", &["diagnose", run]);
    assert!(again["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["detector"] == "noisy-neighbor"));
}

#[test]
fn root_runq_names_system_services_when_the_hog_is_outside_any_container() {
    if !bpf_ready("root_runq_names_system_services_when_the_hog_is_outside_any_container") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let mut cg = Cgroups::new("sys");
    cg.group("victim");
    // A container with a small CPU request (Kubernetes gives 100m 102 shares) on a host whose
    // own services want the CPU.
    cg.set_v1("victim", "cpu.shares", "102");
    let (doc, calm, hog) = neighbour_run(&mut cg, &env, None);
    assert!(
        median(hog.clone()) > 10.0 * median(calm.clone()),
        "victim p99 calm {calm:?} vs hog {hog:?}"
    );
    let victim = rows(&doc, &cg.display("victim"));
    assert_eq!(top_other(&victim[6..10], &cg.display("victim")), "system");
    let found = detectors(&doc);
    assert!(
        found
            .iter()
            .any(|(d, s)| d == "noisy-neighbor" && s.contains("system services")),
        "{found:#?}"
    );
}

#[test]
fn root_runq_says_cpu_throttled_not_neighbour_when_the_quota_bites() {
    if !bpf_ready("root_runq_says_cpu_throttled_not_neighbour_when_the_quota_bites") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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
        "{found:#?}"
    );
    assert!(
        !found.iter().any(|(d, _)| d == "noisy-neighbor"),
        "{found:#?}"
    );
}
