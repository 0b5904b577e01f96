//! Whether the valley between two candidate modes is a real dip or sampling noise.
//!
//! In: the binned counts, the valley's bin, and where the candidate modes on either side of it
//! end (the next valleys out, or the ends of the data). Out: whether the dip passes a test that
//! a density with one mode fails at most [`FALSE_DIP_RATE`] of the time.
//!
//! A density with one mode cannot rise on both sides of a point: walking outwards from the
//! valley, it is flat or falling on at least one side. So each side gets a one-sided test of
//! "the density rises from the valley into this side's mode", and the dip is real only when
//! both sides pass (an intersection-union test: the side that is really flat or falling keeps
//! the false rate at its own level).
//!
//! One side: a core is made of the candidate mode's samples nearest the valley, with
//! [`CORE_TRIM`] of them trimmed off each end (so a stray sample does not decide where it
//! starts); the gap is the stretch from the valley (included) up to the core. A density that
//! does not rise from the valley outwards gives every gap bin at least as many samples, on
//! average, as every core bin, so of the `t` samples in gap and core the core holds no more
//! than a binomial draw `Bin(t, core bins / (gap bins + core bins))`; the core's p-value is that
//! draw's chance of reaching the core's count. Cores of all the mode's samples, and of the
//! nearest half, quarter and eighth (at least [`MIN_CORE_SAMPLES`]), are tried, and the
//! smallest p-value times four is the side's: a candidate mode that the smoothing made of
//! several clusters (50 samples of a load run in clusters at 3.7, 7.5, 25 and 45 ms) shows its
//! rise in its nearest cluster, not in a core stretched over empty bins between clusters.
//!
//! The threshold is [`FALSE_DIP_RATE`] (three sigma, one-sided) divided by the number of
//! kernel-wide windows the data spans (Bonferroni): the finder looks for a dip everywhere, and
//! the valley and the cores are placed where the data makes them deepest and fullest.
//!
//! Why not compare the counts in a kernel-wide window around each peak and the valley (the
//! finder's rule before): a Pareto tail of shape 1 holds about half a sample per 0.01-decade bin
//! over decades, and with hundreds of windows to choose from, its noise passed a three-sigma
//! window test in about 1 draw in 450 (44 of 20,000 draws over the ranges of the property test
//! `unimodal_shapes_never_split`; none of 80,000 with this test). Widening those windows on
//! sparse peaks fixed that but merged small modes far apart, whose windows then reached across
//! the gap. The core of a real mode sits next to an empty gap, which makes its p-value tiny at
//! any width: a capture's 124 samples with modes of 23, 26 and 75 samples at 7 us, 360 us and
//! 44 ms get below 1e-15 on every side, against a threshold of 4e-4, and a mode of a dozen
//! samples an order of magnitude above a body of 2,000 is found. What the window test found
//! and this one does not: a bump of 30 samples at 0.4 ms below a valley holding two, in the
//! rising flank of 2,500 samples (p = 6e-3 against a threshold of 1e-4).

use statrs::distribution::{Binomial, DiscreteCDF};

use super::Binned;

/// Chance that a density with one mode passes the test at one place (three sigma, one-sided).
pub(super) const FALSE_DIP_RATE: f64 = 0.00135;
/// Share of a core's samples trimmed off each end (so a few stray samples do not decide where
/// it starts).
const CORE_TRIM: f64 = 0.1;
/// Cores tried on each side: these shares of the candidate mode's samples, nearest the valley
/// first.
const CORE_SCALES: [f64; 4] = [1.0, 0.5, 0.25, 0.125];
/// Fewest samples a core is made of.
const MIN_CORE_SAMPLES: f64 = 5.0;

/// Whether the valley at bin `v` separates the candidate modes in bins `lower_start..v` and
/// `v + 1..=upper_end`.
pub(super) fn is_real(b: &Binned, v: usize, lower_start: usize, upper_end: usize) -> bool {
    let threshold = FALSE_DIP_RATE / looks(b);
    let rises = |side| rise_p_value(b, v, side) < threshold;
    v > lower_start
        && v < upper_end
        && rises(Side::Lower(lower_start))
        && rises(Side::Upper(upper_end))
}

/// One side of the valley, with the far end of its candidate mode.
#[derive(Clone, Copy)]
enum Side {
    /// The mode in bins `start..valley`.
    Lower(usize),
    /// The mode in bins `valley + 1..=end`.
    Upper(usize),
}

/// How many kernel-wide windows the data spans: the places a dip could have been found.
fn looks(b: &Binned) -> f64 {
    let first = b.raw.iter().position(|&c| c > 0.0).unwrap_or(0);
    let last = b.raw.iter().rposition(|&c| c > 0.0).unwrap_or(first);
    ((last - first + 1) as f64 / (2 * b.k + 1) as f64).max(1.0)
}

