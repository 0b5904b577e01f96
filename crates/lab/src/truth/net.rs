//! The cases' networks: two hosts either side of a switch namespace whose egress queues are the
//! bottlenecks, so a capture can sit on either side of a queue.
//!
//! In: roles and a subnet number. Out: a [`Dumbbell`] (namespaces deleted on drop, which takes
//! their veths and qdiscs with them).
//!
//! ```text
//!  a 198.18.N.2 ──veth── 198.18.N.1 [sw] 198.18.N+1.1 ──veth── 198.18.N+1.2 b
//!                     tbf toward a ┘        └ tbf toward b
//! ```

use std::time::Duration;

use serde_json::{json, Value};

use super::TruthError;
use crate::scenario::procs::qdisc_counts;
use tailhunt_netlab::netns::{veth, Netns};

/// Two hosts and the switch between them.
pub(crate) struct Dumbbell {
    pub(crate) a: Netns,
    pub(crate) sw: Netns,
    pub(crate) b: Netns,
    /// `a`'s interface.
    pub(crate) a_if: String,
    /// `b`'s interface.
    pub(crate) b_if: String,
    /// The switch's interface toward `a` (its egress queue holds traffic to `a`).
    pub(crate) sw_a: String,
    /// The switch's interface toward `b`.
    pub(crate) sw_b: String,
    /// `a`'s address.
    pub(crate) a_addr: String,
    /// `b`'s address.
    pub(crate) b_addr: String,
}

impl Dumbbell {
    /// Builds `a` on 198.18.`net`.0/24 and `b` on 198.18.`net+1`.0/24, routed through `sw`.
    pub(crate) fn new(a_role: &str, b_role: &str, net: u8) -> Result<Dumbbell, TruthError> {
        let a = Netns::new(a_role)?;
        let sw = Netns::new("sw")?;
        let b = Netns::new(b_role)?;
        let (a_addr, b_addr) = (format!("198.18.{net}.2"), format!("198.18.{}.2", net + 1));
        let (sa, sb) = (format!("198.18.{net}.1"), format!("198.18.{}.1", net + 1));
        let (ea, swa) = veth(&a, &format!("{a_addr}/24"), &sw, &format!("{sa}/24"))?;
        let (eb, swb) = veth(&b, &format!("{b_addr}/24"), &sw, &format!("{sb}/24"))?;
        sw.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        a.run(&["ip", "route", "add", "default", "via", &sa])?;
        b.run(&["ip", "route", "add", "default", "via", &sb])?;
        Ok(Dumbbell {
            a,
            sw,
            b,
            a_if: ea.iface,
            b_if: eb.iface,
            sw_a: swa.iface,
            sw_b: swb.iface,
            a_addr,
            b_addr,
        })
    }

    /// Shapes the switch's egress toward `a` (traffic from `b` to `a`).
    pub(crate) fn shape_toward_a(&self, rate_bps: u64, queue: Duration) -> Result<(), TruthError> {
        tbf(&self.sw, &self.sw_a, rate_bps, queue)
    }

    /// Shapes the switch's egress toward `b` (traffic from `a` to `b`).
    pub(crate) fn shape_toward_b(&self, rate_bps: u64, queue: Duration) -> Result<(), TruthError> {
        tbf(&self.sw, &self.sw_b, rate_bps, queue)
    }

    /// What the switch's qdiscs sent and dropped: `{"toward_a": .., "toward_b": ..}`.
    pub(crate) fn queue_counts(&self) -> Value {
        let read = |iface: &str| qdisc_counts(&self.sw, iface).unwrap_or(Value::Null);
        json!({"toward_a": read(&self.sw_a), "toward_b": read(&self.sw_b)})
    }
}

/// The tbf parameters for `rate_bps` with `queue` worth of backlog: a bucket of 50 µs at the
/// rate (at least 4 KB, so 1 ms bins stay near the rate; the lab's microburst scenario measured
/// ~180% peaks with a 16 KB bucket at 100 Mbit/s), and a queue deep enough that bursts wait
/// rather than drop.
pub(crate) fn tbf_args(rate_bps: u64, queue: Duration) -> Vec<String> {
    let bucket = (rate_bps / 8 / 20_000).max(4096);
    vec![
        "rate".into(),
        format!("{rate_bps}bit"),
        "burst".into(),
        bucket.to_string(),
        "latency".into(),
        format!("{}ms", queue.as_millis()),
    ]
}

/// Puts tbf on `iface` in `ns`.
pub(crate) fn tbf(
    ns: &Netns,
    iface: &str,
    rate_bps: u64,
    queue: Duration,
) -> Result<(), TruthError> {
    let args = tbf_args(rate_bps, queue);
    let mut argv = vec!["tc", "qdisc", "add", "dev", iface, "root", "tbf"];
    argv.extend(args.iter().map(String::as_str));
    ns.run(&argv)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_is_fifty_microseconds_of_the_rate_and_at_least_4k() {
        let a = tbf_args(100_000_000, Duration::from_millis(200));
        assert_eq!(
            a,
            ["rate", "100000000bit", "burst", "4096", "latency", "200ms"]
        );
        let a = tbf_args(10_000_000_000, Duration::from_millis(50));
        assert_eq!(a[3], "62500");
    }
}
