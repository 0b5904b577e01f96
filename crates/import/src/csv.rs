//! CSV (and TSV, and `;`-separated) latency files, read through the `csv` crate.
//!
//! In: text. Comments (`#`) and blank lines are skipped. The first other line decides the
//! delimiter (comma, else tab, else `;`) and whether there is a header (a field that is neither
//! a number, a duration nor a time). With a header, columns are found by name (see
//! [`crate::names`]; the first column of each role wins, unknown columns are ignored); without
//! one, a single column is the latency and two columns are `timestamp,latency`. Every later row
//! must have as many fields as that first line: a row with more or fewer is an error naming the
//! line (a decimal comma, `1,2` under `latency_ms`, is one, never 1 ms).
//! Out: one [`Record`] per data row, handed to the [`Emitter`].
//!
//! Fields are quoted as RFC 4180 says (`"latency{rate=100,repeat=1}"`, `""` for a quote), and a
//! row is read into one reused buffer, so a large file imports at millions of rows per second.
//! Values are trimmed of spaces (and of double quotes around a value written after a space);
//! series names only of spaces, so a quoted name comes back as written.

use std::io::{BufRead, Cursor, Read};
use std::path::PathBuf;

use ::csv::{ByteRecord, ReaderBuilder, StringRecord};

use crate::emit::{Emitter, Record};
use crate::error::{shorten, LineError};
use crate::lines::{not_text, MAX_LINE_BYTES};
use crate::names::{classify, unit_in, Field, Role};
use crate::values::{self, UnitPlace};
use crate::ImportError;

/// How to read the data lines of one file.
#[derive(Debug)]
struct Layout {
    delimiter: char,
    /// The role of each column, by column index (`None`: not used).
    columns: Vec<Option<Field>>,
    /// Fields every row has: those of the first line.
    width: usize,
    /// Whether the first line was a header.
    header: bool,
    /// Unit of bare latency numbers: from the header, else from the options.
    latency_unit: Option<&'static str>,
}

/// Reads CSV from `reader` into `em`; `unit` is the unit for bare latency numbers, if given.
pub(crate) fn read(
    file: &str,
    reader: &mut dyn BufRead,
    unit: Option<&'static str>,
    em: &mut Emitter<'_>,
) -> Result<(), ImportError> {
    let (prefix, first_line) = leading_lines(file, reader)?;
    let Some(delimiter) = first_line.as_deref().map(delimiter_of) else {
        return Ok(());
    };
    let input = Source {
        inner: Cursor::new(prefix).chain(reader),
        since_newline: 0,
        chunk: Vec::new(),
        chunk_start: 0,
        before_chunk: None,
    };
    let mut rows = ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .delimiter(delimiter as u8)
        .buffer_capacity(1 << 16)
        .from_reader(input);
    let mut bytes = ByteRecord::new();
    let mut state = Rows {
        file,
        delimiter,
        unit,
        layout: None,
        line: String::new(),
    };
    let mut line_no = 0;
    loop {
        match rows.read_byte_record(&mut bytes) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => return Err(csv_error(file, line_no, e)),
        }
        line_no = first_line_of(&rows, &bytes);
        let row = match StringRecord::from_byte_record(std::mem::take(&mut bytes)) {
            Ok(row) => row,
            Err(e) => {
                let raw = e.into_byte_record();
                let text: Vec<u8> = raw.as_slice().to_vec();
                return Err(not_text(&text, line_no).at(file, line_no));
            }
        };
        let result = state.row(&row, em, line_no);
        bytes = row.into_byte_record();
        result?;
    }
}

/// What reading a file has learnt so far.
struct Rows<'f> {
    file: &'f str,
    delimiter: char,
    unit: Option<&'static str>,
    /// From the first row that is neither blank nor a comment.
    layout: Option<Layout>,
    /// The current row as text, for messages (one reused buffer).
    line: String,
}

