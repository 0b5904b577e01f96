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
}

/// A timed-out connect or a cancelled statement is a timeout; anything else an error with
/// the server's message.
fn pg_failure(what: &str, e: &postgres::Error) -> Failure {
    let cancelled = e
        .code()
        .is_some_and(|c| *c == postgres::error::SqlState::QUERY_CANCELED);
    let text = match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    };
    if cancelled || text.contains("timed out") || text.contains("timeout") {
        Failure::Timeout
    } else {
        Failure::error(format!("{what}: {text}"))
    }
}
