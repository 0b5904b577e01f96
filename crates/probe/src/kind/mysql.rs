//! mysql: a one-row query (default `SELECT 1`) to MySQL or MariaDB with the `mysql` client
//! crate.
//!
//! In: the address, user, password, database and query. Out: a [`Session`] per connection
//! (connect = TCP + handshake + authentication, over TCP even on loopback: the client is told
//! not to switch to the server's Unix socket); a request is the query, which must return a
//! row. The connection's read and write timeouts are the probe's timeout.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder, Row};

use super::{Deadline, Dialer, Failure, Session};
use crate::spec::{Database, Detail, ProbeSpec};

/// Opens MySQL/MariaDB connections.
pub struct MyDialer {
    db: Database,
    timeout: Duration,
}

impl MyDialer {
    /// The dialer for `spec` (a mysql probe with its database detail).
    pub fn new(spec: &ProbeSpec) -> MyDialer {
        let db = match &spec.detail {
            Detail::Database(db) => db.clone(),
            _ => Database::default(),
        };
        MyDialer {
            db,
            timeout: spec.timeout,
        }
    }
}

impl Dialer for MyDialer {
    fn dial(&mut self, addr: SocketAddr, deadline: Deadline) -> Result<Box<dyn Session>, Failure> {
        let opt = |s: &String| (!s.is_empty()).then(|| s.clone());
        let opts = OptsBuilder::new()
            .ip_or_hostname(Some(addr.ip().to_string()))
            .tcp_port(addr.port())
            .user(opt(&self.db.user))
            .pass(opt(&self.db.password))
            .db_name(opt(&self.db.database))
            .prefer_socket(false)
            .tcp_connect_timeout(Some(deadline.remaining()?))
            .read_timeout(Some(self.timeout))
            .write_timeout(Some(self.timeout));
        let conn = Conn::new(opts).map_err(|e| my_failure("connect", &e))?;
        Ok(Box::new(MySession {
            conn,
            query: self.db.query.clone(),
        }))
    }
}

struct MySession {
    conn: Conn,
    query: String,
}

impl Session for MySession {
    fn request(&mut self, deadline: Deadline) -> Result<(), Failure> {
        deadline.remaining()?;
        match self.conn.query_first::<Row, _>(&self.query) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(Failure::error(format!("'{}' returned no row", self.query))),
            Err(e) => Err(my_failure("query", &e)),
        }
    }

    /// MariaDB closes a connection idle past `wait_timeout` without a word, MySQL 8 after an
    /// error packet (`ER_CLIENT_INTERACTION_TIMEOUT`): either shows on the socket.
    fn closed(&mut self) -> bool {
        super::peer_gone(self.conn.as_raw_fd())
    }
}

fn my_failure(what: &str, e: &mysql::Error) -> Failure {
    match e {
        mysql::Error::IoError(io) => Failure::io(what, io),
        e => Failure::error(format!("{what}: {e}")),
    }
}