impl Rows<'_> {
    /// Handles one row: skips blanks and indented comments, takes the first other row as the
    /// layout (and skips it when it is a header), pushes data rows.
    fn row(
        &mut self,
        row: &StringRecord,
        em: &mut Emitter<'_>,
        line_no: u64,
    ) -> Result<(), ImportError> {
        // The CSV reader skips `#` comments; one after spaces is a comment too. A field that
        // starts with `#` itself was quoted (or the reader would have skipped it): data.
        let first = row.get(0).unwrap_or("");
        let indented_comment =
            first.starts_with(char::is_whitespace) && first.trim_start().starts_with('#');
        if (row.len() == 1 && first.trim().is_empty()) || indented_comment {
            return Ok(());
        }
        self.line.clear();
        for (i, f) in row.iter().enumerate() {
            if i > 0 {
                self.line.push(self.delimiter);
            }
            self.line.push_str(f);
        }
        let (file, line) = (self.file, self.line.as_str());
        let layout = match &mut self.layout {
            Some(l) => l,
            slot @ None => {
                let l = layout_of(row, line, self.delimiter, self.unit)
                    .map_err(|e| e.at(file, line_no))?;
                let header = l.header;
                let l = slot.insert(l);
                if header {
                    return Ok(());
                }
                l
            }
        };
        em.count_line();
        let rec = record(layout, row, line).map_err(|e| e.at(file, line_no))?;
        em.push(&rec, line, line_no)
    }
}

/// The lines up to and including the first one that is neither blank nor a comment (a UTF-8
/// byte-order mark dropped), and that line; `None` when there is none. Read ahead so the
/// delimiter is known before the CSV reader starts, and handed back to it unread.
fn leading_lines(
    file: &str,
    reader: &mut dyn BufRead,
) -> Result<(Vec<u8>, Option<String>), ImportError> {
    let mut prefix = Vec::new();
    let mut line_no = 0;
    loop {
        let start = prefix.len();
        let n = (&mut *reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut prefix)
            .map_err(|source| ImportError::Io {
                path: PathBuf::from(file),
                source,
            })?;
        if n == 0 {
            return Ok((prefix, None));
        }
        line_no += 1;
        if line_no == 1 && prefix.starts_with(b"\xef\xbb\xbf") {
            prefix.drain(..3);
        }
        let raw = &prefix[start.min(prefix.len())..];
        if !raw.ends_with(b"\n") && n as u64 >= MAX_LINE_BYTES {
            return Err(too_long().at(file, line_no));
        }
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(_) => return Err(not_text(raw, line_no).at(file, line_no)),
        };
        let trimmed = text.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            let line = trimmed.to_string();
            return Ok((prefix, Some(line)));
        }
    }
}

/// The delimiter a first line uses: comma, else tab, else `;`.
fn delimiter_of(line: &str) -> char {
    [',', '\t', ';']
        .into_iter()
        .find(|&d| line.contains(d))
        .unwrap_or(',')
}

fn too_long() -> LineError {
    let reason = format!(
        "line is longer than {} MiB; is this really a CSV or JSON-lines file?",
        MAX_LINE_BYTES >> 20
    );
    LineError::new("", reason)
}

/// A CSV reader error as an import error at the line after `last_line`.
fn csv_error(file: &str, last_line: u64, e: ::csv::Error) -> ImportError {
    let line = e
        .position()
        .map_or(last_line + 1, |p| p.line().max(last_line + 1));
    match e.into_kind() {
        ::csv::ErrorKind::Io(source) if source.kind() == std::io::ErrorKind::InvalidData => {
            too_long().at(file, line)
        }
        ::csv::ErrorKind::Io(source) => ImportError::Io {
            path: PathBuf::from(file),
            source,
        },
        other => {
            LineError::new("", format!("cannot read this line as CSV: {other:?}")).at(file, line)
        }
    }
}

/// The 1-based line a record just read starts on.
///
/// The reader's position after a record counts the newlines consumed so far, blank and comment
/// lines included (which the position it stamps on the record, taken before skipping them,
/// does not). The record's terminator is consumed with it when it is `\n` (not yet when it is
/// the `\r` of `\r\n`, nor at the end of the input), and quoted fields may hold newlines.
fn first_line_of<R: Read>(rows: &::csv::Reader<Source<R>>, record: &ByteRecord) -> u64 {
    let end = rows.position();
    let terminated = end
        .byte()
        .checked_sub(1)
        .and_then(|at| rows.get_ref().byte_at(at))
        == Some(b'\n');
    let inside = record.as_slice().iter().filter(|&&b| b == b'\n').count() as u64;
    end.line()
        .saturating_sub(u64::from(terminated))
        .saturating_sub(inside)
        .max(1)
}

