//! What durability by time costs: a paced source committed every interval against the same
//! source committed only when blocks fill.
//!
//! ```text
//! cargo run --release --locked -p tailhunt-store --example commits -- [--seconds S]
//! ```
//!
//! A load generator at R requests/s hands the store R x interval samples per commit interval
//! (here in batches of 64, as the load engine's hand-off does). With durability by time the
//! writer then writes the open block as it stands and commits ([`RunWriter::flush`], what
//! `commit_if_due` does once the interval has passed); without it, it commits every 8 full
//! blocks (65,536 samples). The simulated run lasts `--seconds` (default 120) of source time,
//! pushed as fast as the CPU allows: the extra CPU time divided by the simulated seconds is
//! the share of one CPU that durability costs at that rate (each figure the median of 3
//! rounds). Sizes are db + wal after a checkpoint. Output: a markdown table. `bench/store.sh`
//! runs this.

use std::error::Error;
use std::path::Path;
use std::time::Instant;

use tailhunt_model::{ClockOrigin, Outcome, Sample, SeriesMeta, SeriesSink};
use tailhunt_store::{RunWriter, Store};
use tailhunt_synth as synth;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// Samples per push: the load engine's batches are about this size at moderate rates.
const BATCH: usize = 64;

/// Rounds per figure; the median is shown.
const ROUNDS: usize = 3;

/// One paced run: CPU seconds spent and bytes stored.
struct Cost {
    seconds: f64,
    bytes: u64,
}

/// An open-loop source at `rate`/s for `secs` seconds: send lag ~2 us, service ~500 us.
fn source(rate: u64, secs: u64) -> Result<Vec<Sample>> {
    let n = (rate * secs) as usize;
    let lag = synth::lognormal(n, 2e3, 1.0, 2)?;
    let service = synth::lognormal(n, 500e3, 0.5, 3)?;
    let gap = 1_000_000_000 / rate as i64;
    Ok((0..n)
        .map(|i| {
            let intended = i as i64 * gap;
            let start = intended + lag[i] as i64;
            Sample::new(intended, start, start + service[i] as i64, Outcome::Ok)
        })
        .collect())
}

/// Pushes `samples` paced by `per_interval`; commits after each interval when `by_time`.
fn paced(path: &Path, samples: &[Sample], per_interval: usize, by_time: bool) -> Result<Cost> {
    let mut store = Store::open(path)?;
    let t0 = Instant::now();
    let mut run: RunWriter<'_> = store.begin_run(
        tailhunt_model::RunKind::Other("bench".into()),
        serde_json::json!({}),
        ClockOrigin::now(),
    )?;
    // Commits are driven by hand here, on the source's clock, not the wall clock.
    run.set_commit_interval(None);
    let series = run.open_series(&SeriesMeta::latency("latency"))?;
    for interval in samples.chunks(per_interval.max(1)) {
        for batch in interval.chunks(BATCH) {
            run.push_samples(series, batch)?;
        }
        if by_time {
            run.flush()?;
        }
    }
    run.finish(serde_json::json!({}))?;
    let seconds = t0.elapsed().as_secs_f64();
    store.checkpoint()?;
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let bytes = size(path) + size(&path.with_extension("db-wal"));
    let id = store.resolve_run("latest")?;
    let info = store.run(&id)?;
    if info.samples != samples.len() as u64 {
        return Err(format!("stored {} of {} samples", info.samples, samples.len()).into());
    }
    Ok(Cost { seconds, bytes })
}

/// The run with the median time.
fn median(mut runs: Vec<Cost>) -> Cost {
    runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    runs.swap_remove(runs.len() / 2)
}

fn parse_args() -> Result<u64> {
    let mut secs = 120u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                let v = args.next().ok_or("--seconds needs a number")?;
                secs = v.parse().map_err(|e| format!("--seconds '{v}': {e}"))?;
            }
            other => return Err(format!("unknown argument '{other}' (use --seconds S)").into()),
        }
    }
    if secs == 0 {
        return Err("--seconds must be at least 1".into());
    }
    Ok(secs)
}

fn run() -> Result<()> {
    let secs = parse_args()?;
    let dir = tempfile::tempdir()?;
    println!(
        "{secs} s of an open-loop source per row, pushed in batches of {BATCH}; size-only = a \
         commit every 65,536 samples; by time = the open block written and committed every \
         interval. CPU share = extra seconds / {secs} simulated seconds.\n"
    );
    println!("| rate/s | interval | commits | size-only s | by time s | CPU share of durability | size-only bytes/sample | by time bytes/sample |");
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|");
    for rate in [1_000u64, 10_000, 100_000] {
        let samples = source(rate, secs)?;
        for interval_ms in [500u64, 1000] {
            let per = (rate * interval_ms / 1000) as usize;
            let (mut base, mut timed) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                base.push(paced(&dir.path().join("a.db"), &samples, per, false)?);
                timed.push(paced(&dir.path().join("b.db"), &samples, per, true)?);
                for f in std::fs::read_dir(dir.path())? {
                    std::fs::remove_file(f?.path())?;
                }
            }
            let (base, timed) = (median(base), median(timed));
            let n = samples.len() as f64;
            println!(
                "| {rate} | {interval_ms} ms | {} | {:.3} | {:.3} | {:.3}% | {:.2} | {:.2} |",
                samples.len().div_ceil(per),
                base.seconds,
                timed.seconds,
                100.0 * (timed.seconds - base.seconds).max(0.0) / secs as f64,
                base.bytes as f64 / n,
                timed.bytes as f64 / n,
            );
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("commits: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
