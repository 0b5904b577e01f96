//! Scoring: what each detector named against what the case planted.
//!
//! In: a case's [`Truth`] and tailhunt's JSON document per view. Out: a [`CaseScore`]: per view
//! and detector the units named and planted, true positives (a finding naming a planted flow,
//! cgroup, cgroup pair or load target), false positives (naming anything else) and false
//! negatives (a planted unit nobody named), the failures on healthy twins (any finding of a
//! scored detector at or above [`MEDIUM`] confidence), and explanations that contradict the
//! truth.
//!
//! What a finding names is read from its text, per detector: the flows (`A:p -> B:q`) in the
//! summary (`microburst`, `link-saturated`, `receive-window-limited`, `application-timeout`)
//! or in the evidence
//! notes (`nagle-stall`, whose summary names none); for `noisy-neighbor` the cgroup before the
//! summary's first `": "` and each neighbour in its attribution series (`runq_wait_ns{by=..}`);
//! for `cpu-throttled` the cgroup; for `latency-rises-as-load-falls` the sweep's target.
//!
//! A flow a `microburst` finding lists behind the bursts with ~0% of their bytes (under 1%) is
//! a false positive even when it is a planted source elsewhere: the finding does not say it made
//! these bursts.
//!
//! A run-queue finding naming a cgroup the case did not create (another workload on a shared
//! host) is listed as foreign and not counted: the case knows nothing of it.
//!
//! A `noisy-neighbor` finding that blames a cgroup the case set loose on the CPU (a *taker*)
//! for the slowdown of a cgroup other than the planted victim (the host's own processes, say)
//! is a side effect of the case, neither right nor wrong, and is listed but not counted —
//! unless its slow intervals began more than a second before the taker existed.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Truth;

/// The detectors scored.
pub const DETECTORS: [&str; 8] = [
    "microburst",
    "link-saturated",
    "nagle-stall",
    "receive-window-limited",
    "application-timeout",
    "noisy-neighbor",
    "cpu-throttled",
    "latency-rises-as-load-falls",
];

/// "Medium" confidence: a finding at or above it on a healthy twin is a failure.
pub const MEDIUM: f64 = 0.5;

/// What a detector must name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Unit {
    /// Connections from `client_ip` to `server` (`ip:port`), in either orientation.
    Flow {
        /// Client address.
        client_ip: String,
        /// Server `ip:port`.
        server: String,
    },
    /// A cgroup, as tailhunt names it (`/a/b`, `system`).
    Cgroup {
        /// Its name.
        cgroup: String,
    },
    /// A cgroup and the neighbour that took its CPU.
    Pair {
        /// The one that waited.
        victim: String,
        /// The one it waited behind.
        neighbour: String,
    },
    /// A load target (`tcp://198.18.60.2:7200`).
    Target {
        /// The URL.
        target: String,
    },
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unit::Flow { client_ip, server } => write!(f, "{client_ip}:* -> {server}"),
            Unit::Cgroup { cgroup } => write!(f, "{cgroup}"),
            Unit::Pair { victim, neighbour } => write!(f, "{victim} behind {neighbour}"),
            Unit::Target { target } => write!(f, "{target}"),
        }
    }
}

/// True positives, false positives, false negatives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Planted units named.
    pub tp: u32,
    /// Units named that were not planted.
    pub fp: u32,
    /// Planted units not named.
    #[serde(rename = "fn")]
    pub fn_: u32,
}

impl Counts {
    /// Adds another's counts.
    pub fn add(&mut self, o: Counts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }

    /// tp / (tp + fp); None without any finding.
    pub fn precision(&self) -> Option<f64> {
        let d = self.tp + self.fp;
        (d > 0).then(|| self.tp as f64 / d as f64)
    }

    /// tp / (tp + fn); None without anything planted.
    pub fn recall(&self) -> Option<f64> {
        let d = self.tp + self.fn_;
        (d > 0).then(|| self.tp as f64 / d as f64)
    }
}