/// The CSV reader's input: refuses a line longer than [`MAX_LINE_BYTES`] (a file without line
/// breaks would otherwise grow the reader's buffer without bound), and keeps the last chunk it
/// handed out so [`first_line_of`] can look at the byte that ended a record (the reader asks
/// for more only when it has consumed everything before).
struct Source<R> {
    inner: R,
    since_newline: u64,
    chunk: Vec<u8>,
    /// Offset of `chunk` in the input.
    chunk_start: u64,
    /// The byte just before `chunk`.
    before_chunk: Option<u8>,
}

impl<R> Source<R> {
    /// The input's byte at `offset`, if it is in the last chunk or just before it.
    fn byte_at(&self, offset: u64) -> Option<u8> {
        if offset + 1 == self.chunk_start {
            return self.before_chunk;
        }
        let i = usize::try_from(offset.checked_sub(self.chunk_start)?).ok()?;
        self.chunk.get(i).copied()
    }
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = &buf[..n];
        if n > 0 {
            self.before_chunk = self.chunk.last().copied().or(self.before_chunk);
            self.chunk_start += self.chunk.len() as u64;
            self.chunk.clear();
            self.chunk.extend_from_slice(got);
        }
        match got.iter().rposition(|&b| b == b'\n') {
            Some(i) => self.since_newline = (n - i - 1) as u64,
            None => self.since_newline += n as u64,
        }
        if self.since_newline > MAX_LINE_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "line too long",
            ));
        }
        Ok(n)
    }
}

/// The layout from the first non-comment row (`line` is its text, for messages).
fn layout_of(
    row: &StringRecord,
    line: &str,
    delimiter: char,
    unit: Option<&'static str>,
) -> Result<Layout, LineError> {
    let is_header = row.iter().map(clean).any(|f| !is_data(f));
    let width = row.len();
    let mut columns: Vec<Option<Field>> = if is_header {
        row.iter().map(classify).collect()
    } else {
        vec![None; width]
    };
    let latency = Field {
        role: Role::Latency,
        unit: None,
    };
    match (is_header, columns.as_mut_slice()) {
        // One column is the latency, whatever its header says (its unit still counts).
        (_, [only]) => {
            let unit = if is_header { unit_in(line) } else { None };
            *only = Some(Field { unit, ..latency });
        }
        (false, [ts, lat]) => {
            *ts = Some(Field {
                role: Role::Timestamp,
                unit: None,
            });
            *lat = Some(latency);
        }
        (false, _) => {
            let reason = format!(
                "{width} columns but no header line; add one naming the columns, e.g. \
                 ts,latency_ms,outcome: '{}'",
                shorten(line)
            );
            return Err(LineError::new(line, reason));
        }
        (true, _) => {}
    }
    keep_first_of_each_role(&mut columns);
    let has = |role: Role| columns.iter().flatten().any(|f| f.role == role);
    let timed = has(Role::Timestamp) || has(Role::Intended) || has(Role::Start);
    let latency_from_times = has(Role::End) && timed;
    if !(has(Role::Latency) || latency_from_times) {
        let reason = format!(
            "the header names no latency column (name one latency, latency_ms, duration_us, rt \
             or elapsed): '{}'",
            shorten(line)
        );
        return Err(LineError::new(line, reason));
    }
    let latency_unit = columns
        .iter()
        .flatten()
        .find(|f| f.role == Role::Latency)
        .and_then(|f| f.unit)
        .or(unit);
    Ok(Layout {
        delimiter,
        columns,
        width,
        header: is_header,
        latency_unit,
    })
}

/// Later columns with a role already taken are ignored (JMeter has both `elapsed` and
/// `Latency`; the first, `elapsed`, is the response time).
fn keep_first_of_each_role(columns: &mut [Option<Field>]) {
    let mut seen: Vec<Role> = Vec::new();
    for c in columns.iter_mut() {
        if let Some(f) = c {
            if seen.contains(&f.role) {
                *c = None;
            } else {
                seen.push(f.role);
            }
        }
    }
}

