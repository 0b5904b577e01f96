//! Every capture detector at once: what `tailhunt pcap` and `tailhunt diagnose` run on a
//! capture's report and its request latencies.

use tailhunt_model::evidence::capture::CaptureReport;
use tailhunt_model::Finding;

use crate::channels::Requests;
use crate::microburst::microburst;
use crate::nagle_stall::nagle_stall;
use crate::saturated::link_saturated;
use crate::timeout::application_timeout;
use crate::window::{receive_window_limited, WindowEvidence};

/// Detectors run on captures.
pub const DETECTORS: [&str; 5] = [
    crate::microburst::DETECTOR,
    crate::saturated::DETECTOR,
    crate::nagle_stall::DETECTOR,
    crate::window::WINDOW_DETECTOR,
    crate::timeout::TIMEOUT_DETECTOR,
];

/// Runs the capture detectors.
pub fn diagnose_capture(report: &CaptureReport, requests: &[Requests<'_>]) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(microburst(report, requests));
    out.extend(link_saturated(report, requests));
    out.extend(nagle_stall(&report.flows, &report.stalls));
    let windows: Vec<WindowEvidence> = report
        .flows
        .iter()
        .filter_map(WindowEvidence::from_flow)
        .collect();
    out.extend(receive_window_limited(&windows));
    out.extend(application_timeout(&report.flows));
    out
}
