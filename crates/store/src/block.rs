//! The raw-sample block codec (codec 1).
//!
//! A block holds up to [`BLOCK_SAMPLES`] samples of one series, stored column by column so each
//! column compresses on its own statistics:
//!
//! | column | value per sample |
//! |---|---|
//! | intended | delta of delta of `intended_ns` (first: the value itself) — 0 for a fixed-rate schedule |
//! | lag | `start_ns - intended_ns` |
//! | service | `end_ns - start_ns` |
//! | outcome | run-length pairs (count, code) |
//!
//! The numeric columns are zigzag-encoded, divided by their greatest common divisor (lossless:
//! a column of microsecond-resolution values stores the microseconds), and written as byte
//! planes: the lowest byte of every value, then the next byte of every value, and so on, up to
//! the widest value's width. The high planes of latency data are nearly constant, so zstd's
//! entropy coder squeezes them to a few bits per sample.
//!
//! Decompressed layout (all integers LEB128 varints): `n`; then per numeric column `gcd`,
//! `width` (bytes), and `width * n` plane bytes; then the outcome runs. The whole buffer is
//! zstd-compressed (level 1: on a 1 GB capture's series level 3 saved 1% of the bytes for more
//! CPU; blocks written at level 3 before read the same). `tailhunt export` writes samples as CSV
//! for tools that do not want to decode this.

use crate::level1::Level1;
use tailhunt_model::{Outcome, Sample};

/// Samples per block: large enough for good compression, small enough that a killed run loses
/// little.
pub const BLOCK_SAMPLES: usize = 8192;

/// Codec id stored with each block.
pub const CODEC_PLANES_ZSTD: i64 = 1;

/// Why a block did not decode.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// zstd failed.
    #[error("block decompression failed: {0}")]
    Zstd(#[from] std::io::Error),
    /// The layout inside is inconsistent.
    #[error("corrupt sample block: {0}")]
    Corrupt(&'static str),
    /// An unknown codec id.
    #[error("unknown sample block codec {0} (written by a newer tailhunt?)")]
    UnknownCodec(i64),
}

pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

use tailhunt_histogram::varint::put as put_varint;

pub(crate) fn get_varint(r: &mut &[u8]) -> Result<u64, BlockError> {
    tailhunt_histogram::varint::get(r).ok_or(BlockError::Corrupt("truncated or overlong varint"))
}

fn put_column(out: &mut Vec<u8>, values: &[u64]) {
    let mut g = 0u64;
    let mut max = 0u64;
    for &v in values {
        if g.is_power_of_two() {
            // gcd(2^k, v) = 2^min(k, trailing zeros of v), without a division. It is the
            // common case: a column of values that are never negative is zigzagged to even
            // numbers, so its divisor stays 2, and Euclid's divisions for every value were
            // most of a load recorder's block encoding.
            g = 1 << g.trailing_zeros().min(v.trailing_zeros());
        } else {
            g = gcd(g, v); // 0 (no value yet, or only zeros) or a divisor with an odd factor
        }
        max = max.max(v);
    }
    let g = g.max(1);
    let width = ((64 - (max / g).leading_zeros()) as usize).div_ceil(8);
    put_varint(out, g);
    put_varint(out, width as u64);
    // Scaled once, not once per plane, and by a shift where the divisor is a power of two.
    let (pow2, shift) = (g.is_power_of_two(), g.trailing_zeros());
    let scaled: std::borrow::Cow<[u64]> = if g == 1 {
        values.into()
    } else {
        let scale = |&v: &u64| if pow2 { v >> shift } else { v / g };
        values.iter().map(scale).collect::<Vec<_>>().into()
    };
    for plane in 0..width {
        let shift = plane * 8;
        out.extend(scaled.iter().map(|&v| (v >> shift) as u8));
    }
}

fn get_column(r: &mut &[u8], n: usize) -> Result<Vec<u64>, BlockError> {
    let g = get_varint(r)?;
    let width = get_varint(r)? as usize;
    if width > 8 || g == 0 {
        return Err(BlockError::Corrupt("bad column header"));
    }
    let bytes = width
        .checked_mul(n)
        .ok_or(BlockError::Corrupt("column too large"))?;
    if r.len() < bytes {
        return Err(BlockError::Corrupt("column truncated"));
    }
    let (planes, rest) = r.split_at(bytes);
    *r = rest;
    let mut values = vec![0u64; n];
    for (plane, chunk) in planes.chunks_exact(n.max(1)).enumerate().take(width) {
        for (v, &b) in values.iter_mut().zip(chunk) {
            *v |= u64::from(b) << (plane * 8);
        }
    }
    for v in &mut values {
        *v = v.wrapping_mul(g);
    }
    Ok(values)
}

/// Encodes and compresses a block of samples (an error only when zstd fails: no block is
/// stored rather than one that does not read back).
pub fn encode(samples: &[Sample]) -> std::io::Result<Vec<u8>> {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => s.encode(samples),
        Err(_) => Scratch::new().encode(samples),
    })
}

