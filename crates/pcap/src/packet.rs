//! What the readers hand to the analysis: one captured frame, not yet decoded.

/// Link-layer header type of a capture (or of one pcapng interface).
///
/// Numbers are the LINKTYPE_ values of the tcpdump.org link-type registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// LINKTYPE_ETHERNET (1): Ethernet II, possibly with 802.1Q / 802.1ad VLAN tags.
    Ethernet,
    /// LINKTYPE_RAW (101), and the raw-IP aliases 228 (IPv4) and 229 (IPv6): the frame starts
    /// with the IP header.
    RawIp,
    /// LINKTYPE_LINUX_SLL (113): Linux "cooked" capture v1 (`tcpdump -i any`, older libpcap).
    LinuxSll,
    /// LINKTYPE_LINUX_SLL2 (276): Linux cooked capture v2 (`tcpdump -i any`, libpcap >= 1.10).
    LinuxSll2,
    /// LINKTYPE_NULL (0) / LINKTYPE_LOOP (108): BSD loopback, a 4-byte address family first.
    Null,
    /// Anything else: counted, not decoded.
    Other(u32),
}

impl LinkType {
    /// Maps a LINKTYPE_ number.
    pub fn from_number(n: u32) -> LinkType {
        match n {
            1 => LinkType::Ethernet,
            101 | 228 | 229 | 12 | 14 => LinkType::RawIp,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            0 | 108 => LinkType::Null,
            other => LinkType::Other(other),
        }
    }

    /// The registry's name of a LINKTYPE_ number (`EN10MB`, `IEEE802_11_RADIO`, `USER0`),
    /// `None` for a number nobody named.
    ///
    /// Names come from libpcap (`pcap_datalink_val_to_name`), which names DLT_ values: those
    /// equal the LINKTYPE_ values except 100-106, whose DLT_ values differ by platform and
    /// are mapped here as libpcap's `linktype_to_dlt` does; the sixteen private types
    /// 147-162 (`USER0`..`USER15`) libpcap leaves unnamed.
    pub fn name_of(n: u32) -> Option<String> {
        let dlt = match n {
            100 => 11,
            101 => 12,
            102 => 15,
            103 => 16,
            104 => 104,
            105 => 105,
            106 => 19,
            147..=162 => return Some(format!("USER{}", n - 147)),
            n => n,
        };
        let dlt = i32::try_from(dlt).ok()?;
        pcap::Linktype(dlt).get_name().ok()
    }

    /// The LINKTYPE_ number written to a capture file (101 for raw IP, 0 for NULL).
    pub fn number(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Null => 0,
            LinkType::Other(n) => n,
        }
    }
}

/// One captured frame as read from a file or a live interface.
///
/// `data` borrows the reader's buffer: it is valid until the next call to the reader.
#[derive(Debug, Clone, Copy)]
pub struct RawPacket<'a> {
    /// Capture timestamp, nanoseconds since the Unix epoch (whatever the file's resolution).
    pub ts_ns: i64,
    /// Interface index (pcapng interface id; 0 for classic pcap).
    pub iface: u32,
    /// Link-layer header type of that interface.
    pub link: LinkType,
    /// Length of the frame on the wire (may exceed `data.len()` when the snap length cut it).
    pub wire_len: u32,
    /// The captured bytes, from the link-layer header on.
    pub data: &'a [u8],
}