/// One unit a finding named, and how it was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedUnit {
    /// The unit, in words.
    pub unit: String,
    /// `tp`, `fp`, `side-effect`, `foreign` or `extra` (one more connection of a planted
    /// pattern).
    pub judged: String,
    /// The finding's confidence.
    pub confidence: f64,
    /// The finding's summary.
    pub summary: String,
}

/// One detector on one view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The view.
    pub view: String,
    /// The detector.
    pub detector: String,
    /// What was planted for it, in words (with the count of connections).
    pub planted: Vec<String>,
    /// What its findings named.
    pub named: Vec<NamedUnit>,
    /// Planted units it did not name.
    pub missed: Vec<String>,
    /// The counts.
    pub counts: Counts,
    /// Explanations that contradict the truth.
    pub contradictions: Vec<String>,
}

/// A case's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseScore {
    /// The case.
    pub case: String,
    /// Whether it is a healthy twin.
    pub twin: bool,
    /// The views analysed.
    pub views: Vec<String>,
    /// Per detector, summed over views.
    pub counts: BTreeMap<String, Counts>,
    /// Per view and detector, where anything was planted or named.
    pub outcomes: Vec<Outcome>,
    /// On a twin: the findings at or above medium confidence (`view: detector (confidence):
    /// summary`).
    pub twin_failures: Vec<String>,
    /// `tailhunt load`'s "client is saturated" warnings, against the client's measured CPU.
    pub client_warnings: Vec<ClientWarning>,
    /// Causes set up without effect by the programs' own records (not scored), in words.
    pub unplanted: Vec<String>,
    /// What the programs' own records say, where it helps to read a miss (the sleeper's
    /// lateness by second).
    pub context: Option<String>,
}

/// A load run's "client is saturated" warning and what the client's CPU time says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientWarning {
    /// The load run's view.
    pub view: String,
    /// The warning.
    pub warning: String,
    /// The client process's CPU time over its run, as a share of one CPU.
    pub client_cpu_share: Option<f64>,
    /// `consistent` (the client used at least half a CPU) or `wrong-side` (it did not: the
    /// lag was the host's or the server's).
    pub judged: String,
}

/// A client using less than this share of a CPU was not saturated.
const SATURATED_CPU_SHARE: f64 = 0.5;

fn client_warnings(truth: &Truth, view: &str, doc: &Value) -> Vec<ClientWarning> {
    let share = truth.facts["load_cpu_share"][view].as_f64();
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    steps
        .iter()
        .flat_map(|s| s["warnings"].as_array().cloned().unwrap_or_default())
        .filter_map(|w| w.as_str().map(str::to_string))
        .filter(|w| w.contains("client is saturated"))
        .map(|warning| ClientWarning {
            view: view.to_string(),
            warning,
            client_cpu_share: share,
            judged: match share {
                Some(s) if s < SATURATED_CPU_SHARE => "wrong-side".into(),
                Some(_) => "consistent".into(),
                None => "unknown".into(),
            },
        })
        .collect()
}

/// Scores one case.
pub fn score(truth: &Truth, outputs: &[(String, Value)]) -> CaseScore {
    let mut out = CaseScore {
        case: truth.case.clone(),
        twin: truth.twin,
        views: outputs.iter().map(|(v, _)| v.clone()).collect(),
        counts: BTreeMap::new(),
        outcomes: Vec::new(),
        twin_failures: Vec::new(),
        client_warnings: Vec::new(),
        unplanted: truth
            .unplanted
            .iter()
            .map(|p| format!("{} for {}: {}", p.unit, p.detector, p.note))
            .collect(),
        context: context(truth),
    };
    for (view, doc) in outputs {
        out.client_warnings
            .extend(client_warnings(truth, view, doc));
        let findings = findings_of(doc);
        let kind = truth.views.iter().find(|v| v.name == *view).map(|v| v.kind);
        for det in DETECTORS {
            if kind.is_some_and(|k| !k.runs(det)) {
                continue;
            }
            let o = score_detector(truth, view, det, &findings, origin(doc));
            if o.planted.is_empty() && o.named.is_empty() {
                continue;
            }
            out.counts.entry(det.to_string()).or_default().add(o.counts);
            out.outcomes.push(o);
        }
        if truth.twin {
            for f in &findings {
                let det = f["detector"].as_str().unwrap_or("");
                let conf = f["confidence"].as_f64().unwrap_or(0.0);
                let units = named(det, f, None);
                let foreign = !units.is_empty() && units.iter().all(|n| is_foreign(truth, n));
                if DETECTORS.contains(&det) && conf >= MEDIUM && !foreign {
                    out.twin_failures.push(format!(
                        "{view}: {det} ({:.0}%): {}",
                        conf * 100.0,
                        f["summary"].as_str().unwrap_or("")
                    ));
                }
            }
        }
    }
    out
}

