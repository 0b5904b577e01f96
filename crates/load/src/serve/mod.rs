//! Reference ("do nothing") servers: the baseline that eliminates the application.
//!
//! In: a [`ServeConfig`] (protocol, address, reply size, think time, socket options, fault
//! injection). Out: a running [`Server`] on its own threads that answers the
//! [wire formats](crate::wire) (length-prefixed TCP frames, UDP echo datagrams, HTTP/1.1), with
//! live [`ServeStats`] counters and, when asked, the server's timestamps in every reply.
//!
//! # Brief overview
//!
//! ```no_run
//! use tailhunt_load::serve::{ServeConfig, ServeProto, Server};
//!
//! let server = Server::start(ServeConfig::new(ServeProto::Tcp, "127.0.0.1:0".parse()?))?;
//! println!("listening on {}", server.local_addr());
//! // ... drive load against it ...
//! let stats = server.stop();
//! println!("{} requests, {} replies", stats.requests, stats.replies);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Threads
//!
//! `threads` workers, each with its own epoll instance, timer and queue of pending replies.
//! TCP and HTTP share **one** listening socket registered in every worker's epoll with
//! `EPOLLEXCLUSIVE` (one worker wakes per connection); whichever worker accepts hands the
//! connection round-robin to a worker, so connections spread evenly. One socket, not one per
//! thread with `SO_REUSEPORT`, because a reuseport group would let a second server on the same
//! port (any process of the same user) silently take half of the connections instead of failing
//! with "address in use". UDP: one socket read by every worker (`EPOLLEXCLUSIVE`).
//!
//! Think time never blocks a worker: replies wait in a queue ordered by due time and a
//! `timerfd` (absolute `CLOCK_MONOTONIC`, nanosecond resolution) wakes the worker when the first
//! is due. A timerfd and not the epoll timeout, because rustix's `epoll::wait` rounds timeouts up
//! to whole milliseconds unless its `linux_5_11` feature is on. Workers also set their timer
//! slack to 1 ns. No busy-polling: an idle worker sleeps in `epoll_wait` (at most 50 ms at a time,
//! to check the stop flag; `stop` also wakes it through an eventfd).
//!
//! # Timestamps
//!
//! With `timestamps` on, `app_recv_ns` (CLOCK_REALTIME when the read that completed the request
//! returned and the request was parsed), `app_send_ns` (just before the write) and `rx_kernel_ns`
//! are filled. `rx_kernel_ns` is the kernel's software receive timestamp (`SO_TIMESTAMPING`,
//! CLOCK_REALTIME, see [`crate::tstamp`]) of the data that completed the request: the listening
//! socket asks for it and accepted sockets inherit it, and each read is one `recvmsg` carrying
//! it instead of one `recv`. A kernel that refuses leaves it 0. With `timestamps` off, reads are
//! plain `recv`s.

mod conn;
mod event_loop;
mod http;
mod inject;
mod listen;
mod runtime;
mod tcp;
mod think;
mod udp;

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use inject::{Injected, TailWave};
pub use think::ThinkTime;

use runtime::{Counters, Inbox, Shared};

/// Which wire format a server speaks (see [`crate::wire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ServeProto {
    /// Length-prefixed frames over TCP.
    Tcp,
    /// One reply datagram per request datagram.
    Udp,
    /// HTTP/1.1 with keep-alive and pipelining.
    Http,
}

impl ServeProto {
    /// The protocol's name as written on the command line (`tcp`, `udp`, `http`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServeProto::Tcp => "tcp",
            ServeProto::Udp => "udp",
            ServeProto::Http => "http",
        }
    }
}

impl std::fmt::Display for ServeProto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ServeProto {
    type Err = ServeError;

    fn from_str(s: &str) -> Result<ServeProto, ServeError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tcp" => Ok(ServeProto::Tcp),
            "udp" => Ok(ServeProto::Udp),
            "http" => Ok(ServeProto::Http),
            _ => Err(ServeError::Config(format!(
                "unknown protocol '{s}' (use tcp, udp or http)"
            ))),
        }
    }
}

/// What a reference server does.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Wire format.
    pub proto: ServeProto,
    /// Address to listen on; port 0 picks a free port (see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// Set TCP_NODELAY on accepted connections (tcp, http).
    pub nodelay: bool,
    /// Reply body bytes. tcp/udp: padded up to it, at least [`crate::wire::RESPONSE_MIN_BODY`];
    /// http: the body length (may be 0).
    pub reply_bytes: usize,
    /// Server "application" time before each reply.
    pub think: ThinkTime,
    /// tcp: write the 4-byte header and the body with two `write` calls; http: headers, then
    /// body. Each reply then costs exactly two writes (the write-write-read pattern of Nagle).
    pub split_writes: bool,
    /// Worker threads, at least 1.
    pub threads: usize,
    /// Fault injection: `(at, dur)`: from `at` after start, answer nothing for `dur` (requests
    /// are still read); afterwards everything held is answered, in order.
    pub pause: Option<(Duration, Duration)>,
    /// Fault injection on top of the think time: a cost on each connection's first request, a
    /// step, a periodic tail.
    pub inject: Injected,
    /// Fill the server timestamps of each reply (0 when off).
    pub timestamps: bool,
}

impl ServeConfig {
    /// A configuration with the defaults of `tailhunt serve`: TCP_NODELAY on, 32-byte replies,
    /// no think time, one write per batch of replies, one thread, no pause, timestamps on.
    pub fn new(proto: ServeProto, listen: SocketAddr) -> ServeConfig {
        ServeConfig {
            proto,
            listen,
            nodelay: true,
            reply_bytes: crate::wire::RESPONSE_MIN_BODY,
            think: ThinkTime::None,
            split_writes: false,
            threads: 1,
            pause: None,
            inject: Injected::default(),
            timestamps: true,
        }
    }

