//! HdrHistogram interval logs (`.hlog`): read them into tailhunt histograms, write them back.
//!
//! An interval log is text: comment lines (`#...`), optional `#[StartTime: ...]` and
//! `#[BaseTime: ...]` headers, a CSV legend, then one line per interval:
//! `[Tag=NAME,]start_seconds,length_seconds,max,BASE64` where BASE64 is an HdrHistogram V2
//! (usually deflate-compressed) encoding. wrk2 (`-U`), jHiccup and the HdrHistogram libraries
//! write it.
//!
//! Values in the log have whatever unit the writer recorded in (jHiccup and the Java tools:
//! nanoseconds; wrk2: microseconds), so the reader takes a scale to nanoseconds. Each
//! HdrHistogram bucket is re-recorded at its midpoint, adding at most this crate's bucket error
//! to HdrHistogram's own (0.1% at three significant digits).
//!
//! Timestamps follow the HdrHistogram readers: relative to `BaseTime` when present; otherwise
//! absolute (seconds since the epoch) unless they are more than a year before `StartTime`, in
//! which case they are relative to `StartTime`.

use std::io::{Cursor, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, LogIteratorError, Tag,
};
use hdrhistogram::serialization::{DeserializeError, Deserializer, V2DeflateSerializer};
use thiserror::Error;

use crate::Histogram;

/// One interval of a log.
#[derive(Debug, Clone, PartialEq)]
pub struct HdrInterval {
    /// `Tag=` of the line, if any.
    pub tag: Option<String>,
    /// Interval start, ns: since the epoch when [`IntervalLog::absolute`], else since the log's
    /// start.
    pub start_ns: i64,
    /// Interval length, ns.
    pub duration_ns: i64,
    /// The values, converted to ns.
    pub histogram: Histogram,
}

/// A parsed interval log.
#[derive(Debug, Default)]
pub struct IntervalLog {
    /// Whether interval start times are epoch times.
    pub absolute: bool,
    /// The intervals in file order, up to the first bad line.
    pub intervals: Vec<HdrInterval>,
    /// The bad line that stopped the reading, if one did: `intervals` holds those before it
    /// (as a CSV import keeps the lines before a bad one).
    pub stopped: Option<HdrError>,
}

/// Why an interval log could not be read or written.
#[derive(Debug, Error)]
pub enum HdrError {
    /// A line that is neither a comment, a header, the legend, nor an interval.
    #[error("line {line}: not an HdrHistogram interval-log line: '{content}'")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// The line (shortened).
        content: String,
    },
    /// An interval whose histogram does not decode.
    #[error("line {line}: interval histogram does not decode: {reason}")]
    BadHistogram {
        /// 1-based line number.
        line: usize,
        /// What went wrong.
        reason: String,
    },
    /// A value scale that is not a positive finite number.
    #[error("value scale must be a positive finite number of ns per log unit, got {0}")]
    BadScale(f64),
    /// Writing failed.
    #[error("writing interval log: {0}")]
    Write(String),
}

/// Largest decoded (inflated) histogram accepted, to keep a hostile file from exhausting memory.
const MAX_ENCODED_BYTES: usize = 16 << 20;

