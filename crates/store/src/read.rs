//! Reading runs back.

use rusqlite::{params, OptionalExtension, Row};
use serde::Serialize;
use tailhunt_histogram::Histogram;
use tailhunt_model::{
    ClockOrigin, Evidence, Finding, IntervalHistogram, Labels, Point, Run, RunKind, RunStatus,
    Sample, SamplePart, Series, SeriesData, SeriesKind, Timing, Unit, Verdict,
};

use crate::{block, values};
use crate::{Store, StoreError};

/// A series as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesInfo {
    /// Series id in the store.
    pub id: i64,
    /// Name.
    pub name: String,
    /// `name{labels}`.
    pub display_name: String,
    /// Labels.
    pub labels: Labels,
    /// Unit.
    pub unit: Unit,
    /// Timed or untimed.
    pub timing: Timing,
    /// Samples, interval histograms or values.
    pub kind: SeriesKind,
    /// Values stored.
    pub count: u64,
}

/// A series' count (of `series s`): its parent's for a derived one (schema 6 on).
const COUNT_DERIVED: &str = "COALESCE((SELECT p.count FROM derived_series d JOIN series p \
     ON p.id = d.parent_id WHERE d.series_id = s.id), s.count)";

fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    let status: String = r.get(2)?;
    let params: String = r.get(6)?;
    Ok(Run {
        id: r.get(0)?,
        kind: RunKind::from_name(&r.get::<_, String>(1)?),
        status: RunStatus::from_name(&status).unwrap_or(RunStatus::Partial),
        created_wall_ns: r.get(3)?,
        origin: ClockOrigin {
            wall_ns: r.get(4)?,
            mono_ns: r.get(5)?,
        },
        params: serde_json::from_str(&params).unwrap_or(serde_json::Value::Null),
        series: r.get::<_, i64>(7)? as u64,
        samples: r.get::<_, i64>(8)? as u64,
    })
}