/// The sleeper's own lateness p99 by second, in ms, when the case has one.
fn context(truth: &Truth) -> Option<String> {
    let ms = |key: &str| -> Option<String> {
        let v: Vec<String> = truth.facts[key]
            .as_array()?
            .iter()
            .filter_map(Value::as_f64)
            .map(|ns| format!("{:.2}", ns / 1e6))
            .collect();
        Some(v.join(", "))
    };
    let calm = ms("victim_late_p99_per_second_calm_ns")?;
    let after = ms("victim_late_p99_per_second_after_onset_ns")?;
    Some(format!(
        "the sleeper's own lateness p99 by second: {calm} ms before the onset, {after} ms after it"
    ))
}

/// The findings of a document: `findings` at the top (pcap, runq, load, diagnose).
fn findings_of(doc: &Value) -> Vec<Value> {
    doc["findings"].as_array().cloned().unwrap_or_default()
}

/// A document's clock origin `(mono_ns, wall_ns)`, when its evidence ranges are on the run's
/// monotonic clock (runq); captures' ranges are epoch times already.
fn origin(doc: &Value) -> Option<(i64, i64)> {
    let o = &doc["started"]["origin"];
    Some((o["mono_ns"].as_i64()?, o["wall_ns"].as_i64()?))
}

fn score_detector(
    truth: &Truth,
    view: &str,
    det: &str,
    findings: &[Value],
    origin: Option<(i64, i64)>,
) -> Outcome {
    let planted: Vec<&super::Planted> =
        truth.planted.iter().filter(|p| p.detector == det).collect();
    let mut matched: Vec<u32> = vec![0; planted.len()];
    let mut o = Outcome {
        view: view.to_string(),
        detector: det.to_string(),
        planted: planted
            .iter()
            .map(|p| format!("{} (x{})", p.unit, p.count))
            .collect(),
        named: Vec::new(),
        missed: Vec::new(),
        counts: Counts::default(),
        contradictions: Vec::new(),
    };
    let target = truth
        .views
        .iter()
        .find(|v| v.name == view)
        .and_then(|v| v.target.clone());
    for f in findings.iter().filter(|f| f["detector"] == det) {
        let conf = f["confidence"].as_f64().unwrap_or(0.0);
        let summary = f["summary"].as_str().unwrap_or("").to_string();
        o.contradictions
            .extend(contradictions(truth, det, f, origin));
        for n in named(det, f, target.as_deref()) {
            let zero = det == "microburst" && burst_share(&summary, &n).is_some_and(|s| s < 1.0);
            let hit = planted.iter().position(|p| !zero && n.matches(&p.unit));
            let judged = match hit {
                Some(i) if matched[i] < planted[i].count => {
                    matched[i] += 1;
                    o.counts.tp += 1;
                    "tp"
                }
                Some(_) => "extra",
                None if is_foreign(truth, &n) => "foreign",
                None if is_side_effect(truth, &n, f, origin) => "side-effect",
                None if zero => {
                    o.counts.fp += 1;
                    "fp (~0% of the burst bytes)"
                }
                None => {
                    o.counts.fp += 1;
                    "fp"
                }
            };
            o.named.push(NamedUnit {
                unit: n.to_string(),
                judged: judged.into(),
                confidence: conf,
                summary: summary.clone(),
            });
        }
    }
    for (p, m) in planted.iter().zip(&matched) {
        if *m < p.count {
            o.counts.fn_ += p.count - m;
            o.missed.push(format!(
                "{} ({} of {} not named)",
                p.unit,
                p.count - m,
                p.count
            ));
        }
    }
    o
}

