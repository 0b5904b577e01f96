//! Kernel socket timestamps (`SO_TIMESTAMPING`), without `unsafe`, through `nix`.
//!
//! In: a socket and what to timestamp ([`Want`]). Out: the kernel's receive time of the data a
//! read returned ([`Reader::recv`], [`Reader::recv_from`]) and its transmit times of earlier
//! sends, drained from the socket's error queue ([`Reader::drain_tx`]). Software timestamps are
//! CLOCK_REALTIME ns, so they compare with `clock::real_ns` on the same host; hardware ones are
//! the NIC's clock (PHC) and are only reported, never mixed with the others.
//!
//! Everything is best effort: when the kernel refuses an option or gives no timestamp the
//! result is `None` and the caller falls back to application times
//! (see [`crate::breakdown`]). Hardware timestamps also need the device configured
//! (`SIOCSHWTSTAMP`, e.g. by `ptp4l` or `hwstamp_ctl`, root); loopback and veth have none.
//!
//! # Rules from the kernel (Documentation/networking/timestamping.rst)
//!
//! - `SO_TIMESTAMPING` sets the whole flag set at once, so receive and transmit are enabled
//!   together by one [`enable`].
//! - Generation flags (`RX_SOFTWARE`, `TX_SOFTWARE`, ...) say which timestamps are taken,
//!   reporting flags (`SOFTWARE`, `RAW_HARDWARE`) which are handed to the application.
//! - Transmit timestamps come back on the error queue (`MSG_ERRQUEUE`), one message per send,
//!   with `OPT_ID` numbering them in `ee_data` and `OPT_TSONLY` leaving the payload out (no copy
//!   of the data, and allowed to unprivileged users whatever `net.core.tstamp_allow_data` says).
//!   A datagram socket counts datagrams (the first send after enabling is 0); a TCP socket counts
//!   bytes from the connection's first unacknowledged byte when enabled, and a send's id is the
//!   offset of its **last** byte ([`stream_id`]). TCP needs a connected socket for `OPT_ID`.
//! - A non-empty error queue makes `epoll` report `EPOLLERR` (level-triggered) until drained.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};

use nix::sys::socket::{
    getsockopt, recvmsg, setsockopt, sockopt, AddressFamily, ControlMessageOwned, MsgFlags,
    SockaddrLike, SockaddrStorage, TimestampingFlag,
};
use nix::sys::time::TimeSpec;

/// What to ask the kernel to timestamp.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// Receive timestamps of incoming data.
    pub rx: bool,
    /// Transmit timestamps of sends, with `OPT_ID` numbering (TCP: connected sockets only).
    pub tx: bool,
    /// Also hardware timestamps where the NIC makes them (best effort).
    pub hardware: bool,
}

impl Want {
    /// Everything: receive and transmit, hardware too where the NIC makes it.
    pub const ALL: Want = Want {
        rx: true,
        tx: true,
        hardware: true,
    };
}

/// What the kernel kept after [`enable`] (read back with `getsockopt`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Enabled {
    /// Software receive timestamps are on.
    pub rx: bool,
    /// Software transmit timestamps with ids are on.
    pub tx: bool,
    /// Hardware reporting is on (the device may still make none).
    pub hardware: bool,
}

/// A kernel timestamp of one piece of data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelTime {
    /// Software timestamp, ns on CLOCK_REALTIME; `None` when the kernel gave none.
    pub software_ns: Option<u64>,
    /// Raw hardware timestamp, ns on the NIC's clock; `None` when the NIC made none.
    pub hardware_ns: Option<u64>,
}

/// One transmit timestamp from the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStamp {
    /// The `OPT_ID` of the send: datagrams: its number; TCP: offset of its last byte (mod 2^32).
    pub id: u32,
    /// When the kernel handed it to the device.
    pub time: KernelTime,
}

/// Turns on timestamping on `fd`; returns what the kernel kept. An error means nothing changed
/// (an old kernel, a socket type without timestamps, `OPT_ID` on an unconnected TCP socket).
pub fn enable(fd: &impl AsFd, want: Want) -> io::Result<Enabled> {
    let mut flags = TimestampingFlag::empty();
    if want.rx {
        flags |= TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE;
    }
    if want.tx {
        flags |= TimestampingFlag::SOF_TIMESTAMPING_TX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_ID
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_TSONLY;
    }
    if flags.is_empty() {
        return Ok(Enabled::default());
    }
    flags |= TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
    if want.hardware {
        flags |= TimestampingFlag::SOF_TIMESTAMPING_RAW_HARDWARE;
        if want.rx {
            flags |= TimestampingFlag::SOF_TIMESTAMPING_RX_HARDWARE;
        }
        if want.tx {
            flags |= TimestampingFlag::SOF_TIMESTAMPING_TX_HARDWARE;
        }
    }
    setsockopt(fd, sockopt::Timestamping, &flags)?;
    let got = getsockopt(fd, sockopt::Timestamping).unwrap_or(flags);
    let soft = got.contains(TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE);
    Ok(Enabled {
        rx: soft && got.contains(TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE),
        tx: soft
            && got.contains(
                TimestampingFlag::SOF_TIMESTAMPING_TX_SOFTWARE
                    | TimestampingFlag::SOF_TIMESTAMPING_OPT_ID,
            ),
        hardware: got.contains(TimestampingFlag::SOF_TIMESTAMPING_RAW_HARDWARE),
    })
}

/// The `OPT_ID` the kernel reports for a TCP send whose last byte is at `end_offset - 1`, where
/// `end_offset` counts the bytes written on the connection since timestamps were enabled.
pub fn stream_id(end_offset: u64) -> u32 {
    end_offset.wrapping_sub(1) as u32
}

