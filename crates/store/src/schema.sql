-- tailhunt store, schema version 6 (2 added value_blocks, 3 documents, 4 their versions,
-- 5 document_rows, 6 derived_series).
-- Times are integer nanoseconds.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per invocation of a measuring command.
CREATE TABLE IF NOT EXISTS runs (
    id              TEXT PRIMARY KEY,          -- short hex id
    kind            TEXT NOT NULL,             -- import, load, pcap, ...
    status          TEXT NOT NULL CHECK (status IN ('partial', 'complete')),
    created_wall_ns INTEGER NOT NULL,          -- when the run was recorded (epoch ns)
    origin_wall_ns  INTEGER NOT NULL,          -- wall clock at the origin (epoch ns) ...
    origin_mono_ns  INTEGER NOT NULL,          -- ... and the monotonic clock at the same instant
    params          TEXT NOT NULL              -- JSON object: flags, input, host facts
);

-- One row per series of a run.
CREATE TABLE IF NOT EXISTS series (
    id      INTEGER PRIMARY KEY,
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name    TEXT NOT NULL,
    labels  TEXT NOT NULL,                     -- JSON object
    unit    TEXT NOT NULL,                     -- ns, bytes, packets, count, ratio
    timing  TEXT NOT NULL,                     -- timed | untimed
    kind    TEXT NOT NULL,                     -- samples | histograms | values
    count   INTEGER NOT NULL DEFAULT 0         -- samples (or histogram counts) stored
);
CREATE INDEX IF NOT EXISTS series_run ON series (run_id);

-- A sample series whose samples are worked out from another's when read, sample for sample:
-- `part` of each (client_lateness: start - intended; service: end - start; see SamplePart in
-- crates/model/src/sample.rs). It has no blocks and its `count` is its parent's.
CREATE TABLE IF NOT EXISTS derived_series (
    series_id INTEGER PRIMARY KEY REFERENCES series (id) ON DELETE CASCADE,
    parent_id INTEGER NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    part      TEXT NOT NULL
);

-- Raw samples, BLOCK_SAMPLES (8192) per block, compressed (see crates/store/src/block.rs).
CREATE TABLE IF NOT EXISTS sample_blocks (
    series_id          INTEGER NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    seq                INTEGER NOT NULL,       -- 0, 1, 2, ... in write order
    n                  INTEGER NOT NULL,       -- samples in the block
    first_intended_ns  INTEGER NOT NULL,
    last_intended_ns   INTEGER NOT NULL,
    min_latency_ns     INTEGER NOT NULL,       -- end - intended
    max_latency_ns     INTEGER NOT NULL,
    codec              INTEGER NOT NULL,
    data               BLOB NOT NULL,
    PRIMARY KEY (series_id, seq)
) WITHOUT ROWID;

-- Interval histograms (crates/histogram/src/codec.rs encoding).
CREATE TABLE IF NOT EXISTS histograms (
    series_id INTEGER NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    start_ns  INTEGER NOT NULL,
    end_ns    INTEGER NOT NULL,
    count     INTEGER NOT NULL,
    data      BLOB NOT NULL,
    PRIMARY KEY (series_id, seq)
) WITHOUT ROWID;

-- Values over time (bytes per 1 ms bin, window sizes), BLOCK_POINTS (8192) per block
-- (crates/store/src/values.rs encoding).
CREATE TABLE IF NOT EXISTS value_blocks (
    series_id  INTEGER NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    first_t_ns INTEGER NOT NULL,
    last_t_ns  INTEGER NOT NULL,
    min_value  INTEGER NOT NULL,
    max_value  INTEGER NOT NULL,
    data       BLOB NOT NULL,
    PRIMARY KEY (series_id, seq)
) WITHOUT ROWID;

-- Large JSON documents of a run (a capture's report, with every flow), zstd-compressed, so the
-- run's params stay small: `tailhunt diagnose` reads them back.
CREATE TABLE IF NOT EXISTS documents (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name   TEXT NOT NULL,                      -- capture, ...
    codec  TEXT NOT NULL,                      -- zstd (of UTF-8 JSON)
    data   BLOB NOT NULL,
    version INTEGER NOT NULL DEFAULT 1,        -- of the document's shape (schema 4)
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;

-- Evidence lists too long to hold in memory (a capture's flows, written as connections
-- retire): chunks of items, each chunk the zstd of its items' JSON, one per line, in key
-- order; read back merged in key order (schema 5).
CREATE TABLE IF NOT EXISTS document_rows (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name      TEXT NOT NULL,                   -- flows, ...
    seq       INTEGER NOT NULL,                -- 0, 1, 2, ... in write order
    first_key INTEGER NOT NULL,                -- the chunk's lowest item key (a flow's id) ...
    last_key  INTEGER NOT NULL,                -- ... and its highest
    n         INTEGER NOT NULL,                -- items in the chunk
    version   INTEGER NOT NULL,                -- of the items' shape
    codec     TEXT NOT NULL,                   -- zstd (of UTF-8 JSON lines)
    data      BLOB NOT NULL,
    PRIMARY KEY (run_id, name, seq)
) WITHOUT ROWID;

-- Detector conclusions.
CREATE TABLE IF NOT EXISTS findings (
    id         INTEGER PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    detector   TEXT NOT NULL,
    verdict    TEXT NOT NULL,
    confidence REAL NOT NULL,
    summary    TEXT NOT NULL,
    evidence   TEXT NOT NULL,                  -- JSON array
    fix        TEXT
);
CREATE INDEX IF NOT EXISTS findings_run ON findings (run_id);
