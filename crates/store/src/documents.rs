//! Typed evidence documents: a run's [`Document`]s (the capture's bursts and flows, the
//! run-queue record, a transfer's summary, a sweep's steps) read back by type. Sources write
//! them through their sink (`tailhunt_model::evidence::put_evidence`).
//!
//! In: a value of a model type implementing [`Document`]. Out: the same value, from this run's
//! `documents` row — or, for a run written before its kind had a document, rebuilt from the
//! run's parameters by [`Document::from_params`]. An older version of the shape goes through
//! [`Document::upgrade`]. Nothing else in the workspace parses a stored document.

use tailhunt_model::evidence::Document;

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

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        (dir, store)
    }

    #[test]
    fn a_document_reads_back_as_written_and_older_versions_are_upgraded() {
        let (_dir, mut store) = store();
        let mut w = store
            .begin_run(
                tailhunt_model::RunKind::Other("test".into()),
                serde_json::json!({}),
                ClockOrigin::now(),
            )
            .unwrap();
        let doc = Note {
            text: "hello".into(),
            count: 3,
        };
        tailhunt_model::evidence::put_evidence(&mut w, &doc).unwrap();
        let id = w.finish(serde_json::json!({})).unwrap();
        assert_eq!(store.evidence::<Note>(&id).unwrap(), Some(doc));

        let mut w = store
            .begin_run(
                tailhunt_model::RunKind::Other("test".into()),
                serde_json::json!({}),
                ClockOrigin::now(),
            )
            .unwrap();
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

        let w = store
            .begin_run(
                tailhunt_model::RunKind::Other("test".into()),
                serde_json::json!({}),
                ClockOrigin::now(),
            )
            .unwrap();
        let none = w.finish(serde_json::json!({})).unwrap();
        assert_eq!(store.evidence::<Note>(&none).unwrap(), None);

        let mut w = store
            .begin_run(
                tailhunt_model::RunKind::Other("test".into()),
                serde_json::json!({}),
                ClockOrigin::now(),
            )
            .unwrap();
        w.put_document("note", 7, "{}").unwrap();
        let id = w.finish(serde_json::json!({})).unwrap();
        let e = store.evidence::<Note>(&id).unwrap_err().to_string();
        assert!(e.contains("'note'") && e.contains("version 7"), "{e}");
    }
}
