//! Capture views: tcpdump on one interface of a case, then `tailhunt pcap` on the file.
//!
//! In: a namespace, an interface and where it sits relative to the queues. Out: a [`Tapped`]
//! capture that [`Tapped::analyse`] turns into a [`View`] and tailhunt's JSON document.

use std::path::PathBuf;

use serde_json::Value;

use super::tool::Ctx;
use super::{TruthError, View, Views};
use crate::scenario::procs::Capture;
use tailhunt_netlab::netns::Netns;

/// Headers are enough for every capture detector.
const SNAPLEN: u32 = 128;

/// A capture in progress.
pub(crate) struct Tap {
    name: String,
    position: String,
    host: String,
    file: PathBuf,
    capture: Capture,
}

/// A finished capture.
pub(crate) struct Tapped {
    pub(crate) name: String,
    pub(crate) position: String,
    pub(crate) file: PathBuf,
    /// tcpdump's counts (`{"pcap", "iface", "host", "packets_captured", ...}`).
    pub(crate) capture: Value,
}

impl Tap {
    /// Starts tcpdump on `iface` in `ns`, writing `<name>.pcap`; `position` says in words where
    /// it sits and what it can see.
    pub(crate) fn start(
        ctx: &Ctx,
        ns: &Netns,
        host: &str,
        iface: &str,
        name: &str,
        position: &str,
    ) -> Result<Tap, TruthError> {
        let file = ctx.file(&format!("{name}.pcap"));
        let capture = Capture::start(ns, iface, &file, SNAPLEN)?;
        Ok(Tap {
            name: name.into(),
            position: position.into(),
            host: host.into(),
            file,
            capture,
        })
    }

    /// Stops it (tcpdump flushes and reports its counts).
    pub(crate) fn stop(self) -> Result<Tapped, TruthError> {
        let capture = self.capture.stop(&self.host)?;
        Ok(Tapped {
            name: self.name,
            position: self.position,
            file: self.file,
            capture,
        })
    }
}

/// Stops every tap.
pub(crate) fn stop_all(taps: Vec<Tap>) -> Result<Vec<Tapped>, TruthError> {
    taps.into_iter().map(Tap::stop).collect()
}

/// Analyses every capture with `args` (and, when `again` is given, once more with those extra
/// arguments as view `<name><suffix>`).
pub(crate) fn analyse_all(
    ctx: &Ctx,
    tapped: &[Tapped],
    args: &[String],
    again: Option<(&str, &[String])>,
) -> Result<Views, TruthError> {
    let mut views = Views::default();
    for t in tapped {
        let (v, (_, doc)) = t.analyse(ctx, "", args)?;
        views.add(v, doc);
        if let Some((suffix, extra)) = again {
            let mut with = args.to_vec();
            with.extend_from_slice(extra);
            let (v, (_, doc)) = t.analyse(ctx, suffix, &with)?;
            views.add(v, doc);
        }
    }
    Ok(views)
}

/// tcpdump's own counts of every capture.
pub(crate) fn counts(tapped: &[Tapped]) -> Value {
    Value::from(tapped.iter().map(|t| t.capture.clone()).collect::<Vec<_>>())
}

impl Tapped {
    /// `tailhunt pcap FILE ARGS --json`, as view `<name><suffix>`.
    pub(crate) fn analyse(
        &self,
        ctx: &Ctx,
        suffix: &str,
        args: &[String],
    ) -> Result<(View, (String, Value)), TruthError> {
        let file = self.file.to_string_lossy().into_owned();
        let mut argv = vec!["pcap".to_string(), file];
        argv.extend(args.iter().cloned());
        let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
        let doc = ctx.analyse(&refs)?;
        let name = format!("{}{suffix}", self.name);
        let view = View {
            name: name.clone(),
            kind: super::ViewKind::Capture,
            position: self.position.clone(),
            analysis: argv,
            target: None,
        };
        Ok((view, (name, doc)))
    }
}
