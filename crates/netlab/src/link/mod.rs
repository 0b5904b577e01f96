//! A userspace wide-area link emulator on TUN devices, in the spirit of Mahimahi.
//!
//! The kernel here has no `netem` qdisc, so delay, rate and loss are applied by this process.
//!
//! In: two network namespaces (`a`, `b`), an address for each end (`198.18.10.1/30`), and one
//! [`LinkConfig`] per direction. Out: an [`EmulatedLink`] that has put one TUN device into each
//! namespace (point-to-point, with a route to the other end) and runs one thread per direction:
//!
//! ```text
//!  ns a: tun ──read──> loss ──> drop-tail queue at rate ──> hold for delay (+ jitter) ──write──> tun :ns b
//!  ns a: tun <─write── hold for delay <── queue at rate <── loss <──────────────────────read── tun :ns b
//! ```
//!
//! The threads stay in the caller's namespace: a TUN file descriptor keeps working after its
//! device is moved to another namespace. They ask for real-time scheduling (SCHED_FIFO 20, via
//! `chrt`) so that other work on a small machine does not delay packets; see `pump.rs`. If a
//! namespace is deleted under the link, the direction reading from it stops
//! ([`DirectionStats::input_gone`]). [`EmulatedLink::stats`] counts packets and bytes per
//! direction (forwarded, dropped by the queue, dropped by loss) and how late the emulator
//! released packets relative to their due time (its own timing error). Dropping the link stops
//! the threads and closes the TUN devices, which removes them; the namespaces belong to the
//! caller and stay.
//!
//! Units: delays in nanoseconds, rates in bits per second of IP packet bytes (no link-layer
//! framing), queue sizes in bytes of IP packets.
//!
//! ```no_run
//! use tailhunt_netlab::link::{EmulatedLink, LinkConfig};
//! use tailhunt_netlab::netns::Netns;
//! let (a, b) = (Netns::new("client")?, Netns::new("server")?);
//! // 80 ms round trip, 100 Mbit/s each way with a 1 MB drop-tail queue.
//! let cfg = LinkConfig { rate_bps: Some(100_000_000), ..LinkConfig::delay_ms(40) };
//! let link = EmulatedLink::start(&a, "198.18.10.1/30", &b, "198.18.10.2/30", cfg, cfg)?;
//! a.run(&["ping", "-c", "1", "198.18.10.2"])?;
//! println!("{:?}", link.stats());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
pub mod measure;
mod pump;
mod setup;
mod shaper;
mod stats;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub use config::{LinkConfig, MAX_DELAY_NS, MAX_RATE_BPS, MTU_BYTES};
pub use pump::raise_to_realtime;
pub use stats::{DirectionStats, LinkStats};

use crate::netns::Netns;

/// Errors starting an emulated link. Each names the bad value and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The rate is 0 or more than the emulator can carry.
    #[error("{direction}: rate {rate_bps} bit/s is impossible: give a rate from 1 bit/s up to {max} bit/s (1 gbit), or no rate for an unlimited link", max = MAX_RATE_BPS)]
    Rate {
        /// `forward` or `reverse`.
        direction: &'static str,
        /// The bad rate.
        rate_bps: u64,
    },
    /// The queue cannot hold one full-sized packet.
    #[error("{direction}: queue of {queue_bytes} bytes cannot hold one {mtu}-byte packet: give a queue of at least {mtu} bytes (e.g. 1MB)", mtu = MTU_BYTES)]
    Queue {
        /// `forward` or `reverse`.
        direction: &'static str,
        /// The bad size.
        queue_bytes: u64,
    },
    /// The loss probability is not in 0..=1.
    #[error("{direction}: loss probability {loss} is outside 0..1: give a fraction such as 0.001 (0.1%)")]
    Loss {
        /// `forward` or `reverse`.
        direction: &'static str,
        /// The bad probability.
        loss: f64,
    },
    /// The delay or jitter is longer than the emulator holds packets.
    #[error("{direction}: {what} of {value_ns} ns is longer than the {max} ns (60 s) the emulator holds packets: give a shorter one", max = MAX_DELAY_NS)]
    Delay {
        /// `forward` or `reverse`.
        direction: &'static str,
        /// `delay` or `jitter`.
        what: &'static str,
        /// The bad value.
        value_ns: u64,
    },
    /// An address is not `IPV4/PREFIX`.
    #[error("address '{cidr}' is not IPV4/PREFIX ({reason}): write it like 198.18.10.1/30")]
    Address {
        /// The bad text.
        cidr: String,
        /// What is wrong.
        reason: String,
    },
    /// Not root.
    #[error(
        "the link emulator needs root (CAP_NET_ADMIN for TUN devices and namespaces): run as root"
    )]
    NotPermitted,
    /// A TUN device could not be created or configured.
    #[error("cannot create TUN device '{name}': {source} (needs /dev/net/tun: `modprobe tun`, and root)")]
    Tun {
        /// The device name.
        name: String,
        /// The cause.
        source: std::io::Error,
    },
    /// An `ip` command failed while wiring the devices into the namespaces.
    #[error("`{command}` failed: {stderr} (does the namespace exist? `ip netns list`)")]
    Command {
        /// The command line.
        command: String,
        /// What it printed.
        stderr: String,
    },
    /// `ip` could not be started.
    #[error("cannot run `ip`: {0} (install iproute2: scripts/setup.sh)")]
    Spawn(std::io::Error),
    /// A worker thread could not be started.
    #[error("cannot start the emulator thread: {0}")]
    Thread(std::io::Error),
}

