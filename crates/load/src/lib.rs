//! Open-loop load generation and the reference servers it is measured against.
//!
//! # Brief overview
//!
//! - [`target`] parses what to load (`tcp://`, `udp://`, `http://`, `redis://`, `memcached://`).
//! - [`schedule`] decides when each request is due (fixed rate or Poisson), independently of
//!   responses: latency is measured from that intended time, so a stalled server shows up as
//!   latency, never as fewer samples (no coordinated omission).
//! - [`proto`] holds one codec per stream protocol; [`engine`] owns sockets, time and the epoll
//!   loop, and turns every scheduled request into a [`Sample`](tailhunt_model::Sample)
//!   (intended, actual send, end, outcome).
//! - [`sweep`] plans steps (rates, order, repeats, warm-up), judges them and samples host
//!   health around them; [`record`] runs a sweep into a run's series and summarises each step;
//!   [`limits`] bounds every flag that sizes memory before anything runs.
//! - [`breakdown`] splits a request's time using the reference server's timestamps.
//! - [`serve`] holds the reference servers; [`wire`] their formats.
#![deny(missing_docs)]

pub mod breakdown;
pub mod clock;
pub mod engine;
pub mod health;
pub mod limits;
pub mod proto;
pub mod record;
pub mod schedule;
pub mod serve;
pub mod sweep;
pub mod tally;
pub mod target;
pub mod tstamp;
pub mod wire;