/// Reads an interval log; `ns_per_unit` converts the log's values to nanoseconds (1 for ns,
/// 1000 for us, 1e6 for ms). A bad line stops the reading: the intervals before it are
/// returned with the error in [`IntervalLog::stopped`].
pub fn read_interval_log(bytes: &[u8], ns_per_unit: f64) -> Result<IntervalLog, HdrError> {
    if !(ns_per_unit.is_finite() && ns_per_unit > 0.0) {
        return Err(HdrError::BadScale(ns_per_unit));
    }
    let mut start_time: Option<f64> = None;
    let mut base_time: Option<f64> = None;
    let mut raw = Vec::new();
    let mut stopped = None;
    for entry in IntervalLogIterator::new(bytes) {
        match entry {
            Ok(LogEntry::StartTime(t)) => start_time = Some(t.as_secs_f64()),
            Ok(LogEntry::BaseTime(t)) => base_time = Some(t.as_secs_f64()),
            Ok(LogEntry::Interval(ilh)) => {
                let offset = ilh.encoded_histogram().as_ptr() as usize - bytes.as_ptr() as usize;
                let line = line_of(bytes, offset);
                match decode_interval(ilh.encoded_histogram(), ns_per_unit) {
                    Ok(histogram) => raw.push(RawInterval {
                        tag: ilh.tag().map(|t| t.as_str().to_string()),
                        start: ilh.start_timestamp().as_secs_f64(),
                        length: ilh.duration().as_secs_f64(),
                        histogram,
                        base_time,
                        start_time,
                    }),
                    Err(reason) => {
                        stopped = Some(HdrError::BadHistogram { line, reason });
                        break;
                    }
                }
            }
            Err(LogIteratorError::ParseError { offset }) => {
                let line = line_of(bytes, offset);
                let content = line_text(bytes, offset);
                stopped = Some(HdrError::Parse { line, content });
                break;
            }
        }
    }
    let absolute = raw.first().is_some_and(|r| r.base().1);
    let intervals = raw
        .into_iter()
        .map(|r| HdrInterval {
            start_ns: ((r.base().0 + r.start) * 1e9).round() as i64,
            duration_ns: (r.length * 1e9).round() as i64,
            tag: r.tag,
            histogram: r.histogram,
        })
        .collect();
    Ok(IntervalLog {
        absolute,
        intervals,
        stopped,
    })
}

/// An interval as read, with the headers in force at its line (logs written one after another
/// into one file each bring their own).
struct RawInterval {
    tag: Option<String>,
    /// Seconds, as written.
    start: f64,
    /// Seconds.
    length: f64,
    histogram: Histogram,
    base_time: Option<f64>,
    start_time: Option<f64>,
}

impl RawInterval {
    /// What `start` counts from (seconds since the epoch, or 0) and whether that makes it an
    /// epoch time.
    fn base(&self) -> (f64, bool) {
        const YEAR_S: f64 = 365.0 * 24.0 * 3600.0;
        match (self.base_time, self.start_time) {
            (Some(b), _) => (b, true),
            (None, Some(s)) if self.start < s - YEAR_S => (s, true),
            (None, Some(_)) => (0.0, true),
            (None, None) => (0.0, self.start > YEAR_S),
        }
    }
}

fn decode_interval(encoded: &str, ns_per_unit: f64) -> Result<Histogram, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("bad base64: {e}"))?;
    if bytes.len() >= 8 {
        let claimed = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
        if claimed > MAX_ENCODED_BYTES {
            return Err(format!(
                "claims {claimed} bytes of payload, more than this reader accepts"
            ));
        }
    }
    let hdr: hdrhistogram::Histogram<u64> = Deserializer::new()
        .deserialize(&mut Cursor::new(&bytes))
        .map_err(|e| undecodable(&e))?;
    let mut out = Histogram::new();
    for v in hdr.iter_recorded() {
        let mid = hdr.median_equivalent(v.value_iterated_to());
        let ns = (mid as f64 * ns_per_unit).round();
        out.record_n(
            if ns >= u64::MAX as f64 {
                u64::MAX
            } else {
                ns as u64
            },
            v.count_at_value(),
        );
    }
    Ok(out)
}

/// What a decoding failure means, in words (the crate's own text for some is a Rust debug
/// print).
fn undecodable(e: &DeserializeError) -> String {
    match e {
        DeserializeError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the encoded histogram is cut short".into()
        }
        DeserializeError::IoError(io) => {
            format!("the compressed histogram does not inflate ({io}): the line is corrupt")
        }
        DeserializeError::InvalidCookie => {
            "it is not an HdrHistogram encoding (unknown format cookie)".into()
        }
        DeserializeError::UnsupportedFeature => {
            "it uses an HdrHistogram encoding feature this reader does not support".into()
        }
        DeserializeError::UnsuitableCounterType => "a count in it is too large".into(),
        DeserializeError::InvalidParameters => {
            "its value range (lowest, highest, significant digits) is invalid".into()
        }
        DeserializeError::UsizeTypeTooSmall => "it is too large for this machine".into(),
        DeserializeError::EncodedArrayTooLong => "its counts run past its value range".into(),
    }
}

fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn line_text(bytes: &[u8], offset: usize) -> String {
    let offset = offset.min(bytes.len());
    let start = bytes[..offset]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let end = bytes[offset..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| p + offset);
    let text = String::from_utf8_lossy(&bytes[start..end]);
    text.chars().take(80).collect()
}

