//! Modes of a latency distribution, on a log axis.
//!
//! Latency modes are multiplicative (a cache hit at 0.45 ms, a disk read at 10 ms, a retry at
//! 20 ms), so the search runs on log10(value):
//!
//! 1. Counts go into bins 0.01 decade wide (2.3%).
//! 2. A Gaussian kernel smooths them; its width follows Silverman's rule on the robust spread
//!    of log10(value) (`0.9 min(sd, IQR/1.34) n^-1/5`), never below 0.02 decade, so
//!    sampling noise does not make peaks.
//! 3. Every local maximum is a candidate; two neighbouring candidates stay separate only if the
//!    valley between them is a real dip, which takes two things. It must be deep: at most half
//!    the smaller peak (counts summed over one kernel width). And it must be unlikely under any
//!    density with one mode, by the test in `dip`: on each side of the valley the candidate
//!    mode's core (its central 80% of samples) must hold more samples than a density that never
//!    rises from the valley outwards would put there, given the samples of the stretch between
//!    the valley and the core. The weakest pair merges first, until all pairs pass.
//! 4. Modes holding fewer than 0.1% of the samples (or 5 samples) merge into their neighbour.
//!
//! Each mode owns the samples between the valleys around it, so shares add up to 100%. Each
//! gap reports the share of samples at or below it, which is what decides whether a percentile
//! is fragile (see [`crate::fragile`]).

mod dip;

use serde::Serialize;
use tailhunt_histogram::Histogram;

/// Bin width, decades.
const BIN: f64 = 0.01;
/// Narrowest smoothing kernel, decades.
const MIN_BANDWIDTH: f64 = 0.02;
/// A valley must be at most this fraction of the smaller neighbouring peak.
const MAX_VALLEY_RATIO: f64 = 0.5;
/// Smallest share a mode may hold.
const MIN_SHARE: f64 = 0.001;
/// Smallest count a mode may hold.
const MIN_COUNT: u64 = 5;
/// The core of a mode extends while the smoothed density is above this fraction of its peak.
const CORE_FRACTION: f64 = 0.05;

/// One mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mode {
    /// Where the density peaks, ns.
    pub peak_ns: u64,
    /// Median of the samples in the mode, ns.
    pub median_ns: u64,
    /// Smallest value in the mode, ns.
    pub lower_ns: u64,
    /// Largest value in the mode, ns.
    pub upper_ns: u64,
    /// Samples in the mode.
    pub count: u64,
    /// Share of all samples, 0..=1.
    pub share: f64,
}

/// The gap between two consecutive modes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    /// Index of the mode below the gap (the mode above is `below + 1`).
    pub below: usize,
    /// Where the lower mode's core ends, ns.
    pub lower_ns: u64,
    /// Where the upper mode's core starts, ns.
    pub upper_ns: u64,
    /// The deepest point between the modes (their boundary), ns.
    pub boundary_ns: u64,
    /// Share of all samples at or below the boundary.
    pub share_below: f64,
    /// Upper mode's peak over lower mode's peak.
    pub ratio: f64,
}

/// Modes and the gaps between them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Modes {
    /// Modes, lowest first.
    pub modes: Vec<Mode>,
    /// `modes.len() - 1` gaps.
    pub gaps: Vec<Gap>,
}

fn log_of(v: u64) -> f64 {
    (v.max(1) as f64).log10()
}

fn value_at(log: f64) -> u64 {
    10f64.powf(log).round() as u64
}

struct Binned {
    first: i64,
    raw: Vec<f64>,
    smooth: Vec<f64>,
    /// Kernel half-width in bins, for window sums.
    k: usize,
}

impl Binned {
    fn log_of_bin(&self, b: usize) -> f64 {
        (self.first + b as i64) as f64 * BIN + BIN / 2.0
    }

    fn bin_of(&self, v: u64) -> usize {
        ((log_of(v) / BIN).floor() as i64 - self.first).clamp(0, self.raw.len() as i64 - 1) as usize
    }

    fn window(&self, b: usize) -> f64 {
        self.count(b.saturating_sub(self.k), b + self.k)
    }

