//! Naming connections: endpoints and direction-free flow keys.

use std::net::SocketAddr;

use tailhunt_model::evidence::capture::{FlowName, Proto};

/// A connection regardless of direction: endpoint `a` is the smaller of the two, so both
/// directions of a connection map to the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Protocol.
    pub proto: Proto,
    /// The smaller endpoint.
    pub a: SocketAddr,
    /// The larger endpoint.
    pub b: SocketAddr,
}

impl FlowKey {
    /// The key of a packet from `src` to `dst`, and the side (0 = `a`, 1 = `b`) that sent it.
    pub fn of(proto: Proto, src: SocketAddr, dst: SocketAddr) -> (FlowKey, usize) {
        if (src.ip(), src.port()) <= (dst.ip(), dst.port()) {
            (
                FlowKey {
                    proto,
                    a: src,
                    b: dst,
                },
                0,
            )
        } else {
            (
                FlowKey {
                    proto,
                    a: dst,
                    b: src,
                },
                1,
            )
        }
    }

    /// The connection's name, `client` (0 = `a`, 1 = `b`) being the side that opened it.
    pub fn name(&self, client: usize) -> FlowName {
        FlowName {
            proto: self.proto,
            client: endpoint_text(self.endpoint(client)),
            server: endpoint_text(self.endpoint(1 - client)),
        }
    }

    /// Endpoint of `side` (0 = `a`, 1 = `b`).
    pub fn endpoint(&self, side: usize) -> SocketAddr {
        if side == 0 {
            self.a
        } else {
            self.b
        }
    }
}

/// `addr` as its `Display` writes it (`10.0.0.1:80`, `[::1]:80`). An IPv4 endpoint is written
/// with [`itoa`] rather than the formatting machinery: every connection's summary names its
/// two endpoints, and naming them through `Display` took 2.1% of the samples of `perf record`
/// of the command on bench/pcap.sh's 100,000-connection capture, 0.4% this way (2026-12-01).
pub fn endpoint_text(addr: SocketAddr) -> String {
    let SocketAddr::V4(v4) = addr else {
        return addr.to_string();
    };
    let mut out = String::with_capacity(21);
    let mut digits = itoa::Buffer::new();
    for (i, octet) in v4.ip().octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        out.push_str(digits.format(octet));
    }
    out.push(':');
    out.push_str(digits.format(v4.port()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_text_is_display() {
        for addr in [
            "0.0.0.0:0",
            "10.1.0.1:80",
            "255.255.255.255:65535",
            "192.168.100.7:1024",
            "[::1]:443",
            "[fe80::1%2]:8080",
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            assert_eq!(endpoint_text(addr), addr.to_string());
        }
    }
}
