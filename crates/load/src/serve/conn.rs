//! One stream connection (tcp frames or HTTP): bytes in, requests parsed by a [`StreamProto`],
//! replies queued in request order until due, bytes out.
//!
//! In: readiness from the worker's epoll and the current monotonic time. Out: replies written in
//! request order (FIFO per connection: a reply never overtakes an earlier one, even when its
//! think time is shorter), the next time the connection needs a wake-up, and whether it is done.

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;

use rustix::io::Errno;
use rustix::net::SendFlags;

use super::runtime::{would_block, Counters, WorkerCtx};
use crate::wire::ServerTimes;

/// Unsent reply bytes above which a connection stops reading (the client is not reading).
const OUT_LIMIT: usize = 4 << 20;
/// Queued requests above which a connection stops reading (a long pause at a high rate).
const PENDING_LIMIT: usize = 1 << 18;
/// First size of a connection's read buffer; it grows up to [`StreamProto::max_buffer`].
const INITIAL_READ_BUFFER: usize = 16 << 10;

/// One parsed request, as much as the reply needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Request {
    /// Sequence number to echo (tcp).
    pub seq: u64,
    /// Close the connection after this reply (HTTP `Connection: close`, HTTP/1.0).
    pub close: bool,
    /// Say `Connection: keep-alive` (HTTP/1.0 that asked for it).
    pub keep_alive: bool,
    /// No body in the reply (HTTP HEAD).
    pub head: bool,
}

/// What a protocol found at the start of the unread bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A complete request of `consumed` bytes.
    Request { consumed: usize, req: Request },
    /// `n` bytes consumed without completing a request (an HTTP head whose body follows, body
    /// bytes, blank lines).
    Skip(usize),
    /// Not enough bytes yet.
    More,
    /// Invalid: answer with this error status (0 = no answer) after the earlier replies, then close.
    Bad(u16),
}

/// A request/reply protocol over a byte stream.
pub(crate) trait StreamProto: Send + 'static {
    /// Parser state kept between reads.
    type State: Default + Send;
    /// Looks at the unread bytes.
    fn next(&self, state: &mut Self::State, buf: &[u8]) -> Step;
    /// Appends a reply; returns the offset in `out` where its body starts (the split point).
    fn put_reply(&self, req: &Request, times: ServerTimes, out: &mut Vec<u8>) -> usize;
    /// Appends the error reply for status `status` (nothing for 0).
    fn put_error(&self, status: u16, out: &mut Vec<u8>);
    /// Most unread bytes the parser may need at once.
    fn max_buffer(&self) -> usize;
}

/// The connection is broken (reset, EPIPE) and must be closed now.
pub(crate) struct Gone;

enum Reply {
    Ok(Request),
    Error(u16),
}

struct Pending {
    /// Monotonic ns when the reply may go (think time over, and not before the previous reply).
    due: u64,
    times: ServerTimes,
    reply: Reply,
}

pub(crate) struct Conn<S> {
    fd: OwnedFd,
    pub gen: u32,
    state: S,
    inbuf: Vec<u8>,
    in_start: usize,
    in_end: usize,
    out: Vec<u8>,
    out_pos: usize,
    /// Split writes: end offsets in `out` of the pieces still to write, one `send` each.
    segs: VecDeque<usize>,
    pending: VecDeque<Pending>,
    last_due: u64,
    /// Due time of this connection's entry in the worker's timer queue.
    pub armed: Option<u64>,
    /// No more requests will be read (EOF, bad request, `Connection: close`).
    read_closed: bool,
    /// Reading stopped at a limit with bytes possibly left in the kernel (edge-triggered epoll
    /// will not say so again).
    read_blocked: bool,
    /// A request of this connection has been read (the next is not its first).
    answered_one: bool,
}

