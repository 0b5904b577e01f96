//! The link model, without devices or clocks: given a packet's arrival time and size, decide
//! whether it is lost, dropped by the queue, or when it leaves the far end.
//!
//! In: arrival times in nanoseconds (any monotonic origin) and packet sizes in bytes. Out: a
//! [`Verdict`] per packet. Release times never decrease, so the delay line behind it is a FIFO.
//!
//! The rate limiter is a virtual-time drop-tail queue: the link is busy until `link_free_ns`;
//! the backlog at time `t` is the bytes that the link has yet to send,
//! `(link_free_ns - t) * rate / 8`. A packet that would push the backlog over the queue size is
//! dropped; otherwise it starts when the link is free and takes `8 * bytes / rate` to send.
//! Then it travels for the propagation delay. This is the same model as Mahimahi's
//! constant-rate link and `tbf` with a byte limit (Netravali et al., USENIX ATC 2015).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::LinkConfig;

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Leaves the far end at this time (ns).
    Deliver(u64),
    /// The drop-tail queue was full.
    DropQueue,
    /// Lost by the random loss.
    DropLoss,
}

/// One direction's link state.
#[derive(Debug)]
pub(crate) struct Shaper {
    cfg: LinkConfig,
    rng: StdRng,
    link_free_ns: u64,
    last_release_ns: u64,
}

impl Shaper {
    pub(crate) fn new(cfg: LinkConfig) -> Shaper {
        Shaper {
            cfg,
            rng: StdRng::seed_from_u64(cfg.seed),
            link_free_ns: 0,
            last_release_ns: 0,
        }
    }

    /// Decides the fate of a packet of `bytes` arriving at `now_ns`.
    pub(crate) fn offer(&mut self, now_ns: u64, bytes: u64) -> Verdict {
        // Loss is drawn first (on arrival, as netem does), so a lost packet takes no queue space.
        if self.cfg.loss > 0.0 && self.rng.random::<f64>() < self.cfg.loss {
            return Verdict::DropLoss;
        }
        let departed_ns = match self.cfg.rate_bps {
            None => now_ns,
            Some(rate) => {
                let backlog = u128::from(self.link_free_ns.saturating_sub(now_ns))
                    * u128::from(rate)
                    / 8_000_000_000;
                if backlog + u128::from(bytes) > u128::from(self.cfg.queue_bytes) {
                    return Verdict::DropQueue;
                }
                let send_ns = (u128::from(bytes) * 8_000_000_000).div_ceil(u128::from(rate));
                let start = self.link_free_ns.max(now_ns);
                self.link_free_ns = start + send_ns as u64;
                self.link_free_ns
            }
        };
        let delay = self.draw_delay();
        // FIFO path: no packet leaves before the one in front of it.
        let release = (departed_ns + delay).max(self.last_release_ns);
        self.last_release_ns = release;
        Verdict::Deliver(release)
    }

    fn draw_delay(&mut self) -> u64 {
        let (d, j) = (self.cfg.delay_ns, self.cfg.jitter_ns);
        if j == 0 {
            return d;
        }
        let offset = self.rng.random_range(0..=2 * j);
        (d + offset).saturating_sub(j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn fixed_delay_only() {
        let mut s = Shaper::new(LinkConfig::delay_ms(40));
        assert_eq!(s.offer(5 * MS, 100), Verdict::Deliver(45 * MS));
        assert_eq!(s.offer(6 * MS, 1500), Verdict::Deliver(46 * MS));
    }

    #[test]
    fn rate_serialises_and_queue_drops_the_tail() {
        // 8 Mbit/s: 1000 bytes take 1 ms. Queue holds 3000 bytes.
        let cfg = LinkConfig {
            rate_bps: Some(8_000_000),
            queue_bytes: 3000,
            ..LinkConfig::delay_ms(10)
        };
        let mut s = Shaper::new(cfg);
        let got: Vec<_> = (0..5).map(|_| s.offer(0, 1000)).collect();
        assert_eq!(
            got,
            vec![
                Verdict::Deliver(11 * MS),
                Verdict::Deliver(12 * MS),
                Verdict::Deliver(13 * MS),
                Verdict::DropQueue,
                Verdict::DropQueue,
            ]
        );
        // After 1.5 ms, 1500 bytes are still queued: room for one more.
        assert_eq!(s.offer(1_500_000, 1000), Verdict::Deliver(14 * MS));
        assert_eq!(s.offer(1_500_000, 1000), Verdict::DropQueue);
    }

    #[test]
    fn jitter_stays_in_range_and_never_reorders() {
        let cfg = LinkConfig {
            jitter_ns: 2 * MS,
            ..LinkConfig::delay_ms(10)
        };
        // Packets 5 ms apart cannot overtake each other: the draws show through unchanged.
        let mut s = Shaper::new(cfg);
        let mut spread = (u64::MAX, 0);
        for i in 0..10_000u64 {
            let now = i * 5 * MS;
            let Verdict::Deliver(r) = s.offer(now, 100) else {
                panic!()
            };
            assert!(r >= now + 8 * MS && r <= now + 12 * MS, "{}", r - now);
            spread = (spread.0.min(r - now), spread.1.max(r - now));
        }
        assert!(spread.0 < 8_100_000 && spread.1 > 11_900_000, "{spread:?}");
        // Packets 100 us apart would: each leaves no earlier than the one before it.
        let mut s = Shaper::new(cfg);
        let mut last = 0;
        for i in 0..10_000u64 {
            let now = i * 100_000;
            let Verdict::Deliver(r) = s.offer(now, 100) else {
                panic!()
            };
            assert!(r >= last, "reordered");
            assert!(r >= now + 8 * MS && r <= now + 12 * MS, "{}", r - now);
            last = r;
        }
    }

    #[test]
    fn loss_is_seeded_and_near_its_probability() {
        let cfg = LinkConfig {
            loss: 0.1,
            seed: 7,
            ..LinkConfig::default()
        };
        let run = || {
            let mut s = Shaper::new(cfg);
            (0..100_000)
                .map(|i| s.offer(i, 100) == Verdict::DropLoss)
                .collect::<Vec<_>>()
        };
        let (x, y) = (run(), run());
        assert_eq!(x, y);
        let lost = x.iter().filter(|&&l| l).count();
        assert!((9_500..10_500).contains(&lost), "{lost}");
    }
}
