//! tailhunt's outputs.
//!
//! # Brief overview
//!
//! Commands build one *document* per invocation ([`doc`]): a plain struct that serialises to the
//! JSON printed by `--json` (each has a JSON Schema under `schema/`), and that [`terminal`]
//! renders for people. Rendering returns strings; only the binary writes them.
//!
//! ```
//! use tailhunt_report::terminal::render_duration;
//! assert_eq!(render_duration(10_240_000), "10.2ms");
//! ```
#![deny(missing_docs)]

pub mod analysis;
pub mod capture;
pub mod doc;
pub mod export;
pub mod html;
pub mod link;
pub mod runq;
pub mod sock;
pub mod terminal;
