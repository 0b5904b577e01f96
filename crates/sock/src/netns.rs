//! Entering a named network namespace (`ip netns add NAME`: `/var/run/netns/NAME`).
//!
//! In: a namespace name. Out: the calling *thread* moved into it with `setns(2)`, or an error
//! naming the namespace and the fix. [`within`] runs a closure inside a namespace and moves
//! the thread back afterwards, so objects that keep their namespace (netlink sockets) can be
//! opened in several namespaces from one thread.

use std::fs::File;
use std::os::fd::AsFd;

use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};

use crate::error::SockError;

/// Where `ip netns` keeps its namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

fn open(name: &str) -> Result<File, SockError> {
    let bad = |reason: String| SockError::Netns {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() || name.contains('/') {
        return Err(bad(
            "a namespace name has no '/': give a name from `ip netns list`".into(),
        ));
    }
    File::open(format!("{NETNS_DIR}/{name}")).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => bad(format!(
            "there is no {NETNS_DIR}/{name}: give a name from `ip netns list`"
        )),
        _ => bad(format!("{e}: run as root")),
    })
}

fn enter(file: &File, name: &str) -> Result<(), SockError> {
    move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network)).map_err(|e| {
        SockError::Netns {
            name: name.to_string(),
            reason: format!(
                "setns: {} (entering a network namespace needs root or CAP_SYS_ADMIN)",
                std::io::Error::from(e)
            ),
        }
    })
}

/// Runs `f` with the calling thread in namespace `name` (the current one when `None`), then
/// moves the thread back.
pub fn within<T>(
    name: Option<&str>,
    f: impl FnOnce() -> Result<T, SockError>,
) -> Result<T, SockError> {
    let Some(name) = name else {
        return f();
    };
    let target = open(name)?;
    let home = File::open("/proc/thread-self/ns/net").map_err(|e| SockError::Netns {
        name: name.to_string(),
        reason: format!("cannot open this thread's own namespace: {e}"),
    })?;
    enter(&target, name)?;
    let result = f();
    enter(&home, "(the original namespace)")?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_namespace_names_itself_and_the_fix() {
        let e = within(Some("no-such-ns-th"), || Ok(()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no-such-ns-th") && e.contains("ip netns list"),
            "{e}"
        );
        let e = within(Some("../etc"), || Ok(())).unwrap_err().to_string();
        assert!(e.contains("no '/'"), "{e}");
    }
}