/// Whether a field of the first line is a value (so the line is data, not a header). Anything
/// starting like a number counts, so a bad first value (`12furlongs`) is reported as bad data
/// instead of being taken for a header.
fn is_data(field: &str) -> bool {
    let numeric_start = field
        .bytes()
        .next()
        .is_none_or(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.'));
    numeric_start || values::time("", field, None).is_ok()
}

/// A value without surrounding spaces and double quotes.
fn clean(field: &str) -> &str {
    field.trim().trim_matches('"').trim()
}

/// Reads one data row (`line` is its text, for messages).
fn record<'l>(layout: &Layout, row: &'l StringRecord, line: &str) -> Result<Record<'l>, LineError> {
    if row.len() != layout.width {
        return Err(field_count(layout, row, line));
    }
    let mut rec = Record::default();
    for (field, text) in layout.columns.iter().zip(row.iter()) {
        let Some(field) = field else { continue };
        if field.role == Role::Series {
            rec.series = Some(text.trim());
            continue;
        }
        let text = clean(text);
        match field.role {
            Role::Latency => {
                let unit = layout.latency_unit;
                rec.latency_ns = Some(values::latency(text, unit, UnitPlace::Header)?);
            }
            Role::Timestamp => rec.ts = optional_time("timestamp", text, field.unit)?,
            Role::Intended => rec.intended = optional_time("intended time", text, field.unit)?,
            Role::Start => rec.start = optional_time("start time", text, field.unit)?,
            Role::End => rec.end = optional_time("end time", text, field.unit)?,
            Role::Outcome(polarity) => rec.outcome = Some(values::outcome(text, polarity)?),
            Role::Series => {}
        }
    }
    Ok(rec)
}

/// A time; an empty field is no time (an untimed series in an export).
fn optional_time(
    what: &str,
    text: &str,
    unit: Option<&str>,
) -> Result<Option<values::Instant>, LineError> {
    if text.is_empty() {
        return Ok(None);
    }
    values::time(what, text, unit).map(Some)
}

/// A row whose number of fields differs from the first line's, with the likely cause.
fn field_count(layout: &Layout, row: &StringRecord, line: &str) -> LineError {
    let (want, found) = (layout.width, row.len());
    let first = if layout.header {
        "the header"
    } else {
        "the first line"
    };
    let hint = if layout.delimiter == ',' && found > want && row.iter().all(|f| is_data(clean(f))) {
        " (a decimal comma? write 1.2, not 1,2, or quote the field)"
    } else if found > want {
        " (quote a field that holds the delimiter)"
    } else {
        ""
    };
    let reason = format!(
        "{found} fields but {first} has {want}{hint}: '{}'",
        shorten(line)
    );
    LineError::new(line, reason)
}

#[cfg(test)]
mod tests {
    use tailhunt_model::{Outcome, Sample, Series, Timing};

    use crate::{import_text, Format, ImportOptions, ImportSummary};

    const MS: i64 = 1_000_000;
    const EPOCH_NS: i64 = 1_714_560_000_000_000_000;

    fn import(text: &str) -> (ImportSummary, Vec<Series>) {
        import_with(text, &ImportOptions::default())
    }

    fn import_with(text: &str, opts: &ImportOptions) -> (ImportSummary, Vec<Series>) {
        match import_text("data.csv", text, opts) {
            Ok(got) => got,
            Err(e) => panic!("import failed: {e}"),
        }
    }

    fn in_unit(unit: &str) -> ImportOptions {
        ImportOptions {
            unit: Some(unit.into()),
            ..ImportOptions::default()
        }
    }

    fn latencies(s: &Series) -> Vec<i64> {
        s.samples()
            .unwrap()
            .iter()
            .map(Sample::latency_ns)
            .collect()
    }

    #[test]
    fn bare_numbers_take_the_unit_option() {
        let (summary, series) = import_with("12\n13.5\n\n", &in_unit("ms"));
        assert_eq!(summary.format, Format::Csv);
        assert_eq!((summary.series, summary.samples, summary.lines), (1, 2, 2));
        assert_eq!(summary.first_epoch_ns, None);
        assert_eq!(series[0].name, "latency");
        assert_eq!(series[0].timing, Timing::Untimed);
        let samples = series[0].samples().unwrap();
        assert_eq!(samples[0], Sample::from_latency(0, 12 * MS, Outcome::Ok));
        assert_eq!(samples[1], Sample::from_latency(1, 13_500_000, Outcome::Ok));
    }

    #[test]
    fn values_with_units_need_no_option() {
        let (_, series) = import("# from a tool\n12ms\n450us\n0.45 ms\n1.5s\n\"7ns\"\n");
        assert_eq!(
            latencies(&series[0]),
            [12 * MS, 450_000, 450_000, 1_500 * MS, 7]
        );
    }

