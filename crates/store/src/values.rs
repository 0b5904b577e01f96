//! The values block codec (codec 1 of `value_blocks`): [`Point`]s of a values series.
//!
//! Decompressed layout (LEB128 varints): `n`, then per point the zigzag delta of `t_ns` from the
//! previous point (the first from 0) and the zigzag `value`. Bins of a binned series are
//! equally spaced, so the time column is one small repeated delta; the buffer is
//! zstd-compressed (level 3).

use tailhunt_model::Point;

use crate::block::{get_varint, unzigzag, zigzag, BlockError};
use tailhunt_histogram::varint::put as put_varint;

/// Points per block.
pub const BLOCK_POINTS: usize = 8192;

/// Encodes points (an error only when zstd fails: no block is stored rather than an empty one).
pub fn encode(points: &[Point]) -> std::io::Result<Vec<u8>> {
    let mut raw = Vec::with_capacity(points.len() * 4 + 4);
    put_varint(&mut raw, points.len() as u64);
    let mut prev = 0i64;
    for p in points {
        put_varint(&mut raw, zigzag(p.t_ns.wrapping_sub(prev)));
        put_varint(&mut raw, zigzag(p.value));
        prev = p.t_ns;
    }
    zstd::bulk::compress(&raw, 3)
}

/// Decodes what [`encode`] wrote.
pub fn decode(data: &[u8]) -> Result<Vec<Point>, BlockError> {
    let raw = zstd::stream::decode_all(data)?;
    let mut r = raw.as_slice();
    let n = get_varint(&mut r)? as usize;
    if n > BLOCK_POINTS * 16 {
        return Err(BlockError::Corrupt("point count out of range"));
    }
    let mut out = Vec::with_capacity(n);
    let mut prev = 0i64;
    for _ in 0..n {
        let t_ns = prev.wrapping_add(unzigzag(get_varint(&mut r)?));
        let value = unzigzag(get_varint(&mut r)?);
        out.push(Point { t_ns, value });
        prev = t_ns;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_round_trip_and_corruption_is_an_error() {
        let pts: Vec<Point> = (0..10_000)
            .map(|i| Point {
                t_ns: 1_700_000_000_000_000_000 + i * 1_000_000,
                value: (i * 7919) % 125_000 - 3,
            })
            .collect();
        let enc = encode(&pts).unwrap();
        assert_eq!(decode(&enc).unwrap(), pts);
        assert!(enc.len() < pts.len() * 4, "{} bytes", enc.len());
        assert!(decode(&enc[..enc.len() / 2]).is_err());
    }
}
