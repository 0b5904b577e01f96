//! Typed evidence documents: a run's [`Document`]s (the capture's bursts and flows, the
//! run-queue record, a transfer's summary, a sweep's steps) read back by type. Sources write
//! them through their sink (`tailhunt_model::evidence::put_evidence`).
//!
//! In: a value of a model type implementing [`Document`]. Out: the same value, from this run's
//! `documents` row — or, for a run written before its kind had a document, rebuilt from the
//! run's parameters by [`Document::from_params`]. An older version of the shape goes through
//! [`Document::upgrade`]. Nothing else in the workspace parses a stored document.

use tailhunt_model::evidence::{Document, Row, RowEncoding};

use crate::{Store, StoreError};

impl Store {
    /// The run's [`Document::NAME`] document; `None` when the run has none (and its parameters
    /// hold none either).
    pub fn evidence<D: Document>(&self, run_id: &str) -> Result<Option<D>, StoreError> {
        let err = |reason: String| StoreError::Document {
            run: run_id.to_string(),
            name: D::NAME.to_string(),
            reason,
        };
        if let Some((version, data)) = self.document_data(run_id, D::NAME)? {
            // The current shape is read as it is decompressed: through its whole text and a
            // `Value`, a capture report of 100,000 flows took several times its size.
            let doc = if version == D::VERSION {
                zstd::stream::Decoder::new(&data[..])
                    .map_err(|e| e.to_string())
                    .and_then(|dec| {
                        serde_json::from_reader::<_, D>(std::io::BufReader::new(dec))
                            .map_err(|e| e.to_string())
                    })
            } else {
                let text = zstd::stream::decode_all(&data[..]).map_err(|e| err(e.to_string()))?;
                let text = String::from_utf8(text).map_err(|e| err(format!("not UTF-8: {e}")))?;
                serde_json::from_str::<serde_json::Value>(&text)
                    .map_err(|e| e.to_string())
                    .and_then(|json| D::upgrade(version, json))
            };
            return doc.map(Some).map_err(err);
        }
        let params = self.run(run_id)?.params;
        D::from_params(&params).transpose().map_err(err)
    }
}

/// The `codec` of a `document_rows` chunk whose items are in `encoding`: the data is always
/// zstd-compressed; `zstd` alone is JSON lines (chunks written before the compact encoding).
pub(crate) fn row_codec(encoding: RowEncoding) -> &'static str {
    match encoding {
        RowEncoding::JsonLines => "zstd",
        RowEncoding::Postcard => "postcard-zstd",
    }
}

/// The encoding of a chunk stored with `codec`.
fn row_encoding(codec: &str) -> Option<RowEncoding> {
    [RowEncoding::JsonLines, RowEncoding::Postcard]
        .into_iter()
        .find(|&e| row_codec(e) == codec)
}

