//! command: a program's run time, from spawn to exit.
//!
//! In: the program and its arguments (no shell unless asked for: `["sh", "-c", "..."]`).
//! Out: one measurement per slot; a non-zero exit status or a failure to start is an error, a
//! program still running at the deadline is killed (and reaped) and is a timeout. Its output is
//! discarded.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::{measure, Deadline, Failure, Measured, Op, Probe};

/// How often a running program is checked for exit: a finer poll costs CPU, a coarser one
/// adds up to this much to each measurement.
const POLL: Duration = Duration::from_micros(200);

/// The command probe.
pub struct CommandProbe {
    argv: Vec<String>,
}

impl CommandProbe {
    /// A probe running `argv` (non-empty; checked by the configuration).
    pub fn new(argv: &[String]) -> CommandProbe {
        CommandProbe {
            argv: argv.to_vec(),
        }
    }

    fn once(&self, deadline: Deadline) -> Result<(), Failure> {
        let (prog, args) = self
            .argv
            .split_first()
            .ok_or_else(|| Failure::error("no command"))?;
        let mut child = Command::new(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Failure::error(format!("cannot run '{prog}': {e}")))?;
        loop {
            match child.try_wait() {
                Ok(Some(st)) if st.success() => return Ok(()),
                Ok(Some(st)) => return Err(Failure::error(format!("'{prog}' ended with {st}"))),
                Ok(None) => {}
                Err(e) => return Err(Failure::error(format!("waiting for '{prog}': {e}"))),
            }
            if deadline.remaining().is_err() {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Failure::Timeout);
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Probe for CommandProbe {
    fn run(&mut self, _op: Op, timeout: Duration, out: &mut Vec<Measured>) {
        measure("default", out, || self.once(Deadline::after(timeout)));
    }
}