    /// Samples in bins `lo..=hi` (none when `lo > hi`; `hi` is clamped to the last bin).
    fn count(&self, lo: usize, hi: usize) -> f64 {
        let hi = hi.min(self.raw.len() - 1);
        if lo > hi {
            return 0.0;
        }
        self.raw[lo..=hi].iter().sum()
    }
}

fn bandwidth(h: &Histogram) -> f64 {
    let n = h.count() as f64;
    let (mut s, mut s2) = (0.0, 0.0);
    for b in h.buckets() {
        let l = log_of(h.layout().representative(b.index));
        s += l * b.count as f64;
        s2 += l * l * b.count as f64;
    }
    let mean = s / n;
    let sd = (s2 / n - mean * mean).max(0.0).sqrt();
    let q = |p: f64| log_of(h.quantile(p).unwrap_or(1));
    let iqr = q(0.75) - q(0.25);
    let spread = if iqr > 0.0 { sd.min(iqr / 1.34) } else { sd };
    (0.9 * spread * n.powf(-0.2)).max(MIN_BANDWIDTH)
}

fn bin(h: &Histogram) -> Binned {
    let bw = bandwidth(h);
    let pad = (4.0 * bw / BIN).ceil() as i64 + 1;
    let first = (log_of(h.min().unwrap_or(1)) / BIN).floor() as i64 - pad;
    let last = (log_of(h.max().unwrap_or(1)) / BIN).floor() as i64 + pad;
    let mut raw = vec![0.0; (last - first + 1) as usize];
    for b in h.buckets() {
        let v = h
            .layout()
            .representative(b.index)
            .clamp(h.min().unwrap_or(0), h.max().unwrap_or(0));
        let i = ((log_of(v) / BIN).floor() as i64 - first) as usize;
        raw[i] += b.count as f64;
    }
    let sigma = bw / BIN;
    let radius = (3.0 * sigma).ceil() as i64;
    let kernel: Vec<f64> = (-radius..=radius)
        .map(|d| (-0.5 * (d as f64 / sigma).powi(2)).exp())
        .collect();
    let norm: f64 = kernel.iter().sum();
    let mut smooth = vec![0.0; raw.len()];
    for (i, &c) in raw.iter().enumerate() {
        if c == 0.0 {
            continue;
        }
        for (j, w) in kernel.iter().enumerate() {
            let t = i as i64 + j as i64 - radius;
            if t >= 0 && (t as usize) < smooth.len() {
                smooth[t as usize] += c * w / norm;
            }
        }
    }
    Binned {
        first,
        raw,
        smooth,
        k: (bw / BIN).round().max(1.0) as usize,
    }
}

fn valley(b: &Binned, p1: usize, p2: usize) -> usize {
    (p1..=p2)
        .min_by(|&x, &y| b.smooth[x].total_cmp(&b.smooth[y]))
        .unwrap_or(p1)
}

/// How much the valley between `peaks[i]` and `peaks[i + 1]` fails to separate them: `None`
/// when it separates them, else how shallow it is (higher = merge first).
fn weakness(b: &Binned, peaks: &[usize], i: usize) -> Option<f64> {
    let (p1, p2) = (peaks[i], peaks[i + 1]);
    let v = valley(b, p1, p2);
    let (s1, s2, sv) = (b.window(p1), b.window(p2), b.window(v));
    let smaller = s1.min(s2);
    // The candidate modes on either side reach from the valley to the next valleys out (or to
    // the ends of the data).
    let lower_start = match i {
        0 => 0,
        _ => valley(b, peaks[i - 1], p1) + 1,
    };
    let upper_end = match peaks.get(i + 2) {
        Some(&p3) => valley(b, p2, p3),
        None => b.raw.len() - 1,
    };
    let deep = sv <= MAX_VALLEY_RATIO * smaller && dip::is_real(b, v, lower_start, upper_end);
    (!deep).then(|| {
        if smaller > 0.0 {
            sv / smaller
        } else {
            f64::INFINITY
        }
    })
}

