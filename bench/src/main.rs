//! `rill-bench`: the load generator.
//!
//! * `quick` (the default) loads 1024 streams, reads every byte back and
//!   checks it, then runs a short version of the durable workload; see
//!   [`quick`].
//! * `durable` measures acknowledged-append throughput and commit latency
//!   with the default durability, next to the device floor measured in the
//!   same run; see [`durable`] and [`floor`].
//!
//! Both print a markdown table and append the same rows as JSON lines to
//! `<data dir>/bench-results.jsonl` ([`report`]). Arguments: [`args`].

mod args;
mod durable;
mod floor;
mod quick;
mod report;

use rill::Engine;

use crate::args::{Command, Options};
use crate::durable::BoxError;

fn main() {
    let opts = match args::parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rill-bench: {e}");
            std::process::exit(2);
        }
    };
    let outcome = match opts.command {
        Command::Quick => quick::run(&opts),
        Command::Durable => run_durable(&opts),
    };
    if let Err(e) = outcome {
        eprintln!("rill-bench {}: {e}", opts.command.name());
        std::process::exit(1);
    }
}

fn run_durable(opts: &Options) -> Result<(), BoxError> {
    let engine = Engine::open(durable::config(&opts.dir, opts.durable.wal_io))?;
    println!(
        "rill-bench durable: data dir {}, {:.1} s per cell after {:.1} s of warm-up",
        opts.dir.display(),
        opts.durable.cell.as_secs_f64(),
        opts.durable.warmup.as_secs_f64()
    );
    let measured = durable::run(&engine, &opts.dir, &opts.durable, "durable");
    let stopped = futures::executor::block_on(engine.shutdown());
    measured?;
    stopped?;
    Ok(())
}