/// A concrete unit a finding named.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    Flow(SocketAddr, SocketAddr),
    Cgroup(String),
    Pair(String, String),
    Target(String),
}

impl std::fmt::Display for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Named::Flow(a, b) => write!(f, "{a} -> {b}"),
            Named::Cgroup(c) | Named::Target(c) => write!(f, "{c}"),
            Named::Pair(v, n) => write!(f, "{v} behind {n}"),
        }
    }
}

impl Named {
    fn matches(&self, u: &Unit) -> bool {
        match (self, u) {
            (Named::Flow(a, b), Unit::Flow { client_ip, server }) => {
                let is = |c: &SocketAddr, s: &SocketAddr| {
                    c.ip().to_string() == *client_ip && s.to_string() == *server
                };
                is(a, b) || is(b, a)
            }
            (Named::Cgroup(c), Unit::Cgroup { cgroup }) => c == cgroup,
            (Named::Pair(v, n), Unit::Pair { victim, neighbour }) => v == victim && n == neighbour,
            (Named::Target(t), Unit::Target { target }) => t == target,
            _ => false,
        }
    }
}

/// What a finding names (see the module docs).
fn named(det: &str, f: &Value, target: Option<&str>) -> Vec<Named> {
    let summary = f["summary"].as_str().unwrap_or("");
    let head = || summary.split_once(": ").map(|(h, _)| h.to_string());
    match det {
        "nagle-stall" => {
            let notes: Vec<&str> = f["evidence"]
                .as_array()
                .map(|e| e.iter().filter_map(|e| e["note"].as_str()).collect())
                .unwrap_or_default();
            dedup(notes.iter().flat_map(|n| flows_in(n)).collect())
        }
        "noisy-neighbor" => {
            let Some(victim) = head() else {
                return Vec::new();
            };
            let by = f["evidence"].as_array().cloned().unwrap_or_default();
            dedup(
                by.iter()
                    .filter_map(|e| e["series"].as_str())
                    .filter_map(|s| s.strip_prefix("runq_wait_ns{by="))
                    .map(|s| s.split(",cgroup=").next().unwrap_or(s).to_string())
                    .map(|n| Named::Pair(victim.clone(), n))
                    .collect(),
            )
        }
        "cpu-throttled" => head().map(Named::Cgroup).into_iter().collect(),
        "latency-rises-as-load-falls" => target
            .map(|t| Named::Target(t.into()))
            .into_iter()
            .collect(),
        _ => dedup(flows_in(summary)),
    }
}

