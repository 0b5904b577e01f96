//! The `tailhunt` command: flags, dispatch, messages and exit codes. Everything else lives in
//! the library crates; this binary is the only place that prints or exits.

mod cli;
mod cmd;
mod output;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the context chain joined by ": ".
            eprintln!("tailhunt: {e:#}");
            ExitCode::from(2)
        }
    }
}