impl Store {
    /// Calls `each` with every item of the run's [`Row::NAME`] list in key order, and returns
    /// how many there were. Chunks are read in order of their lowest key and merged, so only
    /// the items of chunks whose key ranges overlap are held at once (items written in about
    /// the order of their keys, as a capture's flows finish, overlap little). A run with no
    /// such list (written before it had one, or by a source that keeps its items in a
    /// document) has none.
    pub fn rows<R: Row, E: From<StoreError>>(
        &self,
        run_id: &str,
        mut each: impl FnMut(R) -> Result<(), E>,
    ) -> Result<u64, E> {
        let err = |reason: String| StoreError::Document {
            run: run_id.to_string(),
            name: R::NAME.to_string(),
            reason,
        };
        let mut stmt = match self.conn.prepare(
            "SELECT seq, first_key, version, codec, data FROM document_rows
             WHERE run_id = ?1 AND name = ?2 ORDER BY first_key, seq",
        ) {
            Ok(s) => s,
            // A store of schema 4 or older opened read-only: no lists.
            Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.contains("no such table") => {
                return Ok(0)
            }
            Err(e) => return Err(StoreError::from(e).into()),
        };
        let sql = |e: rusqlite::Error| E::from(StoreError::from(e));
        let mut chunks = stmt
            .query(rusqlite::params![run_id, R::NAME])
            .map_err(sql)?;
        // The items of the chunks read so far and not yet given out, each chunk's in key order.
        let mut open: Vec<std::collections::VecDeque<R>> = Vec::new();
        let mut n = 0;
        loop {
            let next = chunks.next().map_err(sql)?;
            // Everything below the next chunk's lowest key comes before all of its items.
            let bound = match next {
                Some(r) => Some(r.get::<_, i64>(1).map_err(sql)?),
                None => None,
            };
            loop {
                let smallest = open
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| c.front().map(|f| (f.key(), i)))
                    .min();
                match smallest {
                    Some((key, i)) if bound.is_none_or(|b| key < b) => {
                        if let Some(item) = open[i].pop_front() {
                            each(item)?;
                            n += 1;
                        }
                    }
                    _ => break,
                }
            }
            open.retain(|c| !c.is_empty());
            let Some(r) = next else { break };
            let (seq, version, codec): (i64, u32, String) = (
                r.get(0).map_err(sql)?,
                r.get(2).map_err(sql)?,
                r.get(3).map_err(sql)?,
            );
            let Some(encoding) = row_encoding(&codec) else {
                return Err(err(format!(
                    "chunk {seq}: unknown codec '{codec}': use the tailhunt that wrote it"
                ))
                .into());
            };
            let data = r
                .get_ref(4)
                .and_then(|v| v.as_blob().map_err(rusqlite::Error::from))
                .map_err(sql)?;
            let data =
                zstd::stream::decode_all(data).map_err(|e| err(format!("chunk {seq}: {e}")))?;
            let items: std::collections::VecDeque<R> = encoding
                .decode(version, &data)
                .map_err(|e| err(format!("chunk {seq}: {e}")))?
                .into();
            open.push(items);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};
    use tailhunt_model::ClockOrigin;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Note {
        text: String,
        #[serde(default)]
        count: u32,
    }

    impl Document for Note {
        const NAME: &'static str = "note";
        const VERSION: u32 = 2;

        fn upgrade(version: u32, json: serde_json::Value) -> Result<Self, String> {
            match version {
                1 => Ok(Note {
                    text: json["old_text"].as_str().ok_or("no old_text")?.to_string(),
                    count: 1,
                }),
                _ => Err(format!("version {version} is unknown")),
            }
        }

        fn from_params(params: &serde_json::Value) -> Option<Result<Self, String>> {
            params.get("note").map(|n| {
                Ok(Note {
                    text: n.as_str().unwrap_or_default().to_string(),
                    count: 0,
                })
            })
        }
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Item {
        id: i64,
        text: String,
    }

    impl Row for Item {
        const NAME: &'static str = "items";
        const VERSION: u32 = 1;

        fn key(&self) -> i64 {
            self.id
        }
    }

    fn item(id: i64) -> Item {
        Item {
            id,
            text: format!("item {id}"),
        }
    }