/// The chance that a density which does not rise from the valley `v` outwards on `side` puts
/// as many samples in that side's core as there are, for the core at its most telling scale
/// (the p-value is multiplied by the number of scales tried).
fn rise_p_value(b: &Binned, v: usize, side: Side) -> f64 {
    // The side's bins, walking outwards from the valley.
    let outward: Vec<usize> = match side {
        Side::Lower(start) => (start..v).rev().collect(),
        Side::Upper(end) => (v + 1..=end.min(b.raw.len() - 1)).collect(),
    };
    let total: f64 = outward.iter().map(|&i| b.raw[i]).sum();
    let best = CORE_SCALES
        .iter()
        .map(|&scale| {
            let nearest = (scale * total).ceil().max(MIN_CORE_SAMPLES).min(total);
            core_p_value(b, v, &outward, nearest)
        })
        .fold(1.0, f64::min);
    (best * CORE_SCALES.len() as f64).min(1.0)
}

/// The p-value of the core made of the `nearest` samples to the valley (trimmed), against the
/// gap from the valley up to it.
fn core_p_value(b: &Binned, v: usize, outward: &[usize], nearest: f64) -> f64 {
    let trim = CORE_TRIM * nearest;
    let mut seen = 0.0;
    let mut start = None;
    let mut end = None;
    for (at, &i) in outward.iter().enumerate() {
        seen += b.raw[i];
        if start.is_none() && seen > trim {
            start = Some(at);
        }
        if seen >= nearest - trim {
            end = Some(at);
            break;
        }
    }
    let (Some(start), Some(end)) = (start, end) else {
        return 1.0;
    };
    let core: f64 = outward[start..=end].iter().map(|&i| b.raw[i]).sum();
    let gap: f64 = b.raw[v] + outward[..start].iter().map(|&i| b.raw[i]).sum::<f64>();
    let core_bins = (end - start + 1) as f64;
    let share = core_bins / (core_bins + start as f64 + 1.0);
    let core = core.round() as u64;
    if core == 0 {
        return 1.0;
    }
    Binomial::new(share, core + gap.round() as u64).map_or(1.0, |d| d.sf(core - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};
    use rand_distr::{Distribution, Poisson};

    fn binned(raw: Vec<f64>) -> Binned {
        Binned {
            first: 0,
            smooth: raw.clone(),
            raw,
            k: 2,
        }
    }

    /// Where the density never rises from the valley outwards (flat, or falling like a tail),
    /// the test claims a rise about as often as its level says, sparse or dense: on a flat
    /// density with 0.3 samples per bin, 40 draws of 3,000 (1.3%) fall below 1%, as the core
    /// starts at a sample by construction; the Bonferroni factor of [`is_real`] covers that.
    #[test]
    fn flat_and_falling_densities_rarely_rise() {
        let mut rng = StdRng::seed_from_u64(3);
        for (rate, fall) in [
            (0.3, 1.0),
            (3.0, 1.0),
            (50.0, 1.0),
            (5.0, 0.99),
            (1.0, 0.995),
        ] {
            let draws = 3_000;
            let rises = (0..draws)
                .filter(|_| {
                    let raw = (0..200)
                        .map(|i| {
                            Poisson::new(rate * f64::powi(fall, i))
                                .unwrap()
                                .sample(&mut rng)
                        })
                        .collect();
                    rise_p_value(&binned(raw), 40, Side::Upper(199)) < 0.01
                })
                .count();
            // 1% of 3,000 is 30, with a standard deviation of 5.5.
            assert!(rises <= 47, "rate {rate}, fall {fall}: {rises} of {draws}");
        }
    }

    /// A dozen samples packed after a stretch of empty bins are a rise, on either side.
    #[test]
    fn packed_samples_after_an_empty_gap_rise() {
        let mut raw = vec![0.0; 200];
        raw[150..155].copy_from_slice(&[2.0, 3.0, 3.0, 2.0, 2.0]);
        raw[20..25].copy_from_slice(&[2.0, 3.0, 3.0, 2.0, 2.0]);
        let b = binned(raw);
        assert!(rise_p_value(&b, 100, Side::Upper(199)) < 1e-6);
        assert!(rise_p_value(&b, 100, Side::Lower(0)) < 1e-6);
        // The same samples spread evenly from the valley on are no rise.
        let b = binned((0..200).map(|i| f64::from(i > 100 && i % 8 == 0)).collect());
        assert!(rise_p_value(&b, 100, Side::Upper(199)) > 0.1);
    }
}
