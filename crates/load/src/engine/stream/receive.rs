//! The stream worker's reading side: a readable connection's bytes, the responses in them,
//! and the transmit timestamps of the requests they answer (breakdown).

use std::io::{ErrorKind, Read};

use tailhunt_model::{Outcome, Sample};

use super::{Loop, READ_CHUNK};
use crate::breakdown::{Breakdown, ClientTimes};
use crate::clock::{mono_ns, real_ns};
use crate::engine::WorkerResult;
use crate::proto;
use crate::tstamp;

/// What the responses in a connection's read buffer came to.
struct Taken {
    /// Bytes they took.
    used: usize,
    /// Why the connection is broken, if it is (garbage, a response to nothing).
    broken: Option<String>,
    /// The server said it closes the connection after one of them.
    closing: bool,
}

impl Loop<'_> {
    /// Connection `i` is readable: takes what the socket holds, finishes the requests it
    /// answers, and ends the connection if the server closed it or broke the protocol.
    pub(super) fn read(&mut self, i: usize, r: &mut WorkerResult) {
        if self.cfg.breakdown {
            // Before the replies: the request's transmit stamp is queued when it leaves, so it
            // is there by the time its reply is (and the queue keeps EPOLLERR up until drained).
            self.take_tx_stamps(i);
        }
        let Some((closed, kernel_rx_ns)) = self.receive(i, r) else {
            return;
        };
        let Taken {
            used,
            broken,
            closing,
        } = self.take_responses(i, kernel_rx_ns, r);
        let c = &mut self.conns[i];
        c.rbuf.copy_within(used..c.rlen, 0);
        c.rlen -= used;
        if let Some(e) = broken {
            r.note_error(|| e);
            self.fail(i, Outcome::Error, r);
        } else if closing || (closed && self.conns[i].inflight.is_empty()) {
            // Announced (`Connection: close`, HTTP/1.0) or idle: no request failed.
            self.retire(i, r);
        } else if closed {
            r.note_error(|| "the server closed the connection".into());
            self.fail(i, Outcome::Error, r);
        } else {
            self.offer(i);
        }
    }

    /// Reads connection `i` until its socket is empty (or, for TLS, the session holds no more):
    /// whether the server closed it (or reading failed), and the kernel receive timestamp of
    /// the last read that returned data (breakdown only; 0 otherwise). `None` when the
    /// connection is not open.
    fn receive(&mut self, i: usize, r: &mut WorkerResult) -> Option<(bool, u64)> {
        let mut closed = false;
        let mut kernel_rx_ns = 0;
        let c = &mut self.conns[i];
        let sock = c.sock.as_mut()?;
        loop {
            // Grow (zeroing) only when less than a chunk is free: the buffer is reused, never
            // re-zeroed per read (a 64 KiB memset per read cost more than the syscall).
            if c.rbuf.len() - c.rlen < READ_CHUNK {
                c.rbuf.resize(c.rlen + READ_CHUNK, 0);
            }
            let len = c.rlen;
            let got = if self.cfg.breakdown {
                self.reader
                    .recv(sock.tcp(), &mut c.rbuf[len..])
                    .map(|(k, t)| (k, t.software_ns))
            } else {
                sock.read(&mut c.rbuf[len..]).map(|k| (k, None))
            };
            match got {
                Ok((0, _)) => {
                    closed = true;
                    break;
                }
                Ok((k, rx)) => {
                    c.rlen += k;
                    kernel_rx_ns = rx.unwrap_or(kernel_rx_ns);
                    // A TLS session may hold more plaintext than one read returned.
                    if k < READ_CHUNK && sock.short_read_drains() {
                        break;
                    }
                }
                Err(e) => {
                    if e.kind() != ErrorKind::WouldBlock && e.kind() != ErrorKind::Interrupted {
                        r.note_error(|| format!("read: {e}"));
                        closed = true;
                    }
                    break;
                }
            }
        }
        Some((closed, kernel_rx_ns))
    }

    /// Finishes the requests the responses in connection `i`'s read buffer answer.
    fn take_responses(&mut self, i: usize, kernel_rx_ns: u64, r: &mut WorkerResult) -> Taken {
        let end = mono_ns();
        self.last_reply_ns = end;
        let end_real_ns = if self.cfg.breakdown {
            real_ns() as u64
        } else {
            0
        };
        let mut used = 0;
        let mut broken = None;
        // The server said it closes the connection after a response of this read.
        let mut closing = false;
        loop {
            let c = &self.conns[i];
            match self.proto.parse_response(&c.rbuf[used..c.rlen]) {
                Ok(Some(resp)) => {
                    let c = &mut self.conns[i];
                    let Some(f) = c.inflight.pop_front() else {
                        broken = Some("a response arrived with no request outstanding".to_string());
                        break;
                    };
                    if !resp.ok {
                        // What the server said, so a run of error replies says why.
                        let reply = &c.rbuf[used..used + resp.len];
                        r.note_error(|| format!("error reply: {}", proto::first_line(reply)));
                    }
                    used += resp.len;
                    let outcome = if resp.ok { Outcome::Ok } else { Outcome::Error };
                    let breakdown = self.cfg.breakdown.then(|| {
                        let client = ClientTimes {
                            app_send_ns: f.send_real_ns,
                            kernel_tx_ns: f.kernel_tx_ns,
                            kernel_rx_ns,
                            app_recv_ns: end_real_ns,
                        };
                        // The client's kernel times are of the write and the reply: the
                        // connect the request waited for before its write is split apart.
                        let sent = end - f.start - f.connect_ns;
                        resp.server
                            .and_then(|t| Breakdown::split_with_client(sent, t, client))
                            .map(|b| Breakdown {
                                network_ns: b.network_ns + f.connect_ns,
                                ..b
                            })
                            .unwrap_or_default()
                    });
                    r.finish(
                        Sample::new(f.intended, f.start, end, outcome),
                        true,
                        breakdown,
                    );
                    self.refused_since_response = None;
                    self.live_done += 1;
                    if resp.closes {
                        closing = true;
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    broken = Some(e.to_string());
                    break;
                }
            }
        }
        Taken {
            used,
            broken,
            closing,
        }
    }

    /// Drains connection `i`'s error queue and gives each transmit timestamp to the requests it
    /// covers: a stamp's id is the offset of the last byte of one `write`, so it is the
    /// transmit time of every request whose last byte went in that write (the earliest stamp
    /// at or after a request's last byte; requests are in byte order).
    fn take_tx_stamps(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(sock) = c.sock.as_ref().filter(|_| c.tx_stamps) else {
            return;
        };
        let inflight = &mut c.inflight;
        let _ = self.reader.drain_tx(sock.tcp(), |stamp| {
            let Some(t) = stamp.time.software_ns else {
                return; // a hardware-only report of a send already stamped in software
            };
            for f in inflight.iter_mut().filter(|f| f.kernel_tx_ns == 0) {
                if !tstamp::covers(stamp.id, tstamp::stream_id(f.end_offset)) {
                    break;
                }
                f.kernel_tx_ns = t;
            }
        });
    }
}
