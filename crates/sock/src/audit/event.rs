//! One setsockopt call as the kernel side sends it (`struct sockopt_event` in
//! `src/bpf/setsockopt.h`, 88 bytes, native byte order; addresses and the port in network
//! order).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tailhunt_model::evidence::sock::SockoptEvent;

/// Decodes one ring-buffer record; `None` when it is too short.
pub fn parse_event(b: &[u8]) -> Option<SockoptEvent> {
    if b.len() < 88 {
        return None;
    }
    let u16_ne = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
    let u32_ne = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or_default());
    let i32_ne = |o: usize| i32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or_default());
    let u64_ne = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or_default());
    let (level, optname) = (i32_ne(28), i32_ne(32));
    let value = i64::from_ne_bytes(b[40..48].try_into().unwrap_or_default());
    let family = u16_ne(48);
    let port = u16::from_be_bytes([b[50], b[51]]);
    let ip = match family {
        2 => Some(IpAddr::V4(Ipv4Addr::new(b[52], b[53], b[54], b[55]))),
        10 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[56..72]);
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => None,
    };
    let comm = String::from_utf8_lossy(b[72..88].split(|c| *c == 0).next().unwrap_or_default())
        .into_owned();
    Some(SockoptEvent {
        t_ns: u64_ne(0) as i64,
        pid: u32_ne(16),
        tid: u32_ne(20),
        comm,
        fd: i32_ne(24),
        option: option_name(level, optname),
        value: (i32_ne(36) >= 4 && value != -1).then_some(value),
        inode: u64_ne(8),
        peer: ip
            .filter(|_| port != 0)
            .map(|ip| SocketAddr::new(ip, port).to_string()),
    })
}

/// The option's name (`include/uapi/asm-generic/socket.h`, `include/uapi/linux/tcp.h`).
pub fn option_name(level: i32, optname: i32) -> String {
    match (level, optname) {
        (1, 7) => "SO_SNDBUF".into(),
        (1, 8) => "SO_RCVBUF".into(),
        (1, 9) => "SO_KEEPALIVE".into(),
        (1, 32) => "SO_SNDBUFFORCE".into(),
        (1, 33) => "SO_RCVBUFFORCE".into(),
        (6, 1) => "TCP_NODELAY".into(),
        (6, 10) => "TCP_WINDOW_CLAMP".into(),
        (6, 12) => "TCP_QUICKACK".into(),
        (l, o) => format!("level {l} option {o}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_record_layout() {
        let mut b = vec![0u8; 88];
        b[0..8].copy_from_slice(&5u64.to_ne_bytes());
        b[8..16].copy_from_slice(&777u64.to_ne_bytes());
        b[16..20].copy_from_slice(&1699u32.to_ne_bytes());
        b[24..28].copy_from_slice(&3i32.to_ne_bytes());
        b[28..32].copy_from_slice(&1i32.to_ne_bytes());
        b[32..36].copy_from_slice(&8i32.to_ne_bytes());
        b[36..40].copy_from_slice(&4i32.to_ne_bytes());
        b[40..48].copy_from_slice(&65536i64.to_ne_bytes());
        b[48..50].copy_from_slice(&2u16.to_ne_bytes());
        b[50..52].copy_from_slice(&9092u16.to_be_bytes());
        b[52..56].copy_from_slice(&[10, 0, 0, 2]);
        b[72..76].copy_from_slice(b"java");
        let e = parse_event(&b).unwrap();
        assert_eq!(
            e.describe(),
            "pid 1699 (java) set SO_RCVBUF=65536 on the socket to 10.0.0.2:9092"
        );
        assert_eq!(e.inode, 777);
        assert!(parse_event(&b[..80]).is_none());
    }
}