/// A running emulated link between two namespaces. Dropping it stops the threads and removes
/// both TUN devices.
#[derive(Debug)]
pub struct EmulatedLink {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    counters: [Arc<stats::Counters>; 2],
    devices: Vec<setup::Device>,
    a_addr: Ipv4Addr,
    b_addr: Ipv4Addr,
}

impl EmulatedLink {
    /// Joins namespaces `a` and `b`: `a_cidr`/`b_cidr` are the addresses of the two ends
    /// (`198.18.10.1/30`); `forward` shapes packets from `a` to `b`, `reverse` from `b` to `a`.
    /// After it returns, a process in `a` reaches `b`'s address through the emulator.
    pub fn start(
        a: &Netns,
        a_cidr: &str,
        b: &Netns,
        b_cidr: &str,
        forward: LinkConfig,
        reverse: LinkConfig,
    ) -> Result<EmulatedLink, LinkError> {
        Self::start_in(a.name(), a_cidr, b.name(), b_cidr, forward, reverse)
    }

    /// As [`EmulatedLink::start`], for namespaces given by name (`ip netns list`), such as ones
    /// the user created; they are left as they were found, apart from the TUN device while the
    /// link runs.
    pub fn start_in(
        a_ns: &str,
        a_cidr: &str,
        b_ns: &str,
        b_cidr: &str,
        forward: LinkConfig,
        reverse: LinkConfig,
    ) -> Result<EmulatedLink, LinkError> {
        forward.validate("forward")?;
        reverse.validate("reverse")?;
        let (a_addr, a_prefix) = setup::parse_cidr(a_cidr)?;
        let (b_addr, b_prefix) = setup::parse_cidr(b_cidr)?;
        if a_addr == b_addr {
            return Err(LinkError::Address {
                cidr: b_cidr.to_string(),
                reason: "both ends have the same address".into(),
            });
        }
        if !crate::netns::is_root() {
            return Err(LinkError::NotPermitted);
        }
        let dev_a = setup::Device::create('a')?;
        dev_a.attach(a_ns, a_addr, a_prefix, b_addr)?;
        let dev_b = setup::Device::create('b')?;
        dev_b.attach(b_ns, b_addr, b_prefix, a_addr)?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = [
            Arc::new(stats::Counters::default()),
            Arc::new(stats::Counters::default()),
        ];
        let mut link = EmulatedLink {
            stop: stop.clone(),
            threads: Vec::new(),
            counters: counters.clone(),
            devices: Vec::new(),
            a_addr,
            b_addr,
        };
        let plan = [
            ("forward", &dev_a, &dev_b, forward, &counters[0]),
            ("reverse", &dev_b, &dev_a, reverse, &counters[1]),
        ];
        for (name, from, to, cfg, c) in plan {
            let pump = pump::Pump::new(from.fd(), to.fd(), cfg, c.clone(), stop.clone());
            let handle = std::thread::Builder::new()
                .name(format!("link-{name}"))
                .spawn(move || pump.run())
                .map_err(LinkError::Thread)?;
            link.threads.push(handle);
        }
        link.devices = vec![dev_a, dev_b];
        Ok(link)
    }

    /// Packets and bytes forwarded and dropped so far, per direction, and the emulator's own
    /// timing error.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
            forward: self.counters[0].snapshot(),
            reverse: self.counters[1].snapshot(),
        }
    }

    /// The address of end `a` (without prefix).
    pub fn a_addr(&self) -> Ipv4Addr {
        self.a_addr
    }

    /// The address of end `b` (without prefix).
    pub fn b_addr(&self) -> Ipv4Addr {
        self.b_addr
    }

    /// The TUN device names: (in `a`, in `b`).
    pub fn device_names(&self) -> (String, String) {
        (
            self.devices[0].name().to_string(),
            self.devices[1].name().to_string(),
        )
    }
}

impl Drop for EmulatedLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Closing the last descriptor of a non-persistent TUN device unregisters it, in
        // whatever namespace it lives now.
        self.devices.clear();
    }
}
