//! A sender's time-sequence points kept to the end of the pass: the newest in memory, the
//! older ones packed into the pass's scratch file ([`crate::spill`]).
//!
//! In: [`WindowPoint`]s, at most one per bin, the newest replaced while its bin lasts
//! ([`WindowPoints::push`], [`WindowPoints::last_mut`]); at each sweep, the scratch file
//! ([`WindowPoints::spill_old`]). Out: every point again, in order ([`WindowPoints::iter`]),
//! and the mean window over those with bytes in flight ([`WindowPoints::busy_mean_window`]).
//! A connection that lasts the capture has a point a millisecond: 32 bytes each, 3 GB for a
//! day, where the scratch file takes about a third of that and memory
//! [`SPILL_POINTS`] at most.

use prost::encoding::{decode_varint, encode_varint};

use super::sending::WindowPoint;
use crate::pack::{unzigzag, zigzag};
use crate::spill::{Spill, Spilled};

/// Points held in memory before a sweep packs all but the newest into the scratch file.
pub const SPILL_POINTS: usize = 1024;

/// One sender's points; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct WindowPoints {
    /// Packed runs of older points, in order.
    chunks: Vec<(Spilled, u32)>,
    /// Points in `chunks`.
    spilled: usize,
    /// The windows of the spilled points with bytes in flight, summed in order, and their
    /// number: the mean comes out the same as summed over all points at once.
    busy_sum: f64,
    busy_n: u64,
    recent: Vec<WindowPoint>,
}

impl WindowPoints {
    /// The newest point.
    pub fn last(&self) -> Option<&WindowPoint> {
        self.recent.last()
    }

    /// The newest point, to replace while its bin lasts.
    pub fn last_mut(&mut self) -> Option<&mut WindowPoint> {
        self.recent.last_mut()
    }

    /// Adds a point after the newest.
    pub fn push(&mut self, p: WindowPoint) {
        self.recent.push(p);
    }

    /// Points held.
    pub fn len(&self) -> usize {
        self.spilled + self.recent.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives back spare capacity.
    pub fn shrink_to_fit(&mut self) {
        self.recent.shrink_to_fit();
        self.chunks.shrink_to_fit();
    }

    /// The mean receive window over the points with bytes in flight.
    pub fn busy_mean_window(&self) -> Option<f64> {
        let (mut sum, mut n) = (self.busy_sum, self.busy_n);
        for p in self.recent.iter().filter(|p| p.inflight > 0) {
            sum += p.window as f64;
            n += 1;
        }
        (n > 0).then(|| sum / n as f64)
    }

    /// Packs every point but the newest into `spill` once [`SPILL_POINTS`] are held.
    pub fn spill_old(&mut self, spill: &Spill) {
        if self.recent.len() < SPILL_POINTS {
            return;
        }
        let old = &self.recent[..self.recent.len() - 1];
        for p in old.iter().filter(|p| p.inflight > 0) {
            self.busy_sum += p.window as f64;
            self.busy_n += 1;
        }
        self.chunks.push((spill.put(&pack(old)), old.len() as u32));
        self.spilled += old.len();
        self.recent.drain(..old.len());
    }

    /// Every point, in order, read back from `spill` a packed run at a time.
    pub fn iter<'a>(&'a self, spill: &'a Spill) -> impl Iterator<Item = WindowPoint> + 'a {
        self.chunks
            .iter()
            .flat_map(move |(c, n)| unpack(&spill.get(c), *n as usize))
            .chain(self.recent.iter().copied())
    }
}

/// Points as varints: each field's step from the previous point's (the first point's from
/// zero), zigzagged; about 10 bytes a point instead of 32.
fn pack(points: &[WindowPoint]) -> Vec<u8> {
    let mut data = Vec::with_capacity(points.len() * 12);
    let mut prev = [0i64; 5];
    for p in points {
        let now = fields(p);
        for (v, was) in now.iter().zip(prev) {
            encode_varint(zigzag(v.wrapping_sub(was)), &mut data);
        }
        prev = now;
    }
    data
}

fn fields(p: &WindowPoint) -> [i64; 5] {
    [
        p.ts_ns,
        p.seq,
        p.ack,
        i64::from(p.inflight),
        i64::from(p.window),
    ]
}

/// The `n` points [`pack`] wrote into `data` (fewer when `data` is short: a piece of the
/// scratch file that could not be read back is empty).
fn unpack(mut data: &[u8], n: usize) -> Vec<WindowPoint> {
    let mut out = Vec::with_capacity(n);
    let mut prev = [0i64; 5];
    while out.len() < n && !data.is_empty() {
        for v in &mut prev {
            *v = v.wrapping_add(unzigzag(decode_varint(&mut data).unwrap_or(0)));
        }
        out.push(WindowPoint {
            ts_ns: prev[0],
            seq: prev[1],
            ack: prev[2],
            inflight: prev[3] as u32,
            window: prev[4] as u32,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Points come back in order and the same, whatever was spilled and when, and the
        /// mean window is the one over all points at once, to the bit.
        #[test]
        fn spilled_points_come_back(
            raw in proptest::collection::vec((0i64..5_000_000, any::<u32>(), 0u32..3, any::<u32>()), 1..5000),
            sweep_every in 1usize..3000,
        ) {
            let spill = Spill::default();
            let mut pts = WindowPoints::default();
            let mut all = Vec::new();
            let (mut ts, mut seq) = (1_700_000_000_000_000_000i64, 0i64);
            for (i, &(step, window, busy, grow)) in raw.iter().enumerate() {
                ts += step;
                seq += i64::from(grow % 100_000);
                let p = WindowPoint {
                    ts_ns: ts,
                    seq,
                    ack: seq - i64::from(busy) * 1448,
                    inflight: busy * 1448,
                    window,
                };
                pts.push(p);
                all.push(p);
                if i % sweep_every == 0 {
                    pts.spill_old(&spill);
                }
            }
            prop_assert_eq!(pts.len(), all.len());
            prop_assert_eq!(pts.iter(&spill).collect::<Vec<_>>(), all.clone());
            let busy: Vec<&WindowPoint> = all.iter().filter(|p| p.inflight > 0).collect();
            let want = (!busy.is_empty())
                .then(|| busy.iter().map(|p| p.window as f64).sum::<f64>() / busy.len() as f64);
            prop_assert_eq!(pts.busy_mean_window().map(f64::to_bits), want.map(f64::to_bits));
            prop_assert_eq!(spill.lost(), 0);
        }
    }

    /// Past [`SPILL_POINTS`], memory keeps the newest point only after a sweep.
    #[test]
    fn a_sweep_keeps_the_newest_point() {
        let spill = Spill::default();
        let mut pts = WindowPoints::default();
        for i in 0..SPILL_POINTS as i64 {
            pts.push(WindowPoint {
                ts_ns: i * 1_000_000,
                seq: i * 1000,
                ack: i * 1000,
                inflight: 0,
                window: 65_535,
            });
        }
        pts.spill_old(&spill);
        assert_eq!(pts.recent.len(), 1);
        assert_eq!(
            pts.last().map(|p| p.seq),
            Some((SPILL_POINTS as i64 - 1) * 1000)
        );
        assert!(
            spill.bytes() < 12 * SPILL_POINTS as u64,
            "{} bytes",
            spill.bytes()
        );
    }
}
