//! The lab's test networks: hosts in network namespaces, veth links between them, and a
//! userspace wide-area link emulator for the round-trip times this kernel's missing `netem`
//! cannot give.
//!
//! # Brief overview
//!
//! - [`netns`]: [`netns::Netns`] handles that run commands inside a namespace and delete it on
//!   drop (also when a test panics), and [`netns::veth`] links with offloads off.
//! - [`link`]: [`link::EmulatedLink`], a TUN delay/rate/queue/loss emulator between two
//!   namespaces, and [`link::measure`], the round-trip and bulk probes that check it.
//!
//! This crate is infrastructure at the bottom of the workspace: the lab's scenarios, the tests
//! and the benchmarks build their networks with it; it knows nothing of tailhunt's sources.
#![deny(missing_docs)]

pub mod link;
pub mod netns;