    #[test]
    fn rows_written_in_any_order_of_chunks_read_back_in_key_order() {
        let (_dir, mut store) = store();
        let mut w = begin(&mut store);
        // As a capture's flows finish: mostly in order, a long one last, a batch unsorted.
        let batches: [&[i64]; 4] = [&[1, 2, 4], &[6, 3, 5], &[8, 7, 9], &[0, 10]];
        for b in batches {
            let items: Vec<Item> = b.iter().map(|&k| item(k)).collect();
            tailhunt_model::evidence::put_rows(&mut w, &items).unwrap();
        }
        let id = w.finish(serde_json::json!({})).unwrap();
        let mut keys = Vec::new();
        let n = store
            .rows::<Item, StoreError>(&id, |it| {
                assert_eq!(it, item(it.id));
                keys.push(it.id);
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 11);
        assert_eq!(keys, (0..=10).collect::<Vec<_>>());

        // Another run has none; a list of a newer shape says so.
        let w = begin(&mut store);
        let empty = w.finish(serde_json::json!({})).unwrap();
        assert_eq!(
            store.rows::<Item, StoreError>(&empty, |_| Ok(())).unwrap(),
            0
        );
        for encoding in [RowEncoding::JsonLines, RowEncoding::Postcard] {
            let mut w = begin(&mut store);
            w.put_rows("items", 2, &chunk(encoding, &[item(0)]))
                .unwrap();
            let newer = w.finish(serde_json::json!({})).unwrap();
            let e = store
                .rows::<Item, StoreError>(&newer, |_| Ok(()))
                .unwrap_err()
                .to_string();
            assert!(e.contains("'items'") && e.contains("version 2"), "{e}");
        }
    }

    /// A chunk of `items` in `encoding`, as a sink is handed it.
    fn chunk(encoding: RowEncoding, items: &[Item]) -> tailhunt_model::evidence::RowChunk {
        let data = items
            .iter()
            .flat_map(|it| match encoding {
                RowEncoding::JsonLines => {
                    let mut line = serde_json::to_vec(it).unwrap();
                    line.push(b'\n');
                    line
                }
                RowEncoding::Postcard => postcard::to_allocvec(it).unwrap(),
            })
            .collect();
        tailhunt_model::evidence::RowChunk {
            first_key: items[0].id,
            last_key: items[items.len() - 1].id,
            rows: items.len(),
            encoding,
            data,
        }
    }

    #[test]
    fn rows_stored_as_json_lines_before_the_compact_encoding_are_still_read() {
        let (_dir, mut store) = store();
        let mut w = begin(&mut store);
        // A store that was written to before and after the change: chunks of both kinds.
        w.put_rows(
            "items",
            1,
            &chunk(RowEncoding::JsonLines, &[item(0), item(2)]),
        )
        .unwrap();
        tailhunt_model::evidence::put_rows(&mut w, &[item(1), item(3)]).unwrap();
        let id = w.finish(serde_json::json!({})).unwrap();
        let codecs: Vec<String> = store
            .conn
            .prepare("SELECT codec FROM document_rows ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(codecs, ["zstd", "postcard-zstd"]);
        let mut read = Vec::new();
        store
            .rows::<Item, StoreError>(&id, |it| {
                read.push(it);
                Ok(())
            })
            .unwrap();
        assert_eq!(read, (0..4).map(item).collect::<Vec<_>>());
    }

    /// A run of the test kind with no params.
    fn begin(store: &mut Store) -> crate::RunWriter<'_> {
        store
            .begin_run(
                tailhunt_model::RunKind::Other("test".into()),
                serde_json::json!({}),
                ClockOrigin::now(),
            )
            .unwrap()
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        (dir, store)
    }

    #[test]
    fn a_document_reads_back_as_written_and_older_versions_are_upgraded() {
        let (_dir, mut store) = store();
        let mut w = begin(&mut store);
        let doc = Note {
            text: "hello".into(),
            count: 3,
        };
        tailhunt_model::evidence::put_evidence(&mut w, &doc).unwrap();
        let id = w.finish(serde_json::json!({})).unwrap();
        assert_eq!(store.evidence::<Note>(&id).unwrap(), Some(doc));

        let mut w = begin(&mut store);
        w.put_document("note", 1, r#"{"old_text": "from v1"}"#)
            .unwrap();
        let id = w.finish(serde_json::json!({})).unwrap();
        assert_eq!(
            store.evidence::<Note>(&id).unwrap().unwrap().text,
            "from v1"
        );
    }

    #[test]
    fn runs_older_than_their_document_read_it_from_params_and_bad_ones_say_which() {
        let (_dir, mut store) = store();
        let w = store
            .begin_run(
                tailhunt_model::RunKind::Other("test".into()),
                serde_json::json!({"note": "legacy"}),
                ClockOrigin::now(),
            )
            .unwrap();
        let id = w.finish(serde_json::json!({})).unwrap();
        assert_eq!(store.evidence::<Note>(&id).unwrap().unwrap().text, "legacy");

        let w = begin(&mut store);
        let none = w.finish(serde_json::json!({})).unwrap();
        assert_eq!(store.evidence::<Note>(&none).unwrap(), None);

        let mut w = begin(&mut store);
        w.put_document("note", 7, "{}").unwrap();
        let id = w.finish(serde_json::json!({})).unwrap();
        let e = store.evidence::<Note>(&id).unwrap_err().to_string();
        assert!(e.contains("'note'") && e.contains("version 7"), "{e}");
    }
}
