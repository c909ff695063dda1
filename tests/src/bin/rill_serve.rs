//! `rill serve` (and `rill cluster`) as a binary of this test crate, so the
//! HTTP crash, cluster and CLI tests can run it as a child process
//! (`CARGO_BIN_EXE_rill_serve`): the same flags and the same
//! `rill::server` entry points as the `rill` binary.

use std::process::ExitCode;

use rill::server::{Cli, Subcommand as Command};

fn main() -> ExitCode {
    let outcome = match Cli::from_env().command {
        Command::Serve(args) => rill::server::run(&args),
        Command::Cluster(command) => rill::server::run_cluster(&command).map(|json| println!("{json}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("rill: {message}");
            ExitCode::FAILURE
        }
    }
}