fn dedup(v: Vec<Named>) -> Vec<Named> {
    let mut out: Vec<Named> = Vec::new();
    for n in v {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The share of the burst bytes a microburst summary gives a flow (`A -> B (25%)`), percent.
fn burst_share(summary: &str, n: &Named) -> Option<f64> {
    let at = summary.find(&format!("{n} ("))? + n.to_string().len() + 2;
    summary[at..].split('%').next()?.parse().ok()
}

/// Every `A:p -> B:q` in a text.
fn flows_in(text: &str) -> Vec<Named> {
    let trim = |w: &str| {
        w.trim_matches(|c: char| matches!(c, ':' | ',' | ';' | '(' | ')' | '[' | ']'))
            .to_string()
    };
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(" -> ") {
        let left = rest[..at].split_whitespace().last().map(trim);
        let right = rest[at + 4..].split_whitespace().next().map(trim);
        if let (Some(l), Some(r)) = (left, right) {
            if let (Ok(a), Ok(b)) = (l.parse(), r.parse()) {
                out.push(Named::Flow(a, b));
            }
        }
        rest = &rest[at + 4..];
    }
    out
}

/// A run-queue finding about a cgroup the case did not create (another workload on a shared
/// host; `system` is the host's own and counts as the case's).
fn is_foreign(truth: &Truth, n: &Named) -> bool {
    let Some(top) = truth.facts["case_cgroup"].as_str() else {
        return false;
    };
    let ours = |c: &str| c == "system" || c.starts_with(&format!("{top}/"));
    match n {
        Named::Pair(v, b) => !ours(v) || !ours(b),
        Named::Cgroup(c) => !ours(c),
        _ => false,
    }
}

/// A neighbour finding blaming a taker for a non-victim's wait, not earlier than the taker.
fn is_side_effect(truth: &Truth, n: &Named, f: &Value, origin: Option<(i64, i64)>) -> bool {
    let Named::Pair(victim, neighbour) = n else {
        return false;
    };
    let planted_victim = truth
        .planted
        .iter()
        .any(|p| matches!(&p.unit, Unit::Pair { victim: v, .. } if v == victim));
    let Some(since) = truth
        .takers
        .iter()
        .find(|(c, _)| c == neighbour)
        .map(|t| t.1)
    else {
        return false;
    };
    !planted_victim && elevated_start(f, origin).is_none_or(|s| s + 1_000_000_000 >= since)
}

/// Where a run-queue finding's slow intervals begin (its first evidence's range), epoch ns.
fn elevated_start(f: &Value, origin: Option<(i64, i64)>) -> Option<i64> {
    let t = f["evidence"][0]["range_ns"][0].as_i64()?;
    Some(origin.map_or(t, |(mono, wall)| wall + (t - mono)))
}

/// Statements of a finding that the truth contradicts.
fn contradictions(truth: &Truth, det: &str, f: &Value, origin: Option<(i64, i64)>) -> Vec<String> {
    let summary = f["summary"].as_str().unwrap_or("");
    let mut out = Vec::new();
    let before_close = truth.facts["response_bytes_before_close"].as_u64();
    if det == "application-timeout" && before_close == Some(0) && summary.contains("still arriving")
    {
        out.push(format!(
            "says the response was still arriving, but the server had sent no response byte before the close ({summary})"
        ));
    }
    let says_none = ["no response byte", "had sent one byte"]
        .iter()
        .any(|p| summary.contains(p));
    if let Some(n) = before_close.filter(|&n| n > 0 && det == "application-timeout" && says_none) {
        out.push(format!(
            "says no response byte came, but the client read {n} bytes of it before the close ({summary})"
        ));
    }
    if det == "noisy-neighbor" {
        let start = elevated_start(f, origin);
        for n in named(det, f, None) {
            let Named::Pair(_, neighbour) = n else {
                continue;
            };
            let since = truth.takers.iter().find(|(c, _)| *c == neighbour);
            if let (Some(start), Some((_, since))) = (start, since) {
                if start + 1_000_000_000 < *since {
                    out.push(format!(
                        "its slow intervals begin {:.1} s before {neighbour} started",
                        (since - start) as f64 / 1e9
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::truth::{Planted, Spec, View};
    use serde_json::json;

    fn truth(planted: Vec<Planted>, twin: bool) -> Truth {
        Truth {
            case: "c".into(),
            seed: 1,
            twin,
            spec: Spec::Runq(crate::truth::spec::RunqSpec {
                variant: crate::truth::RunqVariant::Unequal,
            }),
            planted,
            unplanted: Vec::new(),
            takers: vec![("/t/hogs".into(), 5_000_000_000)],
            views: vec![View {
                name: "v".into(),
                kind: crate::truth::ViewKind::Capture,
                position: String::new(),
                analysis: Vec::new(),
                target: None,
            }],
            programs: json!({}),
            facts: json!({"response_bytes_before_close": 0}),
        }
    }

    fn flow(count: u32) -> Planted {
        Planted {
            detector: "receive-window-limited".into(),
            unit: Unit::Flow {
                client_ip: "198.18.30.2".into(),
                server: "198.18.32.2:7400".into(),
            },
            count,
            note: String::new(),
        }
    }

    #[test]
    fn flows_are_read_from_summaries_in_either_orientation() {
        let t = truth(vec![flow(2)], false);
        let doc = json!({"findings": [
            {"detector": "receive-window-limited", "confidence": 0.9,
             "summary": "tcp 198.18.30.2:40000 -> 198.18.32.2:7400: the receiver's window"},
            {"detector": "receive-window-limited", "confidence": 0.9,
             "summary": "tcp 198.18.32.2:7400 -> 198.18.30.2:40002: reversed"},
            {"detector": "receive-window-limited", "confidence": 0.9,
             "summary": "tcp 198.18.30.2:40004 -> 198.18.32.2:7401: another server"}
        ]});
        let s = score(&t, &[("v".into(), doc)]);
        let c = s.counts["receive-window-limited"];
        assert_eq!((c.tp, c.fp, c.fn_), (2, 1, 0), "{s:#?}");
    }

    #[test]
    fn a_flow_behind_the_bursts_with_no_share_of_their_bytes_is_not_credited() {
        let p = Planted {
            detector: "microburst".into(),
            unit: Unit::Flow {
                client_ip: "198.18.51.2".into(),
                server: "198.18.50.2:7001".into(),
            },
            count: 1,
            note: String::new(),
        };
        let doc = json!({"findings": [{"detector": "microburst", "confidence": 0.9,
            "summary": "microbursts to 198.18.50.2: behind the bursts: tcp 198.18.50.2:1 -> 198.18.51.11:7100 (99%), tcp 198.18.51.2:2 -> 198.18.50.2:7001 (0%)"}]});
        let s = score(&truth(vec![p], false), &[("v".into(), doc)]);
        let c = s.counts["microburst"];
        assert_eq!((c.tp, c.fp, c.fn_), (0, 2, 1), "{s:#?}");
    }

    #[test]
    fn a_detector_is_scored_only_on_views_it_runs_on() {
        let mut t = truth(vec![flow(1)], false);
        t.views[0].kind = crate::truth::ViewKind::Runq;
        let s = score(&t, &[("v".into(), json!({"findings": []}))]);
        assert!(s.counts.is_empty(), "{s:#?}");
    }

    #[test]
    fn silence_is_a_miss_and_a_twin_finding_is_a_failure() {
        let s = score(
            &truth(vec![flow(1)], false),
            &[("v".into(), json!({"findings": []}))],
        );
        assert_eq!(s.counts["receive-window-limited"].fn_, 1);
        let doc = json!({"findings": [{"detector": "microburst", "confidence": 0.6,
            "summary": "microbursts to 198.18.50.2: behind the bursts: tcp 198.18.52.2:1 -> 198.18.50.2:7000 (0%)"}]});
        let s = score(&truth(Vec::new(), true), &[("v".into(), doc)]);
        assert_eq!(s.twin_failures.len(), 1);
        assert_eq!(s.counts["microburst"].fp, 1);
    }

    #[test]
    fn neighbour_pairs_side_effects_and_contradictions() {
        let pair = Planted {
            detector: "noisy-neighbor".into(),
            unit: Unit::Pair {
                victim: "/t/victim".into(),
                neighbour: "/t/hogs".into(),
            },
            count: 1,
            note: String::new(),
        };
        let nn = |victim: &str, by: &str, start: i64| {
            json!({"detector": "noisy-neighbor", "confidence": 0.95,
                "summary": format!("{victim}: run-queue p99 rose 50x (1ms -> 50ms) while x took its CPU"),
                "evidence": [{"series": format!("runq_latency{{cgroup={victim}}}"), "range_ns": [start, start + 1]},
                             {"series": format!("runq_wait_ns{{by={by},cgroup={victim}}}")}]})
        };
        let doc = json!({"findings": [
            nn("/t/victim", "/t/hogs", 5_000_000_000),
            nn("system", "/t/hogs", 5_000_000_000),
            nn("system", "/t/victim", 5_000_000_000),
            nn("/t/other", "/t/hogs", 1_000_000_000),
        ]});
        let mut t = truth(vec![pair], false);
        t.views[0].kind = crate::truth::ViewKind::Runq;
        let s = score(&t, &[("v".into(), doc)]);
        let c = s.counts["noisy-neighbor"];
        assert_eq!((c.tp, c.fp, c.fn_), (1, 2, 0), "{s:#?}");
        let judged: Vec<&str> = s.outcomes[0]
            .named
            .iter()
            .map(|n| n.judged.as_str())
            .collect();
        assert_eq!(judged, ["tp", "side-effect", "fp", "fp"]);
        assert_eq!(s.outcomes[0].contradictions.len(), 1, "{s:#?}");
    }

    #[test]
    fn a_finding_naming_two_neighbours_names_both() {
        let pair = |n: &str| Planted {
            detector: "noisy-neighbor".into(),
            unit: Unit::Pair {
                victim: "/t/victim".into(),
                neighbour: n.into(),
            },
            count: 1,
            note: String::new(),
        };
        let doc = json!({"findings": [{"detector": "noisy-neighbor", "confidence": 0.9,
            "summary": "/t/victim: run-queue p99 rose 50x (1ms -> 50ms) while /t/n1 and /t/n2 took its CPU",
            "evidence": [{"series": "runq_latency{cgroup=/t/victim}"},
                         {"series": "runq_wait_ns{by=/t/n1,cgroup=/t/victim}"},
                         {"series": "runq_wait_ns{by=/t/n2,cgroup=/t/victim}"}]}]});
        let mut t = truth(vec![pair("/t/n1"), pair("/t/n2")], false);
        t.views[0].kind = crate::truth::ViewKind::Runq;
        let s = score(&t, &[("v".into(), doc)]);
        let c = s.counts["noisy-neighbor"];
        assert_eq!((c.tp, c.fp, c.fn_), (2, 0, 0), "{s:#?}");
    }

    #[test]
    fn findings_about_cgroups_the_case_did_not_make_are_not_counted() {
        let mut t = truth(Vec::new(), true);
        t.views[0].kind = crate::truth::ViewKind::Runq;
        t.facts["case_cgroup"] = json!("/t");
        let doc = json!({"findings": [
            {"detector": "noisy-neighbor", "confidence": 0.95,
             "summary": "/t/victim: run-queue p99 rose 50x (1ms -> 50ms) while x took its CPU",
             "evidence": [{"series": "runq_latency{cgroup=/t/victim}"},
                          {"series": "runq_wait_ns{by=/other-test/hogs,cgroup=/t/victim}"}]},
            {"detector": "noisy-neighbor", "confidence": 0.95,
             "summary": "/t/victim: run-queue p99 rose 50x (1ms -> 50ms) while x took its CPU",
             "evidence": [{"series": "runq_latency{cgroup=/t/victim}"},
                          {"series": "runq_wait_ns{by=system,cgroup=/t/victim}"}]}
        ]});
        let s = score(&t, &[("v".into(), doc)]);
        let judged: Vec<&str> = s.outcomes[0]
            .named
            .iter()
            .map(|n| n.judged.as_str())
            .collect();
        assert_eq!(judged, ["foreign", "fp"]);
        assert_eq!(s.twin_failures.len(), 1, "{s:#?}");
    }

    #[test]
    fn a_timeout_explanation_that_claims_a_response_is_contradicted() {
        let doc = json!({"findings": [{"detector": "application-timeout", "confidence": 0.85,
            "summary": "tcp 198.18.40.2:5 -> 198.18.41.2:7500: the client gave up 1.0s after its request (a 1 s timeout?) while the response was still arriving"}]});
        let s = score(&truth(Vec::new(), false), &[("v".into(), doc)]);
        assert_eq!(s.outcomes[0].contradictions.len(), 1);
    }

    #[test]
    fn a_timeout_explanation_that_denies_a_response_is_contradicted() {
        let summary = "tcp 198.18.40.2:5 -> 198.18.41.2:7500: the client gave up 1.00s after its request (a 1 s timeout?) with no response byte from the server";
        let doc = json!({"findings": [{"detector": "application-timeout", "confidence": 0.85,
            "summary": summary}]});
        let mut t = truth(Vec::new(), false);
        assert!(score(&t, &[("v".into(), doc.clone())]).outcomes[0]
            .contradictions
            .is_empty());
        t.facts = json!({"response_bytes_before_close": 4096});
        let s = score(&t, &[("v".into(), doc)]);
        assert_eq!(s.outcomes[0].contradictions.len(), 1, "{s:#?}");
    }
}
