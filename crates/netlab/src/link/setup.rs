//! Creating the TUN devices and wiring them into the namespaces.
//!
//! In: a namespace name and the two ends' addresses. Out: a [`Device`] whose descriptor the
//! pump threads share. A device is created in the caller's namespace, then moved with
//! `ip link set DEV netns NS` (moving clears addresses, so they are added afterwards), given
//! its address, a host route to the other end, and brought up. IPv6 is turned off on it so
//! router solicitations do not cross the emulated link.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tun_rs::{DeviceBuilder, SyncDevice};

use super::{LinkError, MTU_BYTES};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A TUN device; the interface disappears when the last clone of its descriptor closes.
pub(crate) struct Device {
    name: String,
    fd: Arc<SyncDevice>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("name", &self.name).finish()
    }
}

impl Device {
    /// Creates `tl<pid>-<n><role>` in the caller's namespace, down, without addresses.
    pub(crate) fn create(role: char) -> Result<Device, LinkError> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        // Interface names hold at most 15 bytes: 2 + 7 (pid) + 1 + 4 + 1.
        let name = format!("tl{}-{}{role}", std::process::id() % 10_000_000, n % 10_000);
        let tun = |source| LinkError::Tun {
            name: name.clone(),
            source,
        };
        let dev = DeviceBuilder::new()
            .name(name.clone())
            .mtu(MTU_BYTES as u16)
            .enable(false)
            .build_sync()
            .map_err(tun)?;
        dev.set_nonblocking(true).map_err(tun)?;
        Ok(Device {
            name,
            fd: Arc::new(dev),
        })
    }

    /// Moves the device into `ns`, gives it `addr/prefix`, routes `peer` through it, and
    /// brings it up.
    pub(crate) fn attach(
        &self,
        ns: &str,
        addr: Ipv4Addr,
        prefix: u8,
        peer: Ipv4Addr,
    ) -> Result<(), LinkError> {
        let dev = self.name.as_str();
        ip(&["link", "set", dev, "netns", ns])?;
        // Best effort: a namespace without IPv6 has no such knob, which is fine.
        let knob = format!("net.ipv6.conf.{dev}.disable_ipv6=1");
        let _ = Command::new("ip")
            .args(["netns", "exec", ns, "sysctl", "-qw", &knob])
            .output();
        let cidr = format!("{addr}/{prefix}");
        ip(&["-n", ns, "addr", "add", &cidr, "dev", dev])?;
        ip(&["-n", ns, "link", "set", dev, "up"])?;
        let host = format!("{peer}/32");
        ip(&["-n", ns, "route", "replace", &host, "dev", dev])?;
        Ok(())
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn fd(&self) -> Arc<SyncDevice> {
        self.fd.clone()
    }
}

/// Splits `198.18.10.1/30` into address and prefix length.
pub(crate) fn parse_cidr(cidr: &str) -> Result<(Ipv4Addr, u8), LinkError> {
    let bad = |reason: &str| LinkError::Address {
        cidr: cidr.to_string(),
        reason: reason.to_string(),
    };
    let (addr, prefix) = cidr.split_once('/').ok_or_else(|| bad("no /PREFIX"))?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| bad("not an IPv4 address"))?;
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= 32)
        .ok_or_else(|| bad("prefix must be 0..32"))?;
    Ok((addr, prefix))
}

fn ip(args: &[&str]) -> Result<(), LinkError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(LinkError::Spawn)?;
    if !out.status.success() {
        return Err(LinkError::Command {
            command: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parsing_names_the_problem() {
        assert_eq!(
            parse_cidr("198.18.10.1/30").unwrap(),
            ("198.18.10.1".parse().unwrap(), 30)
        );
        for (bad, why) in [
            ("198.18.10.1", "no /PREFIX"),
            ("198.18.10/30", "not an IPv4"),
            ("198.18.10.1/33", "prefix must be"),
        ] {
            let e = parse_cidr(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains(why), "{e}");
        }
    }
}
