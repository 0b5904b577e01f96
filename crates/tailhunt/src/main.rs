//! The `tailhunt` command: flags, dispatch, messages and exit codes. Everything else lives in
//! the library crates; this binary is the only place that prints or exits.

/// A line for the user on stderr, as `eprintln!` writes it, except that a stderr gone away
/// (`tailhunt pcap x 2>&1 | head`, once `head` has exited) drops the line where `eprintln!`
/// panics: the exit status still says how the command ended.
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;
mod cmd;
mod flags;
mod heap;
mod ingest;
mod output;
mod progress;
mod request;
mod signals;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // A flag whose value does not read (`--duration 10x`): one line, like every other
        // error, naming the flag and what to write.
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ValueValidation | ErrorKind::InvalidValue
            ) =>
        {
            let text = e.to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                .collect();
            tell!("tailhunt: {}", line.join(" ").trim_start_matches("error: "));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    match cmd::run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        // `lab run`: a scenario did not pass (the table says why).
        Err(e) if e.is::<cmd::NotAllPassed>() => {
            tell!("tailhunt: {e}");
            ExitCode::from(1)
        }
        Err(e) if signals::is_interrupted(&e) => {
            tell!("tailhunt: {}", one_line(&e));
            ExitCode::from(signals::exit_code())
        }
        Err(e) => {
            tell!("tailhunt: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, joined by ": ", skipping a cause whose text the
/// message already contains (library errors often quote their source).
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out.replace('\n', " ")
}