/// One interval to write: start (ns since `start_epoch_ns`), length (ns), values (ns).
pub struct IntervalToWrite<'a> {
    /// Offset of the interval start from the log's start, ns.
    pub offset_ns: i64,
    /// Interval length, ns.
    pub duration_ns: i64,
    /// Values, ns.
    pub histogram: &'a Histogram,
}

/// Writes an interval log with values in nanoseconds (the HdrHistogram convention; the max column
/// is divided by 1e6 so it reads in milliseconds, as the Java tools expect).
pub fn write_interval_log<W: Write>(
    out: &mut W,
    start_epoch_ns: i64,
    tag: Option<&str>,
    intervals: &[IntervalToWrite<'_>],
) -> Result<(), HdrError> {
    let err = |e: &dyn std::fmt::Debug| HdrError::Write(format!("{e:?}"));
    let start = UNIX_EPOCH + Duration::from_nanos(start_epoch_ns.max(0) as u64);
    let tag = match tag {
        Some(t) => Some(Tag::new(t).ok_or_else(|| HdrError::Write(format!("invalid tag '{t}'")))?),
        None => None,
    };
    let mut serializer = V2DeflateSerializer::new();
    let mut writer = IntervalLogWriterBuilder::new()
        .add_comment("written by tailhunt; values in nanoseconds")
        .with_start_time(start)
        .with_base_time(start)
        .with_max_value_divisor(1e6)
        .begin_log_with(out, &mut serializer)
        .map_err(|e| err(&e))?;
    for iv in intervals {
        let mut hdr = hdrhistogram::Histogram::<u64>::new(3).map_err(|e| err(&e))?;
        for b in iv.histogram.buckets() {
            let v = iv.histogram.layout().representative(b.index).max(1);
            hdr.record_n(v, b.count).map_err(|e| err(&e))?;
        }
        let offset = Duration::from_nanos(iv.offset_ns.max(0) as u64);
        let length = Duration::from_nanos(iv.duration_ns.max(0) as u64);
        writer
            .write_histogram(&hdr, offset, length, tag)
            .map_err(|e| err(&e))?;
    }
    Ok(())
}

/// Epoch ns of a `SystemTime`, for callers building logs from wall-clock times.
pub fn epoch_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn written_log_reads_back_within_bounds() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 997);
        }
        let mut buf = Vec::new();
        let ivs = [
            IntervalToWrite {
                offset_ns: 0,
                duration_ns: 1_000_000_000,
                histogram: &h,
            },
            IntervalToWrite {
                offset_ns: 1_000_000_000,
                duration_ns: 1_000_000_000,
                histogram: &h,
            },
        ];
        write_interval_log(&mut buf, 1_700_000_000_000_000_000, Some("lat"), &ivs).unwrap();
        let log = read_interval_log(&buf, 1.0).unwrap();
        assert!(log.absolute);
        assert_eq!(log.intervals.len(), 2);
        assert_eq!(
            log.intervals[1].start_ns - log.intervals[0].start_ns,
            1_000_000_000
        );
        assert_eq!(log.intervals[0].tag.as_deref(), Some("lat"));
        let back = &log.intervals[0].histogram;
        assert_eq!(back.count(), h.count());
        for q in [0.5, 0.9, 0.99, 0.999] {
            let (a, b) = (
                h.quantile(q).unwrap() as f64,
                back.quantile(q).unwrap() as f64,
            );
            // Two quantisations: this layout's bound twice plus HdrHistogram's 0.1%.
            assert!(
                (a - b).abs() / a < 2.0 * h.layout().relative_error_bound() + 0.001,
                "q={q} {a} {b}"
            );
        }
    }

    /// Logs written one after another into one file (an export of several series, or `cat`)
    /// keep each one's own time base.
    #[test]
    fn concatenated_logs_keep_their_own_start_times() {
        let mut h = Histogram::new();
        h.record(5_000);
        let iv = [IntervalToWrite {
            offset_ns: 0,
            duration_ns: 1_000_000_000,
            histogram: &h,
        }];
        let (t1, t2) = (1_700_000_000_000_000_000, 1_700_000_100_000_000_000);
        let mut buf = Vec::new();
        write_interval_log(&mut buf, t1, Some("a"), &iv).unwrap();
        write_interval_log(&mut buf, t2, Some("b"), &iv).unwrap();
        let log = read_interval_log(&buf, 1.0).unwrap();
        assert!(log.absolute && log.stopped.is_none());
        let starts: Vec<i64> = log.intervals.iter().map(|i| i.start_ns).collect();
        let near = |a: i64, b: i64| (a - b).abs() < 1_000_000;
        assert!(near(starts[0], t1) && near(starts[1], t2), "{starts:?}");
    }

    #[test]
    fn bad_line_is_named() {
        let text = b"#[StartTime: 1.0 (seconds since epoch)]\n0.1,1.0,2.0,HISTFAAAA\nnot a line\n";
        let log = read_interval_log(text, 1.0).unwrap();
        assert!(log.intervals.is_empty());
        match log.stopped {
            Some(HdrError::BadHistogram { line: 2, .. })
            | Some(HdrError::Parse { line: 3, .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    fn two_second_log() -> String {
        let mut h = Histogram::new();
        h.record(1_000);
        let iv = |i: i64| IntervalToWrite {
            offset_ns: i * 1_000_000_000,
            duration_ns: 1_000_000_000,
            histogram: &h,
        };
        let mut buf = Vec::new();
        write_interval_log(&mut buf, 1_700_000_000_000_000_000, None, &[iv(0), iv(1)]).unwrap();
        String::from_utf8(buf).unwrap()
    }

    /// A bad line once lost the whole log; now the intervals before it are kept.
    #[test]
    fn intervals_before_a_bad_line_are_kept() {
        let text = two_second_log();
        let last = text.lines().last().unwrap();
        let cut = text.replace(last, &format!("{last}\nnot an interval"));
        let log = read_interval_log(cut.as_bytes(), 1.0).unwrap();
        assert_eq!(log.intervals.len(), 2);
        let lines = cut.lines().count();
        assert!(
            matches!(log.stopped, Some(HdrError::Parse { line, .. }) if line == lines),
            "{:?}",
            log.stopped
        );
    }

    /// A corrupt deflate stream once printed `IoError(Custom { kind: InvalidInput, ... })`.
    #[test]
    fn corrupt_compression_is_told_in_words() {
        let text = two_second_log();
        let last = text.lines().last().unwrap();
        let b64 = last.rsplit(',').next().unwrap();
        let mut raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        // Past the 8-byte cookie and length: the zlib stream itself.
        for b in raw.iter_mut().skip(10) {
            *b ^= 0x5a;
        }
        let bad_last = last.replace(b64, &base64::engine::general_purpose::STANDARD.encode(&raw));
        let bad = text.replace(last, &bad_last);
        let log = read_interval_log(bad.as_bytes(), 1.0).unwrap();
        assert_eq!(log.intervals.len(), 1);
        let e = log.stopped.unwrap().to_string();
        assert!(
            e.contains("does not inflate") || e.contains("cut short"),
            "{e}"
        );
        assert!(
            !e.contains("Custom") && !e.contains("kind:") && !e.contains("IoError"),
            "{e}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn reading_garbage_never_panics(text in "(#\\[StartTime: [0-9.]{1,6}\\]\n)?([0-9.,A-Za-z+/=]{0,40}\n){0,4}") {
            let _ = read_interval_log(text.as_bytes(), 1.0);
        }

        #[test]
        fn reading_corrupted_histograms_never_panics(flip in 0usize..200, byte in any::<u8>()) {
            let mut h = Histogram::new();
            for v in [5u64, 500, 50_000] { h.record(v); }
            let mut buf = Vec::new();
            write_interval_log(&mut buf, 0, None, &[IntervalToWrite { offset_ns: 0, duration_ns: 1, histogram: &h }]).unwrap();
            let text = String::from_utf8(buf).unwrap();
            let line = text.lines().last().unwrap();
            let b64 = line.rsplit(',').next().unwrap();
            let mut raw = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
            let i = flip % raw.len();
            raw[i] ^= byte;
            let bad = text.replace(b64, &base64::engine::general_purpose::STANDARD.encode(&raw));
            let _ = read_interval_log(bad.as_bytes(), 1000.0);
        }
    }
}
