//! The `rill` binary (feature `server`): `rill serve --dir DIR --listen ADDR`,
//! and `rill cluster ...` for a replicated server's members.
//! See `rill serve --help` and the README.

use std::process::ExitCode;

use rill::server::{Cli, Subcommand as Command};

fn main() -> ExitCode {
    let cli = Cli::from_env();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,glommio=error"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    match cli.command {
        Command::Serve(args) => match rill::server::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("rill: {message}");
                ExitCode::FAILURE
            }
        },
        Command::Cluster(command) => match rill::server::run_cluster(&command) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("rill: {message}");
                ExitCode::FAILURE
            }
        },
    }
}