    fn validate(&self) -> Result<(), ServeError> {
        if self.threads == 0 || self.threads > 1024 {
            return Err(ServeError::Config(format!(
                "{} server threads is out of range (use 1..=1024)",
                self.threads
            )));
        }
        let max = match self.proto {
            // 65535 - 8 (UDP header) - 20 (IPv4 header): the largest IPv4 UDP payload.
            ServeProto::Udp => 65_507,
            ServeProto::Tcp | ServeProto::Http => crate::wire::MAX_BODY,
        };
        if self.reply_bytes > max {
            return Err(ServeError::Config(format!(
                "reply size {} bytes is too large for {} (at most {max})",
                self.reply_bytes, self.proto
            )));
        }
        self.think.validate()
    }
}

/// Live counters of a server (all threads summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Connections accepted (tcp, http; 0 for udp).
    pub connections: u64,
    /// Complete, valid requests read.
    pub requests: u64,
    /// Replies sent: tcp/http count a reply when it is queued on its connection (written at
    /// once unless the client is not reading); udp counts datagrams the kernel accepted.
    /// Error replies such as HTTP 400 are not included.
    pub replies: u64,
    /// Invalid requests (bad frame length, malformed HTTP, short datagram).
    pub bad_requests: u64,
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listening socket could not be bound. The message already includes the OS error,
    /// so `error` is not chained as a `source` (it would be printed twice).
    #[error("{}", listen::bind_message(addr, error))]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// What the kernel said.
        error: std::io::Error,
    },
    /// An invalid setting; the message names the value and the valid range.
    #[error("{0}")]
    Config(String),
    /// Setting up epoll, timers or threads failed.
    #[error("cannot start the server: {0}")]
    Io(std::io::Error),
}

/// A running reference server. Dropping it stops it like [`Server::stop`].
pub struct Server {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    counters: Vec<Arc<Counters>>,
    inboxes: Arc<[Inbox]>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Binds the socket, spawns the worker threads and returns at once.
    pub fn start(cfg: ServeConfig) -> Result<Server, ServeError> {
        cfg.validate()?;
        let socket = listen::bind(&cfg)?;
        let local_addr = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(cfg.listen);
        let socket: Arc<OwnedFd> = Arc::new(socket.into());
        let shared = Arc::new(Shared::new(cfg.pause));
        let inboxes: Arc<[Inbox]> = (0..cfg.threads)
            .map(|_| Inbox::new())
            .collect::<Result<Vec<_>, _>>()
            .map_err(ServeError::Io)?
            .into();
        let counters: Vec<Arc<Counters>> = (0..cfg.threads)
            .map(|_| Arc::new(Counters::default()))
            .collect();
        let next_owner = Arc::new(AtomicUsize::new(0));
        let mut server = Server {
            local_addr,
            shared: shared.clone(),
            counters: counters.clone(),
            inboxes: inboxes.clone(),
            threads: Vec::with_capacity(cfg.threads),
        };
        for (id, counters) in counters.into_iter().enumerate() {
            let ctx = runtime::WorkerCtx::new(id, &cfg, shared.clone(), counters, inboxes.clone())
                .map_err(ServeError::Io)?;
            let run: Box<dyn FnOnce() + Send> = match cfg.proto {
                ServeProto::Tcp => {
                    let w = event_loop::StreamWorker::new(
                        ctx,
                        socket.clone(),
                        next_owner.clone(),
                        tcp::FrameProto::new(cfg.reply_bytes),
                        &cfg,
                    )
                    .map_err(ServeError::Io)?;
                    Box::new(move || w.run())
                }
                ServeProto::Http => {
                    let w = event_loop::StreamWorker::new(
                        ctx,
                        socket.clone(),
                        next_owner.clone(),
                        http::HttpProto::new(cfg.reply_bytes),
                        &cfg,
                    )
                    .map_err(ServeError::Io)?;
                    Box::new(move || w.run())
                }
                ServeProto::Udp => {
                    let w =
                        udp::UdpWorker::new(ctx, socket.clone(), &cfg).map_err(ServeError::Io)?;
                    Box::new(move || w.run())
                }
            };
            let handle = std::thread::Builder::new()
                .name(format!("tailhunt-serve-{id}"))
                .spawn(run)
                .map_err(ServeError::Io)?;
            server.threads.push(handle);
        }
        Ok(server)
    }

    /// The address the server listens on (with the port the kernel picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The counters so far.
    pub fn stats(&self) -> ServeStats {
        self.counters
            .iter()
            .fold(ServeStats::default(), |sum, c| c.add_to(sum))
    }

    /// Stops accepting, closes every connection, joins the threads (within ~50 ms) and returns
    /// the final counters. Replies still waiting (think time, pause) are dropped.
    pub fn stop(mut self) -> ServeStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for inbox in self.inboxes.iter() {
            inbox.wake();
        }
        for handle in self.threads.drain(..) {
            // A worker never panics by design; if one did, the others still stop.
            let _ = handle.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("threads", &self.threads.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_by_name() {
        assert_eq!("HTTP".parse::<ServeProto>().unwrap(), ServeProto::Http);
        assert!("quic"
            .parse::<ServeProto>()
            .unwrap_err()
            .to_string()
            .contains("tcp, udp or http"));
    }
}