    #[test]
    fn header_gives_the_unit() {
        let (summary, series) = import("latency_ms\n12\n0.5\n");
        assert_eq!((summary.lines, summary.samples), (2, 2));
        assert_eq!(latencies(&series[0]), [12 * MS, MS / 2]);
        let (_, series) = import("\"Latency (us)\"\n12\n");
        assert_eq!(latencies(&series[0]), [12_000]);
        // Any single column is the latency; its unit still counts.
        let (_, series) = import("value_ms\n3\n");
        assert_eq!(latencies(&series[0]), [3 * MS]);
    }

    #[test]
    fn unit_in_the_header_wins_over_the_option() {
        let (_, series) = import_with("rt_s\n2\n", &in_unit("ms"));
        assert_eq!(latencies(&series[0]), [2_000 * MS]);
    }

    #[test]
    fn timestamp_latency_with_epoch_seconds() {
        let (summary, series) = import("1714560000.5,12ms\n1714560000.25,13ms\n");
        assert_eq!(series[0].timing, Timing::Timed);
        assert_eq!(summary.first_epoch_ns, Some(EPOCH_NS + 250 * MS));
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[0],
            Sample::from_latency(EPOCH_NS + 500 * MS, 12 * MS, Outcome::Ok)
        );
        assert_eq!(samples[1].intended_ns, EPOCH_NS + 250 * MS);
    }

    #[test]
    fn timestamp_latency_with_rfc3339() {
        let text = "2024-05-01T12:00:00Z,1ms\n2024-05-01T12:00:00.5Z,2ms\n";
        let (summary, series) = import(text);
        let noon = 1_714_564_800_000_000_000;
        assert_eq!(summary.first_epoch_ns, Some(noon));
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[1],
            Sample::from_latency(noon + 500 * MS, 2 * MS, Outcome::Ok)
        );
    }

    #[test]
    fn relative_timestamps_have_no_epoch() {
        let (summary, series) = import("ts_ms,latency_us\n0,100\n250,200\n");
        assert_eq!(summary.first_epoch_ns, None);
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[1],
            Sample::from_latency(250 * MS, 200_000, Outcome::Ok)
        );
    }

    #[test]
    fn outcome_column_counts_outcomes() {
        let text = "latency_ms,status\n1,200\n2,503\n3,timeout\n4,ok\n";
        let (summary, series) = import(text);
        assert_eq!(summary.outcomes, [2, 1, 1]);
        let outcomes: Vec<Outcome> = series[0]
            .samples()
            .unwrap()
            .iter()
            .map(|s| s.outcome)
            .collect();
        assert_eq!(
            outcomes,
            [Outcome::Ok, Outcome::Error, Outcome::Timeout, Outcome::Ok]
        );
        let (summary, _) = import("latency_ms,error\n1,\n2,connection refused\n3,read timeout\n");
        assert_eq!(summary.outcomes, [1, 1, 1]);
    }

    #[test]
    fn series_column_splits_rows() {
        let text = "series,latency_ms,bytes\nget,1,10\nput,2,20\nget,3,30\n,4,0\n";
        let (summary, series) = import(text);
        assert_eq!(summary.series, 3);
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["get", "put", "latency"]);
        assert_eq!(latencies(&series[0]), [MS, 3 * MS]);
        // Untimed samples are numbered within their series.
        assert_eq!(series[0].samples().unwrap()[1].intended_ns, 1);
        assert!(series.iter().all(|s| s.timing == Timing::Untimed));
    }

    #[test]
    fn tab_and_semicolon_separated() {
        let (_, series) = import("ts\tlatency_us\n0.5\t100\n1.0\t200\n");
        let samples = series[0].samples().unwrap();
        assert_eq!(
            samples[1],
            Sample::from_latency(1_000 * MS, 200_000, Outcome::Ok)
        );
        let (_, series) = import("ts;latency\n0.5;1ms\n");
        assert_eq!(latencies(&series[0]), [MS]);
    }

    #[test]
    fn intended_and_start_keep_the_schedule() {
        let text = "scheduled,start,latency_ms\n1.0,1.5,2\n";
        let (_, series) = import(text);
        let s = series[0].samples().unwrap()[0];
        assert_eq!(
            s,
            Sample::new(1_000 * MS, 1_500 * MS, 1_502 * MS, Outcome::Ok)
        );
        assert_eq!(s.latency_ns(), 502 * MS);
        let (_, series) = import("start_ms,end_ms\n10,15\n");
        assert_eq!(
            series[0].samples().unwrap()[0],
            Sample::new(10 * MS, 10 * MS, 15 * MS, Outcome::Ok)
        );
    }

    #[test]
    fn jmeter_results_import_with_the_unit_option() {
        let text = "timeStamp,elapsed,label,responseCode,success,Latency\n\
                    1714560000000,120,home,200,true,80\n\
                    1714560000100,3000,home,504,false,2900\n";
        let (summary, series) = import_with(text, &in_unit("ms"));
        assert_eq!(summary.first_epoch_ns, Some(1_714_560_000_000 * MS));
        assert_eq!(summary.outcomes, [1, 1, 0]);
        assert_eq!(latencies(&series[0]), [120 * MS, 3_000 * MS]);
    }

    #[test]
    fn many_lines_are_pushed_in_chunks_in_order() {
        let text: String = (0..20_000).map(|i| format!("{i}us\n")).collect();
        let (summary, series) = import(&text);
        assert_eq!(summary.samples, 20_000);
        let got = latencies(&series[0]);
        assert!(got.iter().enumerate().all(|(i, &l)| l == i as i64 * 1_000));
    }

    #[test]
    fn windows_line_endings_and_utf8_bom_import_fine() {
        let text = "\u{feff}ts,latency_ms\r\n0.5,12\r\n# note\r\n\r\n1.0,13\r\n";
        let (summary, series) = import(text);
        assert_eq!((summary.lines, summary.samples), (2, 2));
        assert_eq!(latencies(&series[0]), [12 * MS, 13 * MS]);
        let (_, series) = import("\u{feff}12ms\r\n");
        assert_eq!(latencies(&series[0]), [12 * MS]);
    }

    #[test]
    fn quoted_series_names_keep_their_commas_and_become_labels() {
        let text = "series,latency_ms\n\"latency{rate=100,repeat=1}\",5\n\"a \"\"b\"\"\",6\n";
        let (summary, series) = import(text);
        assert_eq!(summary.series, 2);
        assert_eq!(series[0].name, "latency");
        assert_eq!(series[0].display_name(), "latency{rate=100,repeat=1}");
        assert_eq!(series[1].name, "a \"b\"");
        assert!(series[1].labels.is_empty());
    }

    #[test]
    fn end_time_wins_over_the_latency_column() {
        // An export: latency counts from the intended time, and start != intended.
        let text = "series,intended_ns,start_ns,end_ns,latency_ns,outcome\n\
                    latency,100,150,400,300,timeout\n";
        let (_, series) = import(text);
        assert_eq!(
            series[0].samples().unwrap()[0],
            Sample::new(100, 150, 400, Outcome::Timeout)
        );
    }

    #[test]
    fn empty_times_are_an_untimed_series_beside_timed_ones() {
        let text = "series,intended_ns,start_ns,end_ns,latency_ns,outcome\n\
                    a,10,12,20,10,ok\n\
                    b,,,,7,error\n\
                    b,,,,8,ok\n";
        let (_, series) = import(text);
        assert_eq!(series[0].timing, Timing::Timed);
        assert_eq!(series[1].timing, Timing::Untimed);
        assert_eq!(
            series[1].samples().unwrap()[1],
            Sample::from_latency(1, 8, Outcome::Ok)
        );
    }

    #[test]
    fn line_numbers_count_comments_blank_lines_crlf_and_quoted_newlines() {
        let text = "# c\n\nseries,latency\r\n\"two\nlines\",1ms\r\n\r\n# x\r\n  # y\nz,abc\r\n";
        let e = crate::import_text("data.csv", text, &ImportOptions::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "data.csv:9: cannot read latency 'abc': 'abc' is not a number"
        );
        let e = crate::import_text(
            "data.csv",
            "latency\n\"1 x\n\n\"\n2ms",
            &ImportOptions::default(),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("data.csv:2: "), "{e}");
        let e = crate::import_text("data.csv", "latency\n1ms\nx", &ImportOptions::default())
            .unwrap_err();
        assert!(e.to_string().starts_with("data.csv:3: "), "{e}");
    }
}
