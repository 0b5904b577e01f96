//! Snapshot of the text `analyze` prints for a fixed data set (seeded, so the numbers are
//! stable). Regenerate after an intended change with `UPDATE_SNAPSHOTS=1 cargo test --test snapshot`.

mod common;

use common::Env;

fn check(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; run with UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "text output changed from {}:\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn analyze_text_output_of_the_trimodal_set() {
    let env = Env::new();
    let before = env.import(&env.trimodal("b.csv", 1, 0.0), &[]);
    let after = env.import(&env.trimodal("a.csv", 2, 0.02), &[]);
    let text = env.ok(&[
        "analyze",
        &after,
        "--compare",
        &before,
        "--expect-floor",
        "450us",
    ]);
    let text = text
        .replace(&after, "RUN_AFTER")
        .replace(&before, "RUN_BEFORE");
    check("analyze_trimodal.txt", &text);
}
