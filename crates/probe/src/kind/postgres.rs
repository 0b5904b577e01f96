//! postgres: a one-row query (default `SELECT 1`) with the `postgres` client crate.
//!
//! In: the address, user, password, database and query. Out: a [`Session`] per connection
//! (connect = TCP + startup + authentication); a request is the query, which must return at
//! least one row. The server is asked to cancel a statement running past the probe's timeout
//! (`statement_timeout`) and the connection gives up on unacknowledged data after it
//! (`tcp_user_timeout`); a server that accepts bytes but never answers can still hold the
//! probe's thread (the sample is censored at the timeout all the same).

use std::net::SocketAddr;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, Config, NoTls, SimpleQueryMessage};

use super::{Deadline, Dialer, Failure, Session};
use crate::spec::{Database, Detail, ProbeSpec};

/// Opens PostgreSQL connections.
pub struct PgDialer {
    db: Database,
    timeout: Duration,
}

impl PgDialer {
    /// The dialer for `spec` (a postgres probe with its database detail).
    pub fn new(spec: &ProbeSpec) -> PgDialer {
        let db = match &spec.detail {
            Detail::Database(db) => db.clone(),
            _ => Database::default(),
        };
        PgDialer {
            db,
            timeout: spec.timeout,
        }
    }
}

impl Dialer for PgDialer {
    fn dial(&mut self, addr: SocketAddr, deadline: Deadline) -> Result<Box<dyn Session>, Failure> {
        let mut cfg = Config::new();
        cfg.host(&addr.ip().to_string())
            .port(addr.port())
            .user(&self.db.user)
            .dbname(&self.db.database)
            .connect_timeout(deadline.remaining()?)
            .tcp_user_timeout(self.timeout)
            .options(&format!(
                "-c statement_timeout={}",
                self.timeout.as_millis().max(1)
            ));
        if !self.db.password.is_empty() {
            cfg.password(&self.db.password);
        }
        let client = cfg.connect(NoTls).map_err(|e| pg_failure("connect", &e))?;
        Ok(Box::new(PgSession {
            client,
            query: self.db.query.clone(),
        }))
    }
}

struct PgSession {
    client: Client,
    query: String,
}

impl Session for PgSession {
    fn request(&mut self, deadline: Deadline) -> Result<(), Failure> {
        deadline.remaining()?;
        let rows = self
            .client
            .simple_query(&self.query)
            .map_err(|e| pg_failure("query", &e))?;
        if rows.iter().any(|m| matches!(m, SimpleQueryMessage::Row(_))) {
            Ok(())
        } else {
            Err(Failure::error(format!("'{}' returned no row", self.query)))
        }
    }

    /// PostgreSQL ends a session idle past `idle_session_timeout` (or one an administrator
    /// terminates) with an error message and a close. The client reads its connection only
    /// while it is asked something, and its runtime learns that the socket has bytes only
    /// when it waits: so this waits for notifications for a millisecond (untimed, before the
    /// request), which reads what the server sent meanwhile. A connection that has ended
    /// then fails the wait. (Taking them without waiting found nothing: the socket's
    /// readiness was the runtime's from before the server wrote.)
    fn closed(&mut self) -> bool {
        let ended = {
            let mut notifications = self.client.notifications();
            let mut pending = notifications.timeout_iter(Duration::from_millis(1));
            loop {
                match pending.next() {
                    Ok(Some(_)) => {} // a NOTIFY nobody listens for
                    Ok(None) => break false,
                    Err(_) => break true,
                }
            }
        };
        ended || self.client.is_closed()
    }
}

/// A cancelled statement (the server's `statement_timeout`, set to the probe's timeout) or a
/// connect that timed out is a timeout; anything else an error with the server's message. A
/// server error whose words mention a timeout is still the server's error: "terminating
/// connection due to idle-session timeout" is the server ending a session, not the probe
/// giving up.
fn pg_failure(what: &str, e: &postgres::Error) -> Failure {
    match e.as_db_error() {
        Some(db) if *db.code() == postgres::error::SqlState::QUERY_CANCELED => Failure::Timeout,
        Some(db) => Failure::error(format!("{what}: {}", db.message())),
        None => {
            let text = e.to_string();
            if text.contains("timed out") || text.contains("timeout") {
                Failure::Timeout
            } else {
                Failure::error(format!("{what}: {text}"))
            }
        }
    }
}
