//! Fewer points for long series, without losing what matters: per pixel column the smallest and
//! the largest value are both kept (in the order they occurred), so a single 1 ms spike in an
//! hour of data still reaches the top of its column.

/// Columns a plot is decimated to (about one per pixel of the plot area).
pub const COLUMNS: usize = 860;

/// `pts` sorted by x, reduced to at most two points per column of `[x0, x1]` split into
/// `columns`: each column's minimum and maximum, in x order. Short series come back as they are.
pub fn min_max(pts: &[(f64, f64)], x0: f64, x1: f64, columns: usize) -> Vec<(f64, f64)> {
    if pts.len() <= 2 * columns || x1 <= x0 || columns == 0 {
        return pts.to_vec();
    }
    let width = (x1 - x0) / columns as f64;
    let mut out = Vec::with_capacity(2 * columns);
    let mut col = None;
    let (mut lo, mut hi) = ((0.0, f64::INFINITY), (0.0, f64::NEG_INFINITY));
    let flush = |lo: (f64, f64), hi: (f64, f64), out: &mut Vec<(f64, f64)>| {
        if lo.1.is_finite() {
            if lo == hi {
                out.push(lo);
            } else if lo.0 <= hi.0 {
                out.extend([lo, hi]);
            } else {
                out.extend([hi, lo]);
            }
        }
    };
    for &(x, y) in pts {
        let c = (((x - x0) / width).floor().max(0.0) as usize).min(columns - 1);
        if col != Some(c) {
            flush(lo, hi, &mut out);
            col = Some(c);
            lo = (x, f64::INFINITY);
            hi = (x, f64::NEG_INFINITY);
        }
        if y < lo.1 {
            lo = (x, y);
        }
        if y > hi.1 {
            hi = (x, y);
        }
    }
    flush(lo, hi, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_spike_survives_and_the_size_is_bounded() {
        let mut pts: Vec<(f64, f64)> = (0..1_000_000).map(|i| (i as f64, 1.0)).collect();
        pts[654_321].1 = 500.0;
        pts[123].1 = -3.0;
        let out = min_max(&pts, 0.0, 1_000_000.0, 800);
        assert!(out.len() <= 1600, "{}", out.len());
        assert!(out.contains(&(654_321.0, 500.0)));
        assert!(out.contains(&(123.0, -3.0)));
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "x order kept");
    }

    #[test]
    fn short_series_are_untouched() {
        let pts = vec![(0.0, 1.0), (1.0, 2.0)];
        assert_eq!(min_max(&pts, 0.0, 1.0, 800), pts);
    }
}
