//! What limited a sender, moment by moment.
//!
//! Between two packets of a connection, each side that has sent data is in one state, judged
//! from what the capture knows at the first packet: the window the peer advertised, the bytes
//! in flight, recent retransmissions and whether the last segment was full-sized. The time
//! between packets is added to that state; the fractions say where a transfer's time went.
//!
//! | state | when |
//! |---|---|
//! | zero-window | the peer advertises a window of 0 |
//! | receive-window-limited | the room left in the peer's window (as the sender saw it) is less than one full segment, or than half the window |
//! | congestion-or-loss-limited | data in flight, room in the window, and a retransmission within the last two RTTs or full-sized segments (the congestion window holds the sender back) |
//! | application-limited | data in flight below the window in small segments, or nothing in flight for a short while: the application has nothing to send |
//! | idle | nothing in flight for more than 10 RTTs (at least 10 ms) |

use serde::{Deserialize, Serialize};
use tailhunt_model::evidence::capture::StateFractions;

/// A sender's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderState {
    /// The receiver's window is full.
    ReceiveWindowLimited,
    /// The receiver advertises a zero window.
    ZeroWindow,
    /// The congestion window or loss recovery holds the sender back.
    CongestionOrLoss,
    /// The application gives the sender nothing (more) to send.
    ApplicationLimited,
    /// Nothing happening.
    Idle,
}

/// Time per state, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateTimes {
    /// Receive-window-limited.
    pub receive_window_limited_ns: i64,
    /// Zero window.
    pub zero_window_ns: i64,
    /// Congestion or loss.
    pub congestion_or_loss_ns: i64,
    /// Application-limited.
    pub application_limited_ns: i64,
    /// Idle.
    pub idle_ns: i64,
}

impl StateTimes {
    /// Adds `dt` to `state`.
    pub fn add(&mut self, state: SenderState, dt: i64) {
        let slot = match state {
            SenderState::ReceiveWindowLimited => &mut self.receive_window_limited_ns,
            SenderState::ZeroWindow => &mut self.zero_window_ns,
            SenderState::CongestionOrLoss => &mut self.congestion_or_loss_ns,
            SenderState::ApplicationLimited => &mut self.application_limited_ns,
            SenderState::Idle => &mut self.idle_ns,
        };
        *slot += dt;
    }

    /// All time accounted.
    pub fn total_ns(&self) -> i64 {
        self.receive_window_limited_ns
            + self.zero_window_ns
            + self.congestion_or_loss_ns
            + self.application_limited_ns
            + self.idle_ns
    }

    /// Time not idle: the transfer's busy time.
    pub fn busy_ns(&self) -> i64 {
        self.total_ns() - self.idle_ns
    }

    /// Share of busy time receive-window-limited.
    pub fn rwnd_share(&self) -> f64 {
        share(self.receive_window_limited_ns, self.busy_ns())
    }

    /// Fractions of all time, keyed by state name.
    pub fn fractions(&self) -> StateFractions {
        let t = self.total_ns();
        StateFractions {
            receive_window_limited: share(self.receive_window_limited_ns, t),
            zero_window: share(self.zero_window_ns, t),
            congestion_or_loss_limited: share(self.congestion_or_loss_ns, t),
            application_limited: share(self.application_limited_ns, t),
            idle: share(self.idle_ns, t),
        }
    }
}

fn share(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}