/// Whether a stamp with id `stamp` covers the send with id `wanted`: ids are counters modulo
/// 2^32, so "at or after" is a wrapping comparison (valid while they are < 2^31 apart).
pub fn covers(stamp: u32, wanted: u32) -> bool {
    (stamp.wrapping_sub(wanted) as i32) >= 0
}

/// `ee_info` of a timestamp taken when the packet went to the device (`SCM_TSTAMP_SND` in
/// include/uapi/linux/errqueue.h; `libc` does not export it).
const SCM_TSTAMP_SND: u32 = 0;

/// Control messages a read can carry: SCM_TIMESTAMPING (three timespecs), IP(V6)_RECVERR
/// (`sock_extended_err` and an address), with room to spare for ones we do not ask for.
const CONTROL_BYTES: usize = 512;

/// Reads with `recvmsg`, keeping one control buffer so reads do not allocate.
#[derive(Debug)]
pub struct Reader {
    control: Vec<u8>,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader::new()
    }
}

impl Reader {
    /// A reader with its control buffer.
    pub fn new() -> Reader {
        Reader {
            control: vec![0; CONTROL_BYTES],
        }
    }

    /// Reads from a connected socket; returns the bytes read and the kernel receive time of the
    /// data (TCP: of the last segment the read consumed).
    pub fn recv(&mut self, fd: &impl AsFd, buf: &mut [u8]) -> io::Result<(usize, KernelTime)> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<()>(
            fd.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut self.control),
            MsgFlags::empty(),
        )?;
        Ok((msg.bytes, rx_time(msg.cmsgs().ok())))
    }

    /// Reads one datagram; returns its length, its sender and its kernel receive time.
    pub fn recv_from(
        &mut self,
        fd: &impl AsFd,
        buf: &mut [u8],
    ) -> io::Result<(usize, Option<SocketAddr>, KernelTime)> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<SockaddrStorage>(
            fd.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut self.control),
            MsgFlags::empty(),
        )?;
        let peer = msg.address.as_ref().and_then(socket_addr);
        Ok((msg.bytes, peer, rx_time(msg.cmsgs().ok())))
    }

    /// Reads the error queue of `fd` until it is empty, handing every transmit timestamp to
    /// `each`; returns how many there were. Other queued errors (ICMP with `IP_RECVERR`) are
    /// dropped. Cheap when the queue is empty: one `recvmsg` returning `EAGAIN`.
    pub fn drain_tx(&mut self, fd: &impl AsFd, mut each: impl FnMut(TxStamp)) -> io::Result<usize> {
        let mut n = 0;
        // With OPT_TSONLY there is no payload; a byte of room keeps MSG_TRUNC off if some is.
        let mut data = [0u8; 64];
        loop {
            let mut iov = [IoSliceMut::new(&mut data)];
            let msg = match recvmsg::<()>(
                fd.as_fd().as_raw_fd(),
                &mut iov,
                Some(&mut self.control),
                MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(msg) => msg,
                Err(nix::errno::Errno::EAGAIN) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let Ok(cmsgs) = msg.cmsgs() else { continue };
            let (mut time, mut id) = (None, None);
            for c in cmsgs {
                match c {
                    ControlMessageOwned::ScmTimestampsns(t) => time = Some(kernel_time(&t)),
                    ControlMessageOwned::Ipv4RecvErr(e, _)
                    | ControlMessageOwned::Ipv6RecvErr(e, _)
                        if e.ee_origin == nix::libc::SO_EE_ORIGIN_TIMESTAMPING
                            && e.ee_info == SCM_TSTAMP_SND =>
                    {
                        id = Some(e.ee_data);
                    }
                    _ => {}
                }
            }
            if let (Some(time), Some(id)) = (time, id) {
                n += 1;
                each(TxStamp { id, time });
            }
        }
    }
}

fn ns(t: &TimeSpec) -> Option<u64> {
    let v = (t.tv_sec() as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec() as u64);
    (t.tv_sec() >= 0 && v > 0).then_some(v)
}

fn kernel_time(t: &nix::sys::socket::Timestamps) -> KernelTime {
    KernelTime {
        software_ns: ns(&t.system),
        hardware_ns: ns(&t.hw_raw),
    }
}

fn rx_time(cmsgs: Option<nix::sys::socket::CmsgIterator<'_>>) -> KernelTime {
    cmsgs
        .into_iter()
        .flatten()
        .find_map(|c| match c {
            ControlMessageOwned::ScmTimestampsns(t) => Some(kernel_time(&t)),
            _ => None,
        })
        .unwrap_or_default()
}

fn socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    match a.family()? {
        AddressFamily::Inet => a
            .as_sockaddr_in()
            .map(|s| SocketAddr::V4(SocketAddrV4::from(*s))),
        AddressFamily::Inet6 => a
            .as_sockaddr_in6()
            .map(|s| SocketAddr::V6(SocketAddrV6::from(*s))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_are_last_byte_offsets_compared_modulo_2_32() {
        // Two sends of 10 and 5 bytes: the kernel reports ids 9 and 14.
        assert_eq!((stream_id(10), stream_id(15)), (9, 14));
        assert!(covers(14, 9) && covers(9, 9) && !covers(8, 9));
        // Across the wrap of the 32-bit counter.
        let near = (1u64 << 32) - 2;
        assert!(covers(stream_id(near + 10), stream_id(near)));
        assert!(!covers(stream_id(near), stream_id(near + 10)));
    }
}
