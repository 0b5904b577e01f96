//! One direction's link parameters and their validation.

use super::LinkError;

/// MTU of the emulator's TUN devices, in bytes; the smallest queue must hold one such packet.
pub const MTU_BYTES: u64 = 1500;

/// The highest rate accepted, in bit/s. One thread per direction reads and writes each packet
/// with two system calls; bench/link.sh measures what it carries on this machine, and above
/// this the emulator, not the configured rate, would limit the link.
pub const MAX_RATE_BPS: u64 = 1_000_000_000;

/// The longest delay (and jitter) accepted, in nanoseconds: 60 s.
pub const MAX_DELAY_NS: u64 = 60_000_000_000;

/// How one direction of the link treats packets. Units are in the field names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay added to every packet, in nanoseconds.
    pub delay_ns: u64,
    /// Jitter, in nanoseconds: each packet's delay is drawn uniformly from
    /// `delay_ns ± jitter_ns` (never below zero). Packets are never reordered: a packet whose
    /// draw would overtake the one before it leaves right after it, as on a real FIFO path.
    /// So when packets come closer together than `2 * jitter_ns`, delays bunch towards the
    /// top of the range (at 1 ms spacing, 20 ± 5 ms gives a median near 23 ms one way).
    pub jitter_ns: u64,
    /// Link rate in bits per second of IP packet bytes (no framing overhead); `None` for no
    /// rate limit (packets are only delayed).
    pub rate_bps: Option<u64>,
    /// Drop-tail queue in front of the rate limiter, in bytes of IP packets (a packet that
    /// would make the backlog exceed it is dropped). At least [`MTU_BYTES`]; unused without a
    /// rate.
    pub queue_bytes: u64,
    /// Probability that a packet is dropped on arrival, independently, in 0..=1.
    pub loss: f64,
    /// Seed for the loss and jitter draws: the same seed drops the same packets of the same
    /// sequence.
    pub seed: u64,
}

impl Default for LinkConfig {
    /// No delay, no rate limit, a 1 MB queue, no loss, seed 1.
    fn default() -> Self {
        LinkConfig {
            delay_ns: 0,
            jitter_ns: 0,
            rate_bps: None,
            queue_bytes: 1_000_000,
            loss: 0.0,
            seed: 1,
        }
    }
}

impl LinkConfig {
    /// A link that only delays by `ms` milliseconds one way.
    pub fn delay_ms(ms: u64) -> LinkConfig {
        LinkConfig {
            delay_ns: ms * 1_000_000,
            ..LinkConfig::default()
        }
    }

    /// Checks the values; `direction` names the direction in the error.
    pub fn validate(&self, direction: &'static str) -> Result<(), LinkError> {
        if let Some(rate_bps) = self.rate_bps {
            if rate_bps == 0 || rate_bps > MAX_RATE_BPS {
                return Err(LinkError::Rate {
                    direction,
                    rate_bps,
                });
            }
        }
        if self.queue_bytes < MTU_BYTES {
            return Err(LinkError::Queue {
                direction,
                queue_bytes: self.queue_bytes,
            });
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(LinkError::Loss {
                direction,
                loss: self.loss,
            });
        }
        for (what, value_ns) in [("delay", self.delay_ns), ("jitter", self.jitter_ns)] {
            if value_ns > MAX_DELAY_NS {
                return Err(LinkError::Delay {
                    direction,
                    what,
                    value_ns,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_named_in_the_error() {
        let ok = LinkConfig::delay_ms(40);
        assert!(ok.validate("forward").is_ok());
        let cases = [
            (
                LinkConfig {
                    rate_bps: Some(0),
                    ..ok
                },
                "rate 0 bit/s",
            ),
            (
                LinkConfig {
                    rate_bps: Some(MAX_RATE_BPS + 1),
                    ..ok
                },
                "rate 1000000001 bit/s",
            ),
            (
                LinkConfig {
                    queue_bytes: 1499,
                    ..ok
                },
                "queue of 1499 bytes",
            ),
            (LinkConfig { loss: 1.5, ..ok }, "loss probability 1.5"),
            (LinkConfig { loss: -0.1, ..ok }, "loss probability -0.1"),
            (
                LinkConfig {
                    loss: f64::NAN,
                    ..ok
                },
                "loss probability NaN",
            ),
            (
                LinkConfig {
                    delay_ns: MAX_DELAY_NS + 1,
                    ..ok
                },
                "delay of 60000000001 ns",
            ),
        ];
        for (cfg, want) in cases {
            let e = cfg.validate("reverse").unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
            assert!(e.starts_with("reverse: "), "{e}");
        }
    }
}
