//! Stores written by earlier versions stay readable: every run of every kind in a store written
//! by the schema-3 code (`tests/fixtures/store-schema3.db`: import, load sweeps — one at 1,234
//! and 1,231 req/s —, pcap, live capture, runq, both ends of a transfer, sockets) lists,
//! analyses and diagnoses, with the findings it gave then.

mod common;

use std::collections::BTreeMap;

use common::Env;
use serde_json::Value;

fn fixture(env: &Env) {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/store-schema3.db"
    );
    std::fs::copy(src, env.db()).expect("copy the fixture store");
}

#[test]
fn every_run_of_a_schema_3_store_opens_analyses_and_diagnoses_as_before() {
    let env = Env::new();
    fixture(&env);
    let expected: BTreeMap<String, Value> =
        serde_json::from_str(include_str!("fixtures/store-schema3.findings.json")).unwrap();
    let runs = env.json("runs", &["runs"]);
    let listed: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), expected.len(), "{runs:#}");
    for (id, want) in &expected {
        assert!(listed.contains(&id.as_str()), "run {id} not listed");
        let doc = env.json("diagnose", &["diagnose", id]);
        assert_eq!(doc["run"]["kind"], want["kind"], "run {id}");
        let mut found: Vec<String> = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["detector"].as_str().unwrap().to_string())
            .collect();
        found.sort();
        let want: Vec<String> = serde_json::from_value(want["findings"].clone()).unwrap();
        assert_eq!(found, want, "findings of run {id} ({})", doc["run"]["kind"]);
        let out = env.run(&["analyze", id]);
        assert!(
            out.status.success(),
            "analyze {id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
