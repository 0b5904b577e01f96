//! The end of the pass: every flow ended, the channels' bursts found, the report built.
//!
//! In: the analyzer after its last packet (a whole pass's, or a sharded pass's joined one).
//! Out: the [`CaptureReport`]; with [`super::AnalysisConfig::store_flows`], the summaries of the
//! flows still held, handed to the caller to store.

use tailhunt_model::evidence::capture::{CaptureReport, FlowSummary};

use super::{summarise, Analyzer, Flow};
use crate::bins::SparseBins;
use crate::burst::{analyse_channel, BurstConfig, FlowBins};
use crate::flowkey::FlowKey;

impl Analyzer {
    /// Ends every flow (their last exchanges land in `events`) and builds the report (with
    /// [`super::AnalysisConfig::store_flows`], the summaries of the flows still held wait in
    /// [`Analyzer::finished`]).
    pub fn finish(&mut self) -> CaptureReport {
        let Ok(report) = self.finish_with(|_| Ok::<(), std::convert::Infallible>(()));
        report
    }

    /// [`Analyzer::finish`], handing the summaries of the flows still held to `store` as they
    /// are made, [`crate::record::FLOW_BATCH`] at a time, when they are stored as they
    /// finish (at 10,000 new connections a second, a second's worth are held at the end).
    pub fn finish_with<E>(
        &mut self,
        mut store: impl FnMut(&mut Vec<FlowSummary>) -> Result<(), E>,
    ) -> Result<CaptureReport, E> {
        let ids = self.live_ids();
        for i in &ids {
            if let Some(Flow::Tcp(t)) = self.flows.get_mut(i) {
                t.finish(&mut self.events);
            }
        }
        let cfg = BurstConfig {
            bin_ns: self.cfg.bin_ns,
            link_rate_bps: self.cfg.link_rate_bps,
            threshold: self.cfg.burst_threshold,
        };
        let flow_bins: Vec<FlowBins<'_>> = self
            .flow_directions()
            .into_iter()
            .map(|(_, name, key, side, bins)| FlowBins {
                name,
                sender: key.endpoint(side).to_string(),
                src: key.endpoint(side).ip(),
                dst: key.endpoint(1 - side).ip(),
                bins,
            })
            .collect();
        let mut channels = Vec::new();
        let mut bursts = Vec::new();
        let mut keys: Vec<_> = self.channels.keys().copied().collect();
        keys.sort();
        for (dir, host) in keys {
            // Read once, a packed block at a time.
            let bins = self.channel_bins[self.channels[&(dir, host)]].iter(&self.spill);
            let (summary, b) = analyse_channel(dir, host, bins, &flow_bins, &cfg);
            channels.push(summary);
            bursts.extend(b);
        }
        channels.sort_by_key(|c| std::cmp::Reverse(c.bytes));
        bursts.sort_by_key(|b| (b.start_ns, b.dir, b.host.clone()));
        let held = std::mem::take(&mut self.retired.summaries);
        let (flows, flows_total, tcp_flows_total) = match self.retired.kept.take() {
            None => {
                let mut flows = held;
                flows.extend(ids.iter().map(|i| summarise(*i, &self.flows[i])));
                flows.sort_unstable_by_key(|f| f.id); // ids are unique
                let tcp = flows.iter().filter(|f| f.tcp.is_some()).count() as u64;
                let total = self.next_id.max(flows.len()) as u64;
                (flows, total, tcp)
            }
            // Those still held are stored now too; the report keeps what it needs of all.
            Some(mut kept) => {
                let mut tcp = self.retired.tcp_stored;
                let live = ids.iter().map(|i| summarise(*i, &self.flows[i]));
                for f in held.into_iter().chain(live) {
                    kept.offer(&f);
                    tcp += u64::from(f.tcp.is_some());
                    self.finished.push(f);
                    if self.finished.len() >= crate::record::FLOW_BATCH {
                        store(&mut self.finished)?;
                    }
                }
                (kept.into_flows(), self.next_id as u64, tcp)
            }
        };
        Ok(CaptureReport {
            packets: self.packets,
            wire_bytes: self.wire_bytes,
            first_ns: self.first_ns.unwrap_or(0),
            last_ns: self.last_ns.max(self.first_ns.unwrap_or(0)),
            out_of_order: self.out_of_order,
            skipped: self.skipped.clone(),
            bin_ns: self.cfg.bin_ns,
            link_rate_bps: self.cfg.link_rate_bps,
            channels,
            bursts,
            flows_total,
            tcp_flows_total,
            flows,
            stalls: self.stalls.clone(),
        })
    }

    /// Every flow direction's bins still held, in order of flow id and side: `(id, flow
    /// name, key, side, bins)` (a retired flow's only where a burst could claim them, unless
    /// [`AnalysisConfig::keep_flow_bins`]).
    pub(super) fn flow_directions(&self) -> Vec<(usize, String, FlowKey, usize, &SparseBins)> {
        let mut out: Vec<_> = self
            .retired
            .bins
            .iter()
            .map(|k| (k.id, k.name.clone(), k.key, k.side, &k.bins))
            .collect();
        for (&i, f) in &self.flows {
            let name = f.name().to_string();
            for side in 0..2 {
                out.push((i, name.clone(), *f.key(), side, &f.bins()[side]));
            }
        }
        out.sort_by_key(|d| (d.0, d.3));
        out
    }
}
