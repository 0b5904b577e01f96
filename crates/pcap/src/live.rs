//! Live capture from a network interface through libpcap.
//!
//! In: an interface name, a snap length and an optional BPF filter (tcpdump syntax). Out: a
//! [`PacketSource`] of [`RawPacket`]s with nanosecond timestamps, until [`StopHandle::stop`]
//! is called from another thread (a Ctrl-C handler): it sets a flag and calls
//! `pcap_breakloop`, which wakes a read blocked in libpcap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pcap::{Active, BreakLoop, Capture, Device, Precision};

use crate::packet::{LinkType, RawPacket};
use crate::read::{PacketSource, ReadError};

/// libpcap's read timeout in milliseconds (libpcap >= 1.10 may keep waiting past it; the stop
/// handle does not rely on it).
pub const POLL_MS: i32 = 100;

/// Kernel ring buffer size. libpcap's 2 MiB default holds only ~30 frames when the snap length
/// is 64 KiB (immediate mode uses one fixed-size slot per frame): a 20-datagram burst on
/// loopback lost 4 in the live test. 32 MiB holds ~500 such frames, ~100 k at snap length 256.
pub const RING_BYTES: i32 = 32 << 20;

/// Why a live capture could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// No permission to open a packet socket.
    #[error("capturing on '{iface}' is not permitted ({detail}); capturing needs root or CAP_NET_RAW (run with sudo, or `setcap cap_net_raw+ep` on the binary)")]
    NotPermitted {
        /// The interface.
        iface: String,
        /// libpcap's message.
        detail: String,
    },
    /// The interface does not exist.
    #[error("there is no interface '{iface}'; interfaces that exist: {}", available.join(", "))]
    NoSuchInterface {
        /// The name asked for.
        iface: String,
        /// The interfaces libpcap lists.
        available: Vec<String>,
    },
    /// The BPF filter does not compile.
    #[error("capture filter '{filter}' is not valid ({detail}); it uses tcpdump's syntax, e.g. 'tcp port 80'")]
    BadFilter {
        /// The filter.
        filter: String,
        /// libpcap's message.
        detail: String,
    },
    /// Anything else libpcap reported.
    #[error("cannot capture on '{iface}': {detail}")]
    Pcap {
        /// The interface.
        iface: String,
        /// libpcap's message.
        detail: String,
    },
}

/// Stops a [`LiveCapture`] from another thread.
#[derive(Clone)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
    wake: Arc<BreakLoop>,
}

impl StopHandle {
    /// Makes the capture's current or next read return the end of the stream.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Relaxed);
        // libpcap 1.10 keeps polling through read timeouts; pcap_breakloop wakes its poll.
        self.wake.breakloop();
    }
}

impl std::fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopHandle")
            .field("stopped", &self.flag.load(Ordering::Relaxed))
            .finish()
    }
}

/// A running capture on one interface.
pub struct LiveCapture {
    cap: Capture<Active>,
    iface: String,
    link: LinkType,
    stop: Arc<AtomicBool>,
    buf: Vec<u8>,
}

fn pcap_error(iface: &str, e: pcap::Error) -> LiveError {
    let detail = e.to_string();
    let lower = detail.to_lowercase();
    if lower.contains("permission") || lower.contains("not permitted") {
        LiveError::NotPermitted {
            iface: iface.to_string(),
            detail,
        }
    } else if lower.contains("no such device") || lower.contains("doesn't exist") {
        LiveError::NoSuchInterface {
            iface: iface.to_string(),
            available: interfaces(),
        }
    } else {
        LiveError::Pcap {
            iface: iface.to_string(),
            detail,
        }
    }
}

/// Names of the interfaces libpcap can capture on (empty if it cannot list them).
pub fn interfaces() -> Vec<String> {
    Device::list()
        .map(|l| l.into_iter().map(|d| d.name).collect())
        .unwrap_or_default()
}

impl LiveCapture {
    /// Starts capturing on `iface` ("any" for all), keeping `snaplen` bytes of each frame and
    /// only the frames `bpf_filter` accepts.
    pub fn open(
        iface: &str,
        snaplen: u32,
        bpf_filter: Option<&str>,
    ) -> Result<LiveCapture, LiveError> {
        let known = interfaces();
        if !known.is_empty() && !known.iter().any(|n| n == iface) {
            return Err(LiveError::NoSuchInterface {
                iface: iface.to_string(),
                available: known,
            });
        }
        let snaplen = i32::try_from(snaplen.max(64)).unwrap_or(i32::MAX);
        let mut cap = Capture::from_device(iface)
            .map_err(|e| pcap_error(iface, e))?
            .snaplen(snaplen)
            .promisc(false)
            .immediate_mode(true)
            .buffer_size(RING_BYTES)
            .timeout(POLL_MS)
            .precision(Precision::Nano)
            .open()
            .map_err(|e| pcap_error(iface, e))?;
        if let Some(filter) = bpf_filter {
            cap.filter(filter, true).map_err(|e| LiveError::BadFilter {
                filter: filter.to_string(),
                detail: e.to_string(),
            })?;
        }
        let link = LinkType::from_number(cap.get_datalink().0 as u32);
        Ok(LiveCapture {
            cap,
            iface: iface.to_string(),
            link,
            stop: Arc::new(AtomicBool::new(false)),
            buf: Vec::with_capacity(snaplen as usize),
        })
    }

    /// A handle that stops this capture from another thread.
    pub fn stop_handle(&mut self) -> StopHandle {
        StopHandle {
            flag: self.stop.clone(),
            wake: Arc::new(self.cap.breakloop_handle()),
        }
    }

    /// The interface's link type.
    pub fn link(&self) -> LinkType {
        self.link
    }

    /// Frames the kernel dropped because the reader was too slow (libpcap's `ps_drop`).
    pub fn dropped(&mut self) -> u64 {
        self.cap.stats().map(|s| u64::from(s.dropped)).unwrap_or(0)
    }
}

impl PacketSource for LiveCapture {
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, ReadError> {
        let (ts_ns, wire_len) = loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            match self.cap.next_packet() {
                Ok(p) => {
                    // Copied: returning libpcap's borrow from inside this retry loop is beyond
                    // today's borrow checker, and one copy is cheap at live rates.
                    self.buf.clear();
                    self.buf.extend_from_slice(p.data);
                    let ts = p.header.ts;
                    let ts_ns = ts.tv_sec * 1_000_000_000 + ts.tv_usec;
                    break (ts_ns, p.header.len);
                }
                Err(pcap::Error::TimeoutExpired) => continue,
                Err(pcap::Error::NoMorePackets) => return Ok(None),
                Err(e) => {
                    return Err(ReadError::Io {
                        path: self.iface.clone().into(),
                        source: std::io::Error::other(e.to_string()),
                    })
                }
            }
        };
        Ok(Some(RawPacket {
            ts_ns,
            iface: 0,
            link: self.link,
            wire_len: wire_len.max(self.buf.len() as u32),
            data: &self.buf,
        }))
    }

    fn position(&self) -> u64 {
        0
    }
}