impl<S: Default> Conn<S> {
    pub(crate) fn new(fd: OwnedFd, gen: u32) -> Conn<S> {
        Conn {
            fd,
            gen,
            state: S::default(),
            inbuf: vec![0; INITIAL_READ_BUFFER],
            in_start: 0,
            in_end: 0,
            out: Vec::new(),
            out_pos: 0,
            segs: VecDeque::new(),
            pending: VecDeque::new(),
            last_due: 0,
            armed: None,
            read_closed: false,
            read_blocked: false,
            answered_one: false,
        }
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn over_limit(&self) -> bool {
        self.out.len() - self.out_pos > OUT_LIMIT || self.pending.len() >= PENDING_LIMIT
    }

    /// Reading stopped at a limit that no longer holds.
    pub(crate) fn wants_read(&self) -> bool {
        self.read_blocked && !self.read_closed && !self.over_limit()
    }

    /// Nothing more to read, answer or write: close it.
    pub(crate) fn finished(&self) -> bool {
        self.read_closed && self.pending.is_empty() && self.out_pos == self.out.len()
    }

    /// Reads until the socket is drained (edge-triggered), parsing every complete request. A
    /// read that leaves room in the buffer took everything queued, and a segment that comes
    /// after it raises a new edge: so the read that would only say EAGAIN is skipped (a third
    /// of a request/response server's syscalls), unless `to_end` (the peer closed or the
    /// socket failed: its end must be read, no further edge will come).
    pub(crate) fn read<P>(
        &mut self,
        proto: &P,
        ctx: &mut WorkerCtx,
        to_end: bool,
    ) -> Result<(), Gone>
    where
        P: StreamProto<State = S>,
    {
        self.read_blocked = false;
        while !self.read_closed {
            if self.over_limit() {
                self.read_blocked = true;
                return Ok(());
            }
            if self.in_end == self.inbuf.len() {
                if self.in_start > 0 {
                    self.inbuf.copy_within(self.in_start..self.in_end, 0);
                    self.in_end -= self.in_start;
                    self.in_start = 0;
                } else if self.inbuf.len() < proto.max_buffer() {
                    let grown = (self.inbuf.len() * 2).min(proto.max_buffer());
                    self.inbuf.resize(grown, 0);
                } else {
                    return Err(Gone); // the protocols never let an unparsed request get this big
                }
            }
            let room = self.inbuf.len() - self.in_end;
            match ctx.recv_with_rx_time(&self.fd, &mut self.inbuf[self.in_end..]) {
                Ok((0, _)) => self.read_closed = true,
                Ok((n, rx_kernel_ns)) => {
                    self.in_end += n;
                    self.parse(proto, ctx, rx_kernel_ns);
                    if n < room && !to_end {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Gone),
            }
        }
        Ok(())
    }

    /// Queues every complete request in the buffer. The bytes just read completed them all, so
    /// they share one receive time.
    fn parse<P>(&mut self, proto: &P, ctx: &mut WorkerCtx, rx_kernel_ns: u64)
    where
        P: StreamProto<State = S>,
    {
        let now = ctx.schedule_ns();
        let times = ServerTimes {
            rx_kernel_ns: if ctx.timestamps { rx_kernel_ns } else { 0 },
            app_recv_ns: ctx.stamp(),
            app_send_ns: 0,
        };
        let (mut requests, mut bad) = (0, 0);
        while !self.read_closed {
            let reply = match proto.next(&mut self.state, &self.inbuf[self.in_start..self.in_end]) {
                Step::More => break,
                Step::Skip(n) => {
                    self.in_start += n;
                    continue;
                }
                Step::Request { consumed, req } => {
                    self.in_start += consumed;
                    requests += 1;
                    self.read_closed = req.close;
                    Reply::Ok(req)
                }
                Step::Bad(status) => {
                    bad += 1;
                    self.read_closed = true;
                    Reply::Error(status)
                }
            };
            let think = match reply {
                Reply::Ok(_) => {
                    let first = !self.answered_one;
                    self.answered_one = true;
                    ctx.think
                        .sample_ns()
                        .saturating_add(ctx.inject.extra_ns(now, first))
                }
                Reply::Error(_) => 0,
            };
            let due = now.saturating_add(think).max(self.last_due);
            self.last_due = due;
            self.pending.push_back(Pending { due, times, reply });
        }
        if self.in_start == self.in_end {
            (self.in_start, self.in_end) = (0, 0);
        }
        Counters::bump(&ctx.counters.requests, requests);
        Counters::bump(&ctx.counters.bad_requests, bad);
    }

    /// Builds the replies due by `now` (none while paused) and writes what the socket takes.
    /// Returns when this connection next needs a wake-up.
    pub(crate) fn flush<P>(
        &mut self,
        proto: &P,
        ctx: &mut WorkerCtx,
        split: bool,
        now: u64,
    ) -> Result<Option<u64>, Gone>
    where
        P: StreamProto<State = S>,
    {
        if let Some(front) = self.pending.front() {
            if let Some(end) = ctx.shared.paused_until(now) {
                self.write_out()?;
                return Ok(Some(end));
            }
            if front.due <= now {
                let app_send_ns = ctx.stamp();
                let mut replies = 0;
                while self.pending.front().is_some_and(|p| p.due <= now) {
                    let Some(p) = self.pending.pop_front() else {
                        break;
                    };
                    let start = self.out.len();
                    match p.reply {
                        Reply::Ok(req) => {
                            let body = proto.put_reply(
                                &req,
                                ServerTimes {
                                    app_send_ns,
                                    ..p.times
                                },
                                &mut self.out,
                            );
                            replies += 1;
                            if split && start < body && body < self.out.len() {
                                self.segs.push_back(body);
                            }
                        }
                        Reply::Error(status) => proto.put_error(status, &mut self.out),
                    }
                    if split && self.out.len() > start {
                        self.segs.push_back(self.out.len());
                    }
                }
                Counters::bump(&ctx.counters.replies, replies);
            }
        }
        self.write_out()?;
        Ok(self.pending.front().map(|p| p.due))
    }

    /// Writes queued bytes until done or the socket is full: one `send` per piece with split
    /// writes, else everything in one `send`.
    pub(crate) fn write_out(&mut self) -> Result<(), Gone> {
        while self.out_pos < self.out.len() {
            let end = self.segs.front().copied().unwrap_or(self.out.len());
            match rustix::net::send(&self.fd, &self.out[self.out_pos..end], SendFlags::NOSIGNAL) {
                Ok(n) => {
                    self.out_pos += n;
                    if self.out_pos == end {
                        self.segs.pop_front();
                    }
                }
                Err(e) if would_block(e) => break,
                Err(Errno::INTR) => {}
                Err(_) => return Err(Gone),
            }
        }
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        } else if self.out_pos >= 64 << 10 && self.out_pos * 2 >= self.out.len() {
            // Slow reader: drop the sent half so the buffer does not grow without bound.
            self.out.drain(..self.out_pos);
            self.segs.iter_mut().for_each(|s| *s -= self.out_pos);
            self.out_pos = 0;
        }
        Ok(())
    }
}