/// The buffers and compressor of [`encode`], one set per thread, reused from block to block
/// (see [`Level1`] for why).
struct Scratch {
    raw: Vec<u8>,
    col: Vec<u64>,
    zstd: Level1,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = const { std::cell::RefCell::new(Scratch::new()) };
}

impl Scratch {
    const fn new() -> Scratch {
        Scratch {
            raw: Vec::new(),
            col: Vec::new(),
            zstd: Level1::new(),
        }
    }

    fn encode(&mut self, samples: &[Sample]) -> std::io::Result<Vec<u8>> {
        let n = samples.len();
        let (raw, col) = (&mut self.raw, &mut self.col);
        raw.clear();
        raw.reserve(n * 8 + 32);
        put_varint(raw, n as u64);
        col.clear();
        let (mut prev, mut prev_delta) = (0i64, 0i64);
        for (i, s) in samples.iter().enumerate() {
            let delta = s.intended_ns.wrapping_sub(prev);
            col.push(zigzag(if i == 0 {
                s.intended_ns
            } else {
                delta.wrapping_sub(prev_delta)
            }));
            if i > 0 {
                prev_delta = delta;
            }
            prev = s.intended_ns;
        }
        put_column(raw, col);
        col.clear();
        col.extend(
            samples
                .iter()
                .map(|s| zigzag(s.start_ns.wrapping_sub(s.intended_ns))),
        );
        put_column(raw, col);
        col.clear();
        col.extend(
            samples
                .iter()
                .map(|s| zigzag(s.end_ns.wrapping_sub(s.start_ns))),
        );
        put_column(raw, col);
        let mut i = 0;
        while i < n {
            let code = samples[i].outcome.code();
            let run = samples[i..]
                .iter()
                .take_while(|s| s.outcome.code() == code)
                .count();
            put_varint(raw, run as u64);
            raw.push(code);
            i += run;
        }
        self.zstd.compress(raw).map(<[u8]>::to_vec)
    }
}

