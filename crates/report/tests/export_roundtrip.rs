//! Export, import, export: random runs with send lag, several labels, every outcome, timed and
//! untimed series and awkward names come back from CSV and JSON lines sample for sample (and the
//! second export is byte for byte the first), and from interval logs within the bucket error.

use proptest::prelude::*;
use tailhunt_histogram::{Histogram, Quantile};
use tailhunt_import::{import_reader, Format, ImportOptions};
use tailhunt_model::{
    display_name, ClockOrigin, Labels, Outcome, Sample, Series, SeriesData, SeriesKind, Timing,
    Unit,
};
use tailhunt_report::export::{exporter, ExportFormat};

/// A run: series named as users see them, with their data.
type Run = Vec<(String, Series)>;

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        6 => Just(Outcome::Ok),
        1 => Just(Outcome::Error),
        1 => Just(Outcome::Timeout)
    ]
}

/// Latency from the intended time is never below 1 us here: interval logs store values, and
/// their error is relative.
fn samples(timing: Timing, base: i64) -> impl Strategy<Value = Vec<Sample>> {
    prop::collection::vec(
        (
            0i64..5_000_000,
            0i64..2_000_000,
            1_000i64..80_000_000,
            outcome(),
        ),
        1..300,
    )
    .prop_map(move |steps| {
        let mut t = base;
        steps
            .into_iter()
            .enumerate()
            .map(|(i, (gap, lag, service, o))| {
                t += gap;
                match timing {
                    Timing::Timed => Sample::new(t, t + lag, t + lag + service, o),
                    Timing::Untimed => Sample::from_latency(i as i64, lag + service, o),
                }
            })
            .collect()
    })
}

/// Names with commas, quotes, `#`, braces and inner spaces, with 0 to 3 labels.
fn name() -> impl Strategy<Value = String> {
    let plain = "[a-z#\"][a-z0-9_ #\"./:-]{0,10}[a-z0-9\"#]";
    let value = "[a-z0-9 .:/#\"-]{0,6}";
    (
        plain,
        prop::collection::btree_map("[a-z_][a-z0-9_]{0,5}", value, 0..4),
    )
        .prop_map(|(name, labels)| {
            let labels: Labels = labels.into_iter().collect();
            display_name(&name, &labels)
        })
}

fn run() -> impl Strategy<Value = Run> {
    // Monotonic times (relative) or epoch times: one kind per run, as in a real run.
    let base = prop_oneof![
        1_000_000_000i64..10_000_000_000_000,
        Just(1_700_000_000_000_000_000)
    ];
    (base, prop::collection::btree_set(name(), 1..4)).prop_flat_map(|(base, names)| {
        let series: Vec<_> = names
            .into_iter()
            .map(move |n| {
                prop_oneof![3 => Just(Timing::Timed), 1 => Just(Timing::Untimed)]
                    .prop_flat_map(move |timing| {
                        samples(timing, base).prop_map(move |s| (timing, s))
                    })
                    .prop_map(move |(timing, s)| {
                        let mut series = Series::new("x", Unit::Nanoseconds);
                        series.timing = timing;
                        series.data = SeriesData::Samples(s);
                        (n.clone(), series)
                    })
            })
            .collect();
        series
    })
}

fn export(run: &Run, format: ExportFormat) -> Vec<u8> {
    let mut out = Vec::new();
    let kinds = vec![SeriesKind::Samples; run.len()];
    let mut writer = exporter(
        format,
        &mut out,
        &kinds,
        ClockOrigin::wall(1_700_000_000_000_000_000),
    )
    .unwrap();
    for (name, series) in run {
        writer.write_series(name, series).unwrap();
    }
    writer.finish().unwrap();
    out
}

fn import(bytes: &[u8], format: Format) -> Result<Run, TestCaseError> {
    let opts = ImportOptions {
        format: Some(format),
        ..ImportOptions::default()
    };
    let mut series: Vec<Series> = Vec::new();
    import_reader("export", &mut &bytes[..], &opts, &mut series)
        .map_err(|e| TestCaseError::fail(format!("import failed: {e}")))?;
    Ok(series.into_iter().map(|s| (s.display_name(), s)).collect())
}

fn exact_round_trip(run: &Run, format: ExportFormat, read_as: Format) -> Result<(), TestCaseError> {
    let first = export(run, format);
    let back = import(&first, read_as)?;
    prop_assert_eq!(back.len(), run.len());
    for ((name, original), (name_back, series)) in run.iter().zip(&back) {
        prop_assert_eq!(name, name_back);
        prop_assert_eq!(series.timing, original.timing);
        prop_assert_eq!(series.samples(), original.samples());
    }
    let second = export(&back, format);
    prop_assert!(
        first == second,
        "second export differs:\n{}\n---\n{}",
        String::from_utf8_lossy(&first),
        String::from_utf8_lossy(&second)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn csv_round_trip_is_exact(run in run()) {
        exact_round_trip(&run, ExportFormat::Csv, Format::Csv)?;
    }

    #[test]
    fn json_lines_round_trip_is_exact(run in run()) {
        exact_round_trip(&run, ExportFormat::JsonLines, Format::JsonLines)?;
    }

    #[test]
    fn interval_log_round_trip_is_within_the_bucket_error(run in run()) {
        let back = import(&export(&run, ExportFormat::HdrLog), Format::HdrLog)?;
        prop_assert_eq!(back.len(), run.len());
        for ((name, original), (name_back, series)) in run.iter().zip(&back) {
            // Tags hold no spaces.
            prop_assert_eq!(&name.replace(' ', "_"), name_back);
            let latencies: Vec<u64> = original
                .samples()
                .unwrap_or_default()
                .iter()
                .map(|s| s.latency_ns() as u64)
                .collect();
            let mut sorted = latencies.clone();
            sorted.sort_unstable();
            let SeriesData::Histograms(intervals) = &series.data else {
                return Err(TestCaseError::fail("not a histogram series"));
            };
            let mut merged = Histogram::new();
            intervals.iter().for_each(|iv| merged.merge(&iv.histogram));
            prop_assert_eq!(merged.count(), latencies.len() as u64);
            // This layout's bound twice (written, then read back) and HdrHistogram's 0.1%.
            let bound = 2.0 * merged.layout().relative_error_bound() + 0.001;
            for text in ["0", "50", "90", "99", "99.9", "100"] {
                let q: Quantile = text.parse().unwrap();
                let want = sorted[q.rank(sorted.len() as u64) as usize - 1] as f64;
                let got = merged.value_at_rank(q.rank(merged.count())).unwrap() as f64;
                prop_assert!((got - want).abs() <= bound * want, "p{text}: {got} vs {want}");
            }
        }
    }
}
