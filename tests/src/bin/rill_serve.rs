//! `rill serve` as a binary of this test crate, so the HTTP crash and CLI
//! tests can run it as a child process (`CARGO_BIN_EXE_rill_serve`): the
//! same flags and the same `rill::server::run` as the `rill` binary.

use std::process::ExitCode;

use rill::server::{Cli, Subcommand as Command};

fn main() -> ExitCode {
    match Cli::from_env().command {
        Command::Serve(args) => match rill::server::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("rill: {message}");
                ExitCode::FAILURE
            }
        },
    }
}
