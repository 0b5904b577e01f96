//! Helpers for end-to-end tests: a temporary store, running the real binary, schema checks.
#![allow(dead_code)]

pub mod agent;
pub mod browser;
pub mod capture;
pub mod cgroups;
pub mod databases;
pub mod odd;
pub mod servers;
pub mod sock;
pub mod tls;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_tailhunt");

/// A temporary directory with its own store.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn db(&self) -> PathBuf {
        self.path("t.db")
    }

    /// The binary with `--db` pointing at this env's store.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_remove("TAILHUNT_DB").arg("--db").arg(self.db());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run tailhunt")
    }

    /// Runs, asserts success, returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tailhunt {args:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Runs with `--json`, asserts success and that the output matches `schema/<schema>.schema.json`.
    pub fn json(&self, schema: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let text = self.ok(&all);
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        check_schema(schema, &value);
        value
    }

    /// The row of run `id` in `tailhunt runs --json`.
    pub fn run_row(&self, id: &str) -> Value {
        let runs = self.json("runs", &["runs"]);
        runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("run {id} not listed: {runs:#}"))
            .clone()
    }

    /// Runs, asserts exit status 2 and a one-line message on stderr; returns it.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "tailhunt {args:?} should fail with 2; stdout: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let err = String::from_utf8(out.stderr).expect("utf-8 stderr");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "one-line error expected, got:\n{err}"
        );
        assert!(err.starts_with("tailhunt: "), "{err}");
        err
    }

    /// Writes a synthetic trimodal CSV and returns its path.
    pub fn trimodal(&self, name: &str, seed: u64, shift: f64) -> PathBuf {
        let path = self.path(name);
        let (s, sh) = (seed.to_string(), shift.to_string());
        self.ok(&[
            "lab",
            "synth",
            "trimodal",
            "--seed",
            &s,
            "--shift",
            &sh,
            "-o",
            path.to_str().unwrap(),
        ]);
        path
    }

    /// Imports a file, returns the run id.
    pub fn import(&self, file: &Path, extra: &[&str]) -> String {
        let mut args = vec!["import", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.json("import", &args)["run_id"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// Runs a timing-sensitive test body up to three times, each from scratch (its own captures,
/// namespaces or cgroups): the body panics when a check fails, and a burst of unrelated load on
/// a shared host can spoil one run. Fails, with the last panic, only when all three do.
pub fn retry_on_noise(name: &str, body: fn()) {
    for attempt in 1..3 {
        match std::panic::catch_unwind(body) {
            Ok(()) => return,
            Err(_) => eprintln!(
                "{name}: attempt {attempt} of 3 failed (its message is above); running it again"
            ),
        }
    }
    body();
}

/// Whether the tests run as root (namespaces, mounts and dropping to `nobody` need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2)?.parse::<u32>().ok())
        })
        == Some(0)
}

pub fn schema_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(format!("{name}.schema.json"))
}

/// Validates `value` against a committed schema, listing every violation on failure.
pub fn check_schema(name: &str, value: &Value) {
    let text = std::fs::read_to_string(schema_path(name)).expect("schema file");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "output does not match schema/{name}.schema.json:\n{}\n{value:#}",
        errors.join("\n")
    );
}