/// Finds the modes of a histogram.
pub fn find_modes(h: &Histogram) -> Modes {
    let n = h.count();
    if n == 0 {
        return Modes::default();
    }
    let b = bin(h);
    let s = &b.smooth;
    let mut peaks: Vec<usize> = (1..s.len() - 1)
        .filter(|&i| s[i] > s[i - 1] && s[i] >= s[i + 1] && s[i] > 0.0)
        .collect();
    if peaks.is_empty() {
        peaks.push(
            (0..s.len())
                .max_by(|&x, &y| s[x].total_cmp(&s[y]))
                .unwrap_or(0),
        );
    }
    // Merge peaks whose valley is not a real dip, weakest first.
    loop {
        let worst = (0..peaks.len() - 1)
            .filter_map(|i| weakness(&b, &peaks, i).map(|x| (i, x)))
            .max_by(|a, c| a.1.total_cmp(&c.1));
        let Some((i, _)) = worst else { break };
        let drop = if s[peaks[i]] >= s[peaks[i + 1]] {
            i + 1
        } else {
            i
        };
        peaks.remove(drop);
    }
    // Merge modes too small to matter into their neighbours.
    loop {
        let bounds = boundaries(&b, &peaks);
        let masses = masses(&b, &bounds);
        let min_mass = (MIN_SHARE * n as f64).max(MIN_COUNT as f64);
        let Some(i) = (0..peaks.len())
            .filter(|&i| masses[i] < min_mass)
            .min_by(|&x, &y| masses[x].total_cmp(&masses[y]))
        else {
            break;
        };
        if peaks.len() == 1 {
            break;
        }
        // Dropping its peak hands its samples to the neighbours across the valleys around it.
        peaks.remove(i);
    }
    build(h, &b, &peaks)
}

/// Bin index where each mode ends (inclusive): the valley to its right, or the last bin.
fn boundaries(b: &Binned, peaks: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = peaks.windows(2).map(|w| valley(b, w[0], w[1])).collect();
    out.push(b.raw.len() - 1);
    out
}

fn masses(b: &Binned, bounds: &[usize]) -> Vec<f64> {
    let mut start = 0;
    bounds
        .iter()
        .map(|&end| {
            let m = b.raw[start..=end].iter().sum();
            start = end + 1;
            m
        })
        .collect()
}

