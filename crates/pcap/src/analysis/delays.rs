//! The bystanders' upstream queueing delays: what a retired connection's TCP timestamps leave
//! behind, and the `queue_delay` samples made of them at the end of the pass.
//!
//! In: each flow direction's [`crate::delay::DelayTrack`] as its connection retires (and the
//! live ones' at the end), the bursts of the report. Out: one sample per direction and bin of
//! the directions that were no burst's source while they waited, whose sender's clock ticks
//! at 1 kHz (or whose host vouches for it), in time order.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tailhunt_model::evidence::capture::CaptureReport;

use super::Analyzer;
use crate::delay::{ClockCheck, DelayTrack};
use crate::flowkey::FlowKey;
use crate::pack::SortedPairs;
use crate::retired::KeptDelays;

impl Analyzer {
    /// Keeps what the bystanders' delays need of retired flow `i`'s timestamps: its host's
    /// clock marks; the delays of a direction that may be a burst source with its name (a
    /// burst's span is then left out); those of the others only as samples per host (16
    /// bytes each, no per-connection record), since no burst can leave them out.
    pub(super) fn retire_delays(
        &mut self,
        i: usize,
        key: &FlowKey,
        name: &dyn Fn() -> String,
        may_be_source: [bool; 2],
    ) {
        let Some(tracks) = self.delays.remove(&i) else {
            return;
        };
        for (side, track) in tracks.iter().enumerate() {
            if track.is_empty() {
                continue;
            }
            let check = track.clock_check(self.cfg.bin_ns, &self.spill);
            let sender = key.endpoint(side);
            let mark = self.retired.clock_hosts.entry(sender.ip()).or_default();
            mark.0 |= check == ClockCheck::Passed;
            mark.1 |= check == ClockCheck::Failed;
            if check == ClockCheck::Failed {
                continue;
            }
            let delays: Vec<_> = track.delays(&self.spill).collect();
            if may_be_source[side] || self.cfg.keep_flow_bins {
                self.retired.delays.push(KeptDelays {
                    name: name(),
                    sender,
                    check,
                    delays,
                });
            } else {
                let host = self.retired.host_delays.entry(sender.ip()).or_default();
                match check {
                    ClockCheck::Passed => host.passed.extend(delays, &self.spill),
                    _ => host.short.extend(delays, &self.spill),
                }
            }
        }
    }

    /// The upstream queueing delay of every packet that made no burst, one per flow direction
    /// and bin (its most delayed packet): `(sent, arrived)`, when it would have arrived
    /// without waiting and when it did ([`queue_delay_sample`] makes it a sample). A direction
    /// is left out while it is a source of a burst (its wait is its own doing) and when its
    /// sender's timestamp clock does not tick at 1 kHz ([`crate::delay`]); in time order.
    /// Pairs, not samples, and a live direction's delays made as they are read: a
    /// half-hour stream's 3.6 million took 250 MB at the end of the pass as samples and copies.
    pub fn bystander_delays(
        &self,
        report: &CaptureReport,
    ) -> impl Iterator<Item = (i64, i64)> + '_ {
        let bin_ns = self.cfg.bin_ns;
        // Where each flow direction was a source: `(flow name, sender) -> busy spans`.
        let mut busy: BTreeMap<(&str, &str), Vec<(i64, i64)>> = BTreeMap::new();
        for b in &report.bursts {
            let span = (
                b.start_ns - bin_ns,
                b.busy_until_ns(report.link_rate_bps) + bin_ns,
            );
            for f in b.sources() {
                busy.entry((f.flow.as_str(), f.sender.as_str()))
                    .or_default()
                    .push(span);
            }
        }
        // Every direction with timestamps: the retired ones' kept delays (read in place: a
        // copy doubled the memory of a many-connection capture), then the live ones.
        let mut ids: Vec<usize> = self.delays.keys().copied().collect();
        ids.sort_unstable();
        let live: Vec<(String, SocketAddr, ClockCheck, &DelayTrack)> = ids
            .iter()
            .flat_map(|i| {
                let f = &self.flows[i];
                self.delays[i]
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| !t.is_empty())
                    .map(move |(side, t)| {
                        let check = t.clock_check(bin_ns, &self.spill);
                        (f.name().to_string(), f.key().endpoint(side), check, t)
                    })
            })
            .collect();
        // A host whose long directions tick at 1 kHz vouches for its short ones.
        let mut hosts = self.retired.clock_hosts.clone();
        let checks = self
            .retired
            .delays
            .iter()
            .map(|d| (d.sender, d.check))
            .chain(live.iter().map(|d| (d.1, d.2)));
        for (sender, check) in checks {
            let h = hosts.entry(sender.ip()).or_default();
            h.0 |= check == ClockCheck::Passed;
            h.1 |= check == ClockCheck::Failed;
        }
        // Sorted through the scratch file: a long capture's delays are millions.
        let mut out = SortedPairs::default();
        let spill = &self.spill;
        let mut keep = |name: &str,
                        sender: SocketAddr,
                        check,
                        delays: &mut dyn Iterator<Item = (i64, i64)>| {
            let vouched = hosts.get(&sender.ip()) == Some(&(true, false));
            let usable = match check {
                ClockCheck::Passed => true,
                ClockCheck::Failed => false,
                ClockCheck::TooShort => vouched,
            };
            if !usable {
                return;
            }
            let sender = sender.to_string();
            let spans = busy.get(&(name, sender.as_str()));
            for (at, delay) in delays {
                if spans.is_some_and(|s| s.iter().any(|&(a, b)| (a..=b).contains(&at))) {
                    continue;
                }
                out.push((at - delay, at), spill);
            }
        };
        for d in &self.retired.delays {
            keep(&d.name, d.sender, d.check, &mut d.delays.iter().copied());
        }
        for (name, sender, check, track) in &live {
            keep(name, *sender, *check, &mut track.delays(&self.spill));
        }
        for (host, d) in &self.retired.host_delays {
            let mut lists = vec![&d.passed];
            if hosts.get(host) == Some(&(true, false)) {
                lists.push(&d.short);
            }
            for (at, delay) in lists.into_iter().flat_map(|l| l.iter(spill)) {
                out.push((at - delay, at), spill);
            }
        }
        out.into_sorted(spill)
    }
}

/// A bystander's delay as [`Analyzer::bystander_delays`] gives it, as the `queue_delay`
/// series stores it: intended and started when it was sent, ended when it arrived.
pub fn queue_delay_sample((sent, arrived): (i64, i64)) -> tailhunt_model::Sample {
    tailhunt_model::Sample::new(sent, sent, arrived, tailhunt_model::Outcome::Ok)
}
