//! The values analysis works on.

use serde::Serialize;
use tailhunt_histogram::Histogram;
use tailhunt_model::{Outcome, Sample, Series, SeriesData};

/// Samples per outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct OutcomeCounts {
    /// Completed.
    pub ok: u64,
    /// Failed.
    pub error: u64,
    /// Timed out.
    pub timeout: u64,
}

/// A distribution of non-negative values (ns): always a histogram, plus the sorted raw values
/// when the series kept them (then quantiles are exact).
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    histogram: Histogram,
    sorted: Option<Vec<u64>>,
    outcomes: OutcomeCounts,
}

impl Distribution {
    /// From raw values (all counted as ok).
    pub fn from_values(mut values: Vec<u64>) -> Distribution {
        values.sort_unstable();
        let mut histogram = Histogram::new();
        values.iter().for_each(|&v| histogram.record(v));
        Distribution {
            histogram,
            outcomes: OutcomeCounts {
                ok: values.len() as u64,
                ..OutcomeCounts::default()
            },
            sorted: Some(values),
        }
    }

    /// From a histogram only (quantiles carry the bucket bound).
    pub fn from_histogram(histogram: Histogram) -> Distribution {
        Distribution {
            outcomes: OutcomeCounts {
                ok: histogram.count(),
                ..OutcomeCounts::default()
            },
            histogram,
            sorted: None,
        }
    }

    /// From samples: latency from the intended send time, every outcome included (a timeout
    /// took at least that long); with `ok_only`, errors and timeouts are counted but left out.
    pub fn from_samples(samples: &[Sample], ok_only: bool) -> Distribution {
        let mut tally = SampleTally::new(ok_only);
        tally.values.reserve(samples.len());
        tally.add(samples);
        tally.finish()
    }
}

/// A [`Distribution::from_samples`] made a batch of samples at a time (a stored series' blocks
/// as they are read): the latencies, 8 bytes a sample, rather than the samples, 40.
#[derive(Debug, Clone, Default)]
pub struct SampleTally {
    ok_only: bool,
    outcomes: OutcomeCounts,
    values: Vec<u64>,
}

impl SampleTally {
    /// An empty tally; `ok_only` as [`Distribution::from_samples`] takes it.
    pub fn new(ok_only: bool) -> SampleTally {
        SampleTally {
            ok_only,
            ..SampleTally::default()
        }
    }

    /// Adds `samples`.
    pub fn add(&mut self, samples: &[Sample]) {
        for s in samples {
            match s.outcome {
                Outcome::Ok => self.outcomes.ok += 1,
                Outcome::Error => self.outcomes.error += 1,
                Outcome::Timeout => self.outcomes.timeout += 1,
            }
            if !self.ok_only || s.outcome == Outcome::Ok {
                self.values.push(s.latency_ns().max(0) as u64);
            }
        }
    }

    /// The distribution of the samples added.
    pub fn finish(self) -> Distribution {
        Distribution {
            outcomes: self.outcomes,
            ..Distribution::from_values(self.values)
        }
    }
}

impl Distribution {
    /// From any series: samples, its interval histograms merged (in the coarsest of their
    /// layouts), or the values of a values series.
    pub fn from_series(series: &Series, ok_only: bool) -> Distribution {
        match &series.data {
            SeriesData::Samples(s) => Distribution::from_samples(s, ok_only),
            SeriesData::Histograms(hs) => {
                // In the coarsest layout among them, so the stated bound stays true (a kernel
                // histogram has 16 buckets per octave, not 128).
                let layout = hs
                    .iter()
                    .map(|h| h.histogram.layout())
                    .min_by_key(|l| l.sub_bits())
                    .unwrap_or_default();
                let mut merged = Histogram::with_layout(layout);
                hs.iter().for_each(|h| merged.merge(&h.histogram));
                Distribution::from_histogram(merged)
            }
            // The distribution of the values themselves (bytes per bin, say).
            SeriesData::Values(points) => {
                Distribution::from_values(points.iter().map(|p| p.value.max(0) as u64).collect())
            }
        }
    }

    /// The histogram (always present).
    pub fn histogram(&self) -> &Histogram {
        &self.histogram
    }

    /// Sorted raw values, when kept.
    pub fn sorted(&self) -> Option<&[u64]> {
        self.sorted.as_deref()
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.histogram.count()
    }

    /// Outcome counts of the samples it came from.
    pub fn outcomes(&self) -> OutcomeCounts {
        self.outcomes
    }

    /// The value of the `rank`-th smallest (1-based, clamped): exact from raw values, else within
    /// the histogram's bound.
    pub fn value_at_rank(&self, rank: u64) -> Option<u64> {
        match &self.sorted {
            Some(v) if !v.is_empty() => {
                let i = (rank.clamp(1, v.len() as u64) - 1) as usize;
                Some(v[i])
            }
            Some(_) => None,
            None => self.histogram.value_at_rank(rank),
        }
    }

    /// The nearest-rank `q` quantile (`q` in 0..=1; 1 is the maximum).
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count() == 0 {
            return None;
        }
        self.value_at_rank(tailhunt_histogram::nearest_rank(q, self.count()))
    }

    /// Relative error of values read from this distribution: 0 for raw values.
    pub fn error_bound(&self) -> f64 {
        if self.sorted.is_some() {
            0.0
        } else {
            self.histogram.layout().relative_error_bound()
        }
    }

    /// Share of values `<= v`.
    pub fn share_at_or_below(&self, v: u64) -> f64 {
        let n = self.count();
        if n == 0 {
            return 0.0;
        }
        let below = match &self.sorted {
            Some(s) => s.partition_point(|&x| x <= v) as u64,
            None => self.histogram.count_at_or_below(v),
        };
        below as f64 / n as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_histogram::Layout;
    use tailhunt_model::{IntervalHistogram, Unit};

    #[test]
    fn coarse_interval_histograms_keep_their_layout_and_bound() {
        let coarse = Layout::new(4).unwrap();
        let mut series = Series::new_histograms("runq_latency", Unit::Nanoseconds);
        if let SeriesData::Histograms(hs) = &mut series.data {
            for i in 0..3u64 {
                let mut h = Histogram::with_layout(coarse);
                (1..=100u64).for_each(|v| h.record(v * 1_000 + i));
                hs.push(IntervalHistogram {
                    start_ns: i as i64,
                    end_ns: i as i64 + 1,
                    histogram: h,
                });
            }
        }
        let d = Distribution::from_series(&series, false);
        assert_eq!(d.count(), 300);
        assert_eq!(d.histogram().layout(), coarse);
        assert_eq!(d.error_bound(), coarse.relative_error_bound());
        let p50 = d.quantile(0.5).unwrap() as f64;
        assert!(
            (p50 - 50_000.0).abs() / 50_000.0 <= coarse.relative_error_bound(),
            "{p50}"
        );
    }
}