fn build(h: &Histogram, b: &Binned, peaks: &[usize]) -> Modes {
    let n = h.count();
    let bounds = boundaries(b, peaks);
    let mut modes: Vec<Mode> = peaks
        .iter()
        .map(|&p| Mode {
            peak_ns: value_at(b.log_of_bin(p)),
            median_ns: 0,
            lower_ns: u64::MAX,
            upper_ns: 0,
            count: 0,
            share: 0.0,
        })
        .collect();
    for bucket in h.buckets() {
        let v = h
            .layout()
            .representative(bucket.index)
            .clamp(h.min().unwrap_or(0), h.max().unwrap_or(0));
        let bin = b.bin_of(v);
        let m = bounds
            .iter()
            .position(|&end| bin <= end)
            .unwrap_or(bounds.len() - 1);
        let mode = &mut modes[m];
        mode.count += bucket.count;
        mode.lower_ns = mode.lower_ns.min(bucket.lower.max(h.min().unwrap_or(0)));
        mode.upper_ns = mode
            .upper_ns
            .max(bucket.upper.min(h.max().unwrap_or(u64::MAX)));
    }
    let mut before = 0u64;
    for m in &mut modes {
        m.share = m.count as f64 / n as f64;
        m.median_ns = h
            .value_at_rank(before + m.count.div_ceil(2))
            .unwrap_or(m.peak_ns);
        if m.count == 0 {
            m.lower_ns = m.peak_ns;
            m.upper_ns = m.peak_ns;
        }
        before += m.count;
    }
    let mut gaps = Vec::new();
    let mut below = 0u64;
    for i in 0..peaks.len().saturating_sub(1) {
        below += modes[i].count;
        let (p1, p2) = (peaks[i], peaks[i + 1]);
        let s = &b.smooth;
        let mut top = p1;
        while top < p2 && s[top + 1] >= CORE_FRACTION * s[p1] {
            top += 1;
        }
        let mut bottom = p2;
        while bottom > p1 && s[bottom - 1] >= CORE_FRACTION * s[p2] {
            bottom -= 1;
        }
        let v = bounds[i];
        let edge = |bin: usize| value_at((b.first + bin as i64 + 1) as f64 * BIN);
        let (lower_ns, upper_ns) = if top < bottom {
            (edge(top), edge(bottom - 1))
        } else {
            (edge(v), edge(v))
        };
        gaps.push(Gap {
            below: i,
            lower_ns,
            upper_ns,
            boundary_ns: edge(v),
            share_below: below as f64 / n as f64,
            ratio: modes[i + 1].peak_ns as f64 / modes[i].peak_ns.max(1) as f64,
        });
    }
    Modes { modes, gaps }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_synth as synth;

    fn component(median_ns: f64, sigma: f64, weight: f64) -> synth::Component {
        synth::Component {
            median_ns,
            sigma,
            weight,
        }
    }

    fn mixture_modes(n: usize, comps: &[synth::Component], seed: u64) -> Vec<Mode> {
        find_modes(&hist(&synth::mixture(n, comps, seed).unwrap())).modes
    }

    fn hist(values: &[u64]) -> Histogram {
        let mut h = Histogram::new();
        values.iter().for_each(|&v| h.record(v));
        h
    }

    #[test]
    fn trimodal_set_has_three_modes_with_their_shares() {
        let v = synth::mixture(100_000, &synth::trimodal_components(0.0).unwrap(), 11).unwrap();
        let m = find_modes(&hist(&v));
        assert_eq!(m.modes.len(), 3, "{m:?}");
        for (mode, (peak, share)) in m
            .modes
            .iter()
            .zip([(450e3, 0.88), (10e6, 0.08), (20e6, 0.04)])
        {
            assert!((mode.share - share).abs() < 0.01, "{mode:?}");
            assert!((mode.peak_ns as f64 / peak - 1.0).abs() < 0.1, "{mode:?}");
        }
        assert_eq!(m.gaps.len(), 2);
        assert!((m.gaps[0].share_below - 0.88).abs() < 0.005);
    }

    #[test]
    fn one_lognormal_is_one_mode_at_any_size() {
        for (n, seed) in [(200, 1), (5_000, 2), (1_000_000, 3)] {
            let v = synth::lognormal(n, 1e6, 0.6, seed).unwrap();
            assert_eq!(find_modes(&hist(&v)).modes.len(), 1, "n={n}");
        }
    }

    #[test]
    fn heavy_pareto_tail_is_not_split_into_modes() {
        let v = synth::pareto(200_000, 100e3, 1.2, 5).unwrap();
        assert_eq!(find_modes(&hist(&v)).modes.len(), 1);
    }

    /// A Pareto tail of shape 1 holds about half a sample per 0.01-decade bin over decades; the
    /// extremes of its noise once passed the dip test and made a second mode (this draw, found
    /// by `unimodal_shapes_never_split`).
    #[test]
    fn sparse_pareto_tail_makes_no_spurious_mode() {
        let v = synth::pareto(38_552, 50e3, 1.0, 11_560_286_457_454_904_263).unwrap();
        let m = find_modes(&hist(&v));
        assert_eq!(m.modes.len(), 1, "{:?}", m.modes);
    }

    /// The latency series of the fixture capture `8f87e52bb2` (the committed store of the
    /// binary's tests), in microseconds: 124 samples in three modes 50x apart. A dip test that
    /// widened its windows on sparse peaks once merged them into one.
    const CAPTURE_US: [u64; 124] = [
        7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 333, 339, 341, 341,
        343, 345, 347, 348, 349, 352, 353, 356, 357, 357, 358, 359, 362, 362, 363, 364, 365, 370,
        377, 393, 404, 418, 41386, 42082, 42383, 42443, 42451, 42451, 42461, 42474, 42484, 42499,
        42536, 42574, 42576, 42603, 42621, 42659, 42665, 42671, 42678, 42755, 42762, 42777, 43442,
        43558, 43593, 43607, 43628, 43651, 43662, 43673, 43675, 43678, 43678, 43689, 43691, 43695,
        43704, 43705, 43706, 43714, 43718, 43734, 43761, 43781, 43786, 43790, 43802, 43802, 43810,
        43820, 43843, 43860, 43885, 43888, 43919, 43927, 43929, 43945, 43964, 43980, 44135, 46546,
        46648, 46698, 47563, 47672, 47691, 47695, 47696, 47701, 47701, 47704, 47713, 47727, 47769,
    ];

    #[test]
    fn capture_with_three_small_modes_far_apart_keeps_them() {
        let v: Vec<u64> = CAPTURE_US.iter().map(|us| us * 1000).collect();
        let m = find_modes(&hist(&v));
        let found: Vec<(u64, u64)> = m.modes.iter().map(|m| (m.median_ns, m.count)).collect();
        assert_eq!(m.modes.len(), 3, "{found:?}");
        for (mode, (median, count)) in m.modes.iter().zip([(9e3, 23), (357e3, 26), (43.6e6, 75)]) {
            assert_eq!(mode.count, count, "{found:?}");
            assert!(
                (mode.median_ns as f64 / median - 1.0).abs() < 0.05,
                "{found:?}"
            );
        }
    }

    /// The same shape drawn again: three clusters at 7 us, 360 us and 44 ms, from 40 samples
    /// each down to 8.
    #[test]
    fn three_small_clusters_far_apart_are_three_modes() {
        for seed in 0..30 {
            for per_mode in [40, 15, 8] {
                let comps = [7e3, 360e3, 44e6].map(|median| component(median, 0.1, 1.0 / 3.0));
                let modes = mixture_modes(3 * per_mode, &comps, seed);
                assert_eq!(
                    modes.len(),
                    3,
                    "{per_mode} per mode, seed {seed}: {modes:?}"
                );
            }
        }
    }

    /// A real small mode an order of magnitude above the body is found however sparse: a dozen
    /// samples beside 2,000, or 0.5% of 20,000.
    #[test]
    fn small_sparse_modes_are_still_found() {
        for seed in 0..30 {
            for (n, in_mode) in [
                (2_000usize, 12usize),
                (2_000, 40),
                (5_000, 50),
                (20_000, 100),
            ] {
                let share = in_mode as f64 / n as f64;
                let comps = [
                    component(1e6, 0.2, 1.0 - share),
                    component(20e6, 0.1, share),
                ];
                let modes = mixture_modes(n, &comps, seed);
                assert_eq!(
                    modes.len(),
                    2,
                    "n {n}, {in_mode} in mode 2, seed {seed}: {modes:?}"
                );
            }
        }
    }

    #[test]
    fn close_but_distinct_modes_are_found() {
        let comps = [component(1e6, 0.05, 0.5), component(1.6e6, 0.05, 0.5)];
        assert_eq!(mixture_modes(50_000, &comps, 8).len(), 2);
    }

    #[test]
    fn tiny_and_empty_inputs() {
        assert!(find_modes(&Histogram::new()).modes.is_empty());
        let m = find_modes(&hist(&[5]));
        assert_eq!(m.modes.len(), 1);
        assert_eq!(m.modes[0].count, 1);
        let m = find_modes(&hist(&[0, 0, 0]));
        assert_eq!(m.modes[0].count, 3);
    }

    proptest::proptest! {
        // A fresh seed every run (proptest's default; PROPTEST_CASES and PROPTEST_RNG_SEED
        // change the draw). With the dip test of `dip`, none of 80,000 draws over these ranges
        // split, nor 40,000 from their hardest corner (shape 1 to 1.3, sigma 1.5 to 2); with
        // the window test before it, about 1 in 450 did.
        /// Sampling noise must never invent a mode. Pareto shapes start at 1: the generator
        /// clamps values at 1 h, and below shape 1 enough of the tail lands on the clamp
        /// (1e-4 of the samples at shape 0.5, against ~0.1 per 0.01-decade bin around it) to
        /// make a genuine second peak there, which the finder rightly reports.
        #[test]
        fn unimodal_shapes_never_split(
            n in 50usize..200_000,
            sigma in 0.02f64..2.0,
            shape in 1.0f64..4.0,
            pareto in proptest::bool::ANY,
            seed in proptest::prelude::any::<u64>(),
        ) {
            let v = if pareto {
                synth::pareto(n, 50e3, shape, seed).unwrap()
            } else {
                synth::lognormal(n, 2e6, sigma, seed).unwrap()
            };
            let m = find_modes(&hist(&v));
            proptest::prop_assert_eq!(m.modes.len(), 1, "{:?}", m.modes);
        }
    }
}