/// Decompresses and decodes a block; never panics on corrupt input.
pub fn decode(codec: i64, data: &[u8]) -> Result<Vec<Sample>, BlockError> {
    if codec != CODEC_PLANES_ZSTD {
        return Err(BlockError::UnknownCodec(codec));
    }
    // A block never exceeds 8 bytes x 3 columns per sample plus headers.
    let raw = zstd::bulk::decompress(data, BLOCK_SAMPLES * 26 + 1024)?;
    let mut r = raw.as_slice();
    let n = get_varint(&mut r)? as usize;
    if n > BLOCK_SAMPLES {
        return Err(BlockError::Corrupt("too many samples"));
    }
    let dod = get_column(&mut r, n)?;
    let lag = get_column(&mut r, n)?;
    let service = get_column(&mut r, n)?;
    let mut outcomes = Vec::with_capacity(n);
    while outcomes.len() < n {
        let run = get_varint(&mut r)? as usize;
        let (&code, rest) = r
            .split_first()
            .ok_or(BlockError::Corrupt("outcome truncated"))?;
        r = rest;
        let outcome = Outcome::from_code(code).ok_or(BlockError::Corrupt("bad outcome"))?;
        if run == 0 || run > n - outcomes.len() {
            return Err(BlockError::Corrupt("bad outcome run"));
        }
        outcomes.extend(std::iter::repeat_n(outcome, run));
    }
    let (mut prev, mut prev_delta) = (0i64, 0i64);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let intended = if i == 0 {
            unzigzag(dod[0])
        } else {
            let delta = prev_delta.wrapping_add(unzigzag(dod[i]));
            prev_delta = delta;
            prev.wrapping_add(delta)
        };
        prev = intended;
        let start = intended.wrapping_add(unzigzag(lag[i]));
        let end = start.wrapping_add(unzigzag(service[i]));
        out.push(Sample::new(intended, start, end, outcomes[i]));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samples(latencies: &[u64], period: i64) -> Vec<Sample> {
        latencies
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                let t = 1_000_000_000 + i as i64 * period;
                Sample::new(t, t + (i as i64 % 7) * 100, t + l as i64, Outcome::Ok)
            })
            .collect()
    }

    #[test]
    fn round_trips_and_is_small_for_latency_data() {
        let lat = tailhunt_synth::lognormal(BLOCK_SAMPLES, 500e3, 0.5, 9).unwrap();
        let s = samples(&lat, 1_000_000);
        let enc = encode(&s).unwrap();
        assert_eq!(decode(CODEC_PLANES_ZSTD, &enc).unwrap(), s);
        let per = enc.len() as f64 / s.len() as f64;
        assert!(per < 4.0, "{per} bytes per sample");
    }

    #[test]
    fn microsecond_data_stores_microseconds() {
        let lat: Vec<u64> = tailhunt_synth::lognormal(BLOCK_SAMPLES, 500e3, 0.5, 9)
            .unwrap()
            .into_iter()
            .map(|v| v / 1000 * 1000)
            .collect();
        let s: Vec<Sample> = lat
            .iter()
            .enumerate()
            .map(|(i, &l)| Sample::from_latency(i as i64, l as i64, Outcome::Ok))
            .collect();
        let enc = encode(&s).unwrap();
        assert_eq!(decode(CODEC_PLANES_ZSTD, &enc).unwrap(), s);
        assert!(enc.len() < s.len() * 2, "{} bytes", enc.len());
    }

    /// Stored blocks stay the bytes they were: the reused context compresses each input as a
    /// fresh one would, whatever it compressed before.
    #[test]
    fn a_reused_compressor_gives_the_bytes_of_a_fresh_one() {
        for (seed, n) in [(1, BLOCK_SAMPLES), (2, 17), (3, 4000), (4, 1)] {
            let lat = tailhunt_synth::lognormal(n, 500e3, 0.5, seed).unwrap();
            let raw: Vec<u8> = lat.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_eq!(
                SCRATCH
                    .with_borrow_mut(|s| s.zstd.compress(&raw).map(<[u8]>::to_vec))
                    .unwrap(),
                zstd::bulk::compress(&raw, 1).unwrap()
            );
        }
    }

    /// The column as first written: Euclid's divisor over every value, divided per plane.
    fn reference_column(values: &[u64]) -> Vec<u8> {
        let g = values.iter().fold(0, |g, &v| gcd(g, v)).max(1);
        let max = values.iter().max().copied().unwrap_or(0);
        let width = ((64 - (max / g).leading_zeros()) as usize).div_ceil(8);
        let mut out = Vec::new();
        put_varint(&mut out, g);
        put_varint(&mut out, width as u64);
        for plane in 0..width {
            out.extend(values.iter().map(|&v| ((v / g) >> (plane * 8)) as u8));
        }
        out
    }

    proptest! {
        /// Stored columns are the bytes they always were, whatever shortcut finds the divisor:
        /// even values (a zigzagged column that is never negative), powers of two, multiples
        /// of 1,000 and anything.
        #[test]
        fn columns_keep_their_bytes(
            raw in proptest::collection::vec(any::<u64>(), 0..200),
            scale in prop_oneof![Just(1u64), Just(2), Just(8), Just(1000), Just(3), 1u64..5000],
        ) {
            let values: Vec<u64> = raw.iter().map(|v| (v >> 20).wrapping_mul(scale)).collect();
            let mut got = Vec::new();
            put_column(&mut got, &values);
            prop_assert_eq!(got, reference_column(&values));
        }

        #[test]
        fn any_samples_round_trip(raw in proptest::collection::vec((any::<i64>(), any::<i64>(), any::<i64>(), 0u8..3), 0..300)) {
            let s: Vec<Sample> = raw.iter().map(|&(a, b, c, o)| Sample::new(a, b, c, Outcome::from_code(o).unwrap())).collect();
            prop_assert_eq!(decode(CODEC_PLANES_ZSTD, &encode(&s).unwrap()).unwrap(), s);
        }

        #[test]
        fn corrupt_blocks_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(CODEC_PLANES_ZSTD, &bytes);
            let _ = decode(CODEC_PLANES_ZSTD, &zstd::bulk::compress(&bytes, 1).unwrap());
        }
    }
}
