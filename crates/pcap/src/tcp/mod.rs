//! TCP connections: sequence/ACK tracking, RTT, windows, retransmissions, closes, sender
//! states, request/response turns and Nagle stalls.
//!
//! In: decoded TCP segments of one connection, in capture order. Out: [`FlowEvents`] as they
//! happen (RTT samples, exchanges, stalls) and a
//! [`TcpSummary`](tailhunt_model::evidence::capture::TcpSummary) per connection. State per
//! connection is bounded (at most 512 outstanding segments and 1024 TSvals per side are
//! remembered), so memory grows with the number of open connections, not with packets.

pub mod close;
pub mod events;
pub mod flow;
pub mod half;
pub mod points;
pub mod rtt;
pub mod sending;
pub mod seq;
pub mod states;
pub mod summary;
pub mod view;

pub use events::{Exchange, FlowEvents, Leg, RttMethod, RttSample};
pub use flow::{TcpFlow, QUIET_AFTER_CLEAN_CLOSE_NS, QUIET_AFTER_CLOSE_NS};
pub use points::WindowPoints;
pub use sending::WindowPoint;
pub use states::{SenderState, StateTimes};
