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

mod source;

use std::io::{BufRead, Cursor, Read};

use ::csv::{ByteRecord, ReaderBuilder, StringRecord};

use self::source::{csv_error, delimiter_of, first_line_of, leading_lines, Source};
use crate::emit::{Emitter, Record};
use crate::error::{shorten, LineError};
use crate::lines::not_text;
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
    let input = Source::new(Cursor::new(prefix).chain(reader));
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
mod tests;
