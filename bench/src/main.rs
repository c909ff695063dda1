//! `rill-bench`: the load generator. See the library's documentation for
//! what each profile runs, and `args` for the command line.

use rill_bench::args::{self, Command};
use rill_bench::util::Result;
use rill_bench::workloads::recovery;
use rill_bench::{quick, rill_side};

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("__child-writer") {
        // Workload G's writer: runs until it is killed.
        if let Err(e) = recovery::child_main(&raw[1..]) {
            eprintln!("rill-bench child writer: {e}");
            std::process::exit(1);
        }
        return;
    }
    if raw.first().map(String::as_str) == Some("__scale-open") {
        // The scale cells' measuring child: opens a directory, reports.
        if let Err(e) = rill_bench::scale::child_main(&raw[1..]) {
            eprintln!("rill-bench scale child: {e}");
            std::process::exit(1);
        }
        return;
    }
    if raw.first().map(String::as_str) == Some("scale") {
        if let Err(e) = rill_bench::scale::main(&raw[1..]) {
            eprintln!("rill-bench scale: {e}");
            std::process::exit(1);
        }
        return;
    }
    if raw.first().map(String::as_str) == Some("cluster") {
        if let Err(e) = rill_bench::cluster::main(&raw[1..]) {
            eprintln!("rill-bench cluster: {e}");
            std::process::exit(1);
        }
        return;
    }
    if raw.first().map(String::as_str) == Some("http") {
        if let Err(e) = rill_bench::http::main(&raw[1..]) {
            eprintln!("rill-bench http: {e}");
            std::process::exit(1);
        }
        return;
    }
    let opts = match args::parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rill-bench: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&opts, &raw) {
        eprintln!("rill-bench {}: {e}", opts.command.name());
        std::process::exit(1);
    }
}

fn run(opts: &args::Options, raw: &[String]) -> Result<()> {
    rill_side::set_wal_io(opts.wal_io);
    rill_side::set_spin(opts.spin);
    rill_bench::window::set_events(opts.events);
    std::fs::create_dir_all(&opts.dir)?;
    if opts.command == Command::Quick && !opts.load.skip {
        quick::load_and_verify(opts)?;
    }
    let suite = opts.suite(recovery::current_exe());
    println!(
        "rill-bench {}: profile {}, {} repetitions, peers: {}, data dir {}",
        opts.command.name(),
        suite.profile.name,
        suite.profile.reps,
        if suite.peers.is_empty() { "none".to_string() } else { suite.peers.join(", ") },
        opts.dir.display()
    );
    let command =
        std::iter::once("rill-bench".to_string()).chain(raw.iter().cloned()).collect::<Vec<_>>().join(" ");
    let report = rill_bench::run_and_report(&suite, &command)?;
    println!();
    println!("{}", report.markdown);
    println!("results: {}", report.written.markdown.display());
    println!("json lines: {}", report.written.jsonl.display());
    println!("plot: {}", report.written.plot.display());
    Ok(())
}
