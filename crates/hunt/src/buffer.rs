//! A sink that keeps what a source writes in memory, to be written to the store later.
//!
//! The capture and the run-queue tracer run while the sweep writes its run; SQLite lets one
//! writer in at a time, and a source that holds its transaction open while it waits for
//! packets kept the sweep's writer out past its busy timeout (`database is locked`, seen on
//! the first try of a hunt against loopback). So those two sources write here, and the hunt
//! replays each into its own run once the sweep has finished.
//!
//! In: every call a source makes on a [`SeriesSink`]. Out: the same calls, in order, on
//! another sink ([`Buffer::replay`]).

use tailhunt_model::{IntervalHistogram, Point, Sample, SeriesMeta, SeriesSink, SinkError};

enum Op {
    Open(SeriesMeta),
    Samples(usize, Vec<Sample>),
    Histogram(usize, IntervalHistogram),
    Values(usize, Vec<Point>),
    Document(String, u32, String),
}

/// Every call a source made, in order.
#[derive(Default)]
pub struct Buffer {
    ops: Vec<Op>,
    series: usize,
}

impl Buffer {
    /// Makes the same calls on `sink`, mapping series handles to the ones it returns.
    pub fn replay(&self, sink: &mut dyn SeriesSink) -> Result<(), SinkError> {
        let mut handles = Vec::with_capacity(self.series);
        for op in &self.ops {
            match op {
                Op::Open(meta) => handles.push(sink.open_series(meta)?),
                Op::Samples(h, s) => sink.push_samples(handles[*h], s)?,
                Op::Histogram(h, x) => sink.push_histogram(handles[*h], x)?,
                Op::Values(h, p) => sink.push_values(handles[*h], p)?,
                Op::Document(name, version, json) => sink.put_document(name, *version, json)?,
            }
        }
        sink.commit_now()
    }

    fn check(&self, series: usize) -> Result<(), SinkError> {
        if series >= self.series {
            return Err(format!("series handle {series} was never opened").into());
        }
        Ok(())
    }
}

impl SeriesSink for Buffer {
    fn open_series(&mut self, meta: &SeriesMeta) -> Result<usize, SinkError> {
        self.ops.push(Op::Open(meta.clone()));
        self.series += 1;
        Ok(self.series - 1)
    }

    fn push_samples(&mut self, series: usize, samples: &[Sample]) -> Result<(), SinkError> {
        self.check(series)?;
        self.ops.push(Op::Samples(series, samples.to_vec()));
        Ok(())
    }

    fn push_histogram(&mut self, series: usize, h: &IntervalHistogram) -> Result<(), SinkError> {
        self.check(series)?;
        self.ops.push(Op::Histogram(series, h.clone()));
        Ok(())
    }

    fn push_values(&mut self, series: usize, points: &[Point]) -> Result<(), SinkError> {
        self.check(series)?;
        self.ops.push(Op::Values(series, points.to_vec()));
        Ok(())
    }

    fn put_document(&mut self, name: &str, version: u32, json: &str) -> Result<(), SinkError> {
        self.ops
            .push(Op::Document(name.to_string(), version, json.to_string()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailhunt_model::{Outcome, Series, SeriesData};

    #[test]
    fn replays_every_call_in_order() {
        let mut b = Buffer::default();
        let h = b.open_series(&SeriesMeta::latency("latency")).unwrap();
        let s = Sample::from_latency(1, 5, Outcome::Ok);
        b.push_samples(h, &[s]).unwrap();
        b.push_samples(h, &[s, s]).unwrap();
        assert!(b.push_samples(7, &[s]).is_err());
        let mut out: Vec<Series> = Vec::new();
        b.replay(&mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(matches!(&out[0].data, SeriesData::Samples(v) if v.len() == 3));
    }
}
