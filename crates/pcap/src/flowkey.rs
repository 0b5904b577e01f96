//! Naming connections: endpoints and direction-free flow keys.

use std::net::SocketAddr;

use tailhunt_model::evidence::capture::Proto;

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

    /// Endpoint of `side` (0 = `a`, 1 = `b`).
    pub fn endpoint(&self, side: usize) -> SocketAddr {
        if side == 0 {
            self.a
        } else {
            self.b
        }
    }
}
