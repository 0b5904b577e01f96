//! The bystanders' upstream queueing delays: what a retired connection's TCP timestamps leave
//! behind, and the `queue_delay` samples made of them at the end of the pass.
//!
//! In: each flow direction's [`crate::delay::DelayTrack`] as its connection retires (and the
//! live ones' at the end), the bursts of the report. Out: one sample per direction and bin of
//! the directions that were no burst's source while they waited, whose sender's clock ticks
//! at 1 kHz (or whose host vouches for it), in time order.

use std::collections::BTreeMap;

use tailhunt_model::evidence::capture::CaptureReport;

use super::Analyzer;
use crate::delay::ClockCheck;
use crate::flowkey::FlowKey;
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
            let check = track.clock_check(self.cfg.bin_ns);
            let sender = key.endpoint(side);
            let mark = self.retired.clock_hosts.entry(sender.ip()).or_default();
            mark.0 |= check == ClockCheck::Passed;
            mark.1 |= check == ClockCheck::Failed;
            if check == ClockCheck::Failed {
                continue;
            }
            let delays = track.delays();
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
                    ClockCheck::Passed => host.passed.extend(delays),
                    _ => host.short.extend(delays),
                }
            }
        }
    }

    /// The upstream queueing delay of every packet that made no burst, one sample per flow
    /// direction and bin (its most delayed packet): `intended = start` is when it would have
    /// arrived without waiting, `end` when it did. A direction is left out while it is a
    /// source of a burst (its wait is its own doing) and when its sender's timestamp clock
    /// does not tick at 1 kHz ([`crate::delay`]); samples in time order.
    pub fn bystander_delays(&self, report: &CaptureReport) -> Vec<tailhunt_model::Sample> {
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
        let mut live: Vec<_> = self.delays.iter().collect();
        live.sort_unstable_by_key(|(i, _)| **i);
        let mut live_delays = Vec::new();
        for (i, tracks) in live {
            let f = &self.flows[i];
            for (side, t) in tracks.iter().enumerate() {
                if t.is_empty() {
                    continue;
                }
                live_delays.push(KeptDelays {
                    name: f.name().to_string(),
                    sender: f.key().endpoint(side),
                    check: t.clock_check(bin_ns),
                    delays: t.delays(),
                });
            }
        }
        let checked = || self.retired.delays.iter().chain(&live_delays);
        // A host whose long directions tick at 1 kHz vouches for its short ones.
        let mut hosts = self.retired.clock_hosts.clone();
        for d in checked() {
            let h = hosts.entry(d.sender.ip()).or_default();
            h.0 |= d.check == ClockCheck::Passed;
            h.1 |= d.check == ClockCheck::Failed;
        }
        let mut out = Vec::new();
        for KeptDelays {
            name,
            sender,
            check,
            delays,
        } in checked()
        {
            let vouched = hosts.get(&sender.ip()) == Some(&(true, false));
            let usable = match check {
                ClockCheck::Passed => true,
                ClockCheck::Failed => false,
                ClockCheck::TooShort => vouched,
            };
            if !usable {
                continue;
            }
            let sender = sender.to_string();
            let spans = busy.get(&(name.as_str(), sender.as_str()));
            for &(at, delay) in delays {
                if spans.is_some_and(|s| s.iter().any(|&(a, b)| (a..=b).contains(&at))) {
                    continue;
                }
                let sent = at - delay;
                out.push(tailhunt_model::Sample::new(
                    sent,
                    sent,
                    at,
                    tailhunt_model::Outcome::Ok,
                ));
            }
        }
        let sample = |(at, delay): (i64, i64)| {
            let sent = at - delay;
            tailhunt_model::Sample::new(sent, sent, at, tailhunt_model::Outcome::Ok)
        };
        for (host, d) in &self.retired.host_delays {
            out.extend(d.passed.iter().map(sample));
            if hosts.get(host) == Some(&(true, false)) {
                out.extend(d.short.iter().map(sample));
            }
        }
        out.sort_by_key(|s| (s.intended_ns, s.end_ns));
        out
    }
}