impl Store {
    /// A series' count in SQL, for `series s`.
    fn count_column(&self) -> &'static str {
        if self.derived {
            COUNT_DERIVED
        } else {
            "s.count"
        }
    }

    /// The columns [`run_from_row`] reads, for `runs r`. A run's samples are the values it
    /// stored: a derived series' count is its parent's (what reading it gives), but counting
    /// it in the run's total would make a load step's 1,000 requests 3,000 samples.
    fn run_columns(&self) -> &'static str {
        "r.id, r.kind, r.status, r.created_wall_ns, r.origin_wall_ns, r.origin_mono_ns, r.params,
         (SELECT COUNT(*) FROM series s WHERE s.run_id = r.id),
         (SELECT COALESCE(SUM(s.count), 0) FROM series s WHERE s.run_id = r.id)"
    }

    /// All runs, oldest first.
    pub fn runs(&self) -> Result<Vec<Run>, StoreError> {
        let sql = format!(
            "SELECT {} FROM runs r ORDER BY r.created_wall_ns, r.rowid",
            self.run_columns()
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map([], run_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One run by exact id.
    pub fn run(&self, id: &str) -> Result<Run, StoreError> {
        let sql = format!("SELECT {} FROM runs r WHERE r.id = ?1", self.run_columns());
        self.conn
            .query_row(&sql, [id], run_from_row)
            .optional()?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))
    }

    /// Turns what a user typed for RUN into a run id: `latest` (the newest run), a full id, or
    /// a unique prefix of one.
    pub fn resolve_run(&self, spec: &str) -> Result<String, StoreError> {
        let spec = spec.trim();
        if spec == "latest" || spec == "last" {
            return self
                .conn
                .query_row(
                    "SELECT id FROM runs ORDER BY created_wall_ns DESC, rowid DESC LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?
                .ok_or(StoreError::NoRuns);
        }
        if spec.is_empty() {
            return Err(StoreError::NoSuchRun(spec.to_string()));
        }
        let mut stmt = self.conn.prepare(
            "SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1 ORDER BY id LIMIT 6",
        )?;
        let matches: Vec<String> = stmt
            .query_map([spec], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        match matches.len() {
            0 => Err(StoreError::NoSuchRun(spec.to_string())),
            1 => Ok(matches.into_iter().next().unwrap_or_default()),
            _ if matches.iter().any(|m| m == spec) => Ok(spec.to_string()),
            _ => Err(StoreError::AmbiguousRun {
                prefix: spec.to_string(),
                matches,
            }),
        }
    }

    /// The series of a run, in creation order.
    pub fn series(&self, run_id: &str) -> Result<Vec<SeriesInfo>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT s.id, s.name, s.labels, s.unit, s.timing, s.kind, {} FROM series s \
             WHERE s.run_id = ?1 ORDER BY s.id",
            self.count_column()
        ))?;
        let rows = stmt.query_map([run_id], |r| {
            let labels: String = r.get(2)?;
            let unit: String = r.get(3)?;
            let timing: String = r.get(4)?;
            let name: String = r.get(1)?;
            let labels: Labels = serde_json::from_str(&labels).unwrap_or_default();
            Ok(SeriesInfo {
                id: r.get(0)?,
                display_name: tailhunt_model::display_name(&name, &labels),
                name,
                labels,
                unit: Unit::from_name(&unit).unwrap_or(Unit::Count),
                timing: if timing == "untimed" {
                    Timing::Untimed
                } else {
                    Timing::Timed
                },
                kind: SeriesKind::from_name(&r.get::<_, String>(5)?).unwrap_or(SeriesKind::Samples),
                count: r.get::<_, i64>(6)? as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// All raw samples of a series, in write order.
    pub fn load_samples(&self, series_id: i64) -> Result<Vec<Sample>, StoreError> {
        let mut out = Vec::new();
        self.each_sample_block(series_id, &mut |samples| out.extend_from_slice(samples))?;
        Ok(out)
    }

    /// The raw samples of a series a stored block at a time, in write order: for what can be
    /// worked out without holding a long series whole.
    pub fn each_sample_block(
        &self,
        series_id: i64,
        f: &mut dyn FnMut(&[Sample]),
    ) -> Result<(), StoreError> {
        let (stored, part) = self.derivation(series_id)?;
        let mut stmt = self
            .conn
            .prepare("SELECT codec, data FROM sample_blocks WHERE series_id = ?1 ORDER BY seq")?;
        let mut rows = stmt.query([stored])?;
        let mut parts = Vec::new();
        while let Some(row) = rows.next()? {
            let codec: i64 = row.get(0)?;
            let data = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            let samples = block::decode(codec, data).map_err(|e| StoreError::Corrupt {
                series: stored,
                reason: e.to_string(),
            })?;
            match part {
                None => f(&samples),
                Some(part) => {
                    parts.clear();
                    parts.extend(samples.iter().map(|s| part.of(s)));
                    f(&parts);
                }
            }
        }
        Ok(())
    }

    /// Where a sample series' samples are stored: its own blocks, or its parent's with the
    /// part to take of each (a derived series, `derived_series`).
    fn derivation(&self, series_id: i64) -> Result<(i64, Option<SamplePart>), StoreError> {
        if !self.derived {
            return Ok((series_id, None));
        }
        let found: Option<(i64, String)> = self
            .conn
            .query_row(
                "SELECT parent_id, part FROM derived_series WHERE series_id = ?1",
                [series_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match found {
            None => Ok((series_id, None)),
            Some((parent, name)) => match SamplePart::from_name(&name) {
                Some(part) => Ok((parent, Some(part))),
                None => Err(StoreError::Corrupt {
                    series: series_id,
                    reason: format!(
                        "derived from series {parent} as '{name}', a part this build does not know"
                    ),
                }),
            },
        }
    }

    /// All interval histograms of a series, in write order.
    pub fn load_histograms(&self, series_id: i64) -> Result<Vec<IntervalHistogram>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT start_ns, end_ns, data FROM histograms WHERE series_id = ?1 ORDER BY seq",
        )?;
        let mut rows = stmt.query([series_id])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let histogram =
                Histogram::decode(row.get_ref(2)?.as_blob().map_err(rusqlite::Error::from)?)
                    .map_err(|e| StoreError::Corrupt {
                        series: series_id,
                        reason: e.to_string(),
                    })?;
            out.push(IntervalHistogram {
                start_ns: row.get(0)?,
                end_ns: row.get(1)?,
                histogram,
            });
        }
        Ok(out)
    }

    /// All points of a values series, in write order.
    pub fn load_points(&self, series_id: i64) -> Result<Vec<Point>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT data FROM value_blocks WHERE series_id = ?1 ORDER BY seq")?;
        let mut rows = stmt.query([series_id])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let data = row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?;
            let points = values::decode(data).map_err(|e| StoreError::Corrupt {
                series: series_id,
                reason: e.to_string(),
            })?;
            out.extend_from_slice(&points);
        }
        Ok(out)
    }

    /// A whole series with its values.
    pub fn load_series(&self, info: &SeriesInfo) -> Result<Series, StoreError> {
        let data = match info.kind {
            SeriesKind::Histograms => SeriesData::Histograms(self.load_histograms(info.id)?),
            SeriesKind::Values => SeriesData::Values(self.load_points(info.id)?),
            SeriesKind::Samples => SeriesData::Samples(self.load_samples(info.id)?),
        };
        Ok(Series {
            name: info.name.clone(),
            labels: info.labels.clone(),
            unit: info.unit,
            timing: info.timing,
            data,
        })
    }

    /// Attaches findings to a run, replacing earlier ones from the same detectors. On a store
    /// opened read-only nothing is written and [`Store::findings_unsaved`] turns true: the
    /// caller has the findings and says they were not kept.
    pub fn put_findings(&mut self, run_id: &str, findings: &[Finding]) -> Result<(), StoreError> {
        if self.read_only {
            self.findings_unsaved = true;
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        for f in findings {
            tx.execute(
                "DELETE FROM findings WHERE run_id = ?1 AND detector = ?2",
                params![run_id, f.detector],
            )?;
        }
        for f in findings {
            tx.execute(
                "INSERT INTO findings (run_id, detector, verdict, confidence, summary, evidence, fix)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    run_id,
                    f.detector,
                    serde_json::to_value(f.verdict).ok().and_then(|v| v.as_str().map(String::from)),
                    f.confidence,
                    f.summary,
                    serde_json::to_string(&f.evidence).unwrap_or_else(|_| "[]".into()),
                    f.fix
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Replaces every finding of a run with `findings` (a detector that no longer fires leaves
    /// nothing behind). Read-only stores: as [`Store::put_findings`].
    pub fn replace_findings(
        &mut self,
        run_id: &str,
        findings: &[Finding],
    ) -> Result<(), StoreError> {
        if self.read_only {
            self.findings_unsaved = true;
            return Ok(());
        }
        self.conn
            .execute("DELETE FROM findings WHERE run_id = ?1", [run_id])?;
        self.put_findings(run_id, findings)
    }

    /// Findings of a run, in the order they were stored.
    pub fn findings(&self, run_id: &str) -> Result<Vec<Finding>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT detector, verdict, confidence, summary, evidence, fix FROM findings WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            let verdict: String = r.get(1)?;
            let evidence: String = r.get(4)?;
            Ok(Finding {
                detector: r.get(0)?,
                verdict: serde_json::from_value(serde_json::Value::String(verdict))
                    .unwrap_or(Verdict::Inconclusive),
                confidence: r.get(2)?,
                summary: r.get(3)?,
                evidence: serde_json::from_str::<Vec<Evidence>>(&evidence).unwrap_or_default(),
                fix: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A document stored with [`crate::RunWriter::put_document`]: its version and JSON text;
    /// `None` when the run has none of that name. Typed callers use [`Store::evidence`].
    pub fn document(&self, run_id: &str, name: &str) -> Result<Option<(u32, String)>, StoreError> {
        let Some((version, data)) = self.document_data(run_id, name)? else {
            return Ok(None);
        };
        let corrupt = |reason: String| StoreError::Document {
            run: run_id.to_string(),
            name: name.to_string(),
            reason,
        };
        let text = zstd::stream::decode_all(&data[..]).map_err(|e| corrupt(e.to_string()))?;
        String::from_utf8(text)
            .map(|t| Some((version, t)))
            .map_err(|e| corrupt(format!("not UTF-8: {e}")))
    }

    /// A document's version and zstd-compressed JSON, as stored.
    pub(crate) fn document_data(
        &self,
        run_id: &str,
        name: &str,
    ) -> Result<Option<(u32, Vec<u8>)>, StoreError> {
        // Stores of schema 3 opened read-only have no version column: their documents are
        // version 1.
        let query = |sql: &str| {
            self.conn
                .query_row(sql, [run_id, name], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, u32>(2)?,
                    ))
                })
                .optional()
        };
        let row = match query(
            "SELECT codec, data, version FROM documents WHERE run_id = ?1 AND name = ?2",
        ) {
            Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.contains("no such column") => {
                query("SELECT codec, data, 1 FROM documents WHERE run_id = ?1 AND name = ?2")?
            }
            other => other?,
        };
        let Some((codec, data, version)) = row else {
            return Ok(None);
        };
        let corrupt = |reason: String| StoreError::Document {
            run: run_id.to_string(),
            name: name.to_string(),
            reason,
        };
        if codec != "zstd" {
            return Err(corrupt(format!("unknown codec '{codec}'")));
        }
        Ok(Some((version, data)))
    }

    /// Deletes a run and everything in it.
    pub fn delete_run(&mut self, run_id: &str) -> Result<(), StoreError> {
        let n = self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1", [run_id])?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(run_id.to_string()));
        }
        Ok(())
    }
}
