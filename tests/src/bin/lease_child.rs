//! The child process of the lease kill -9 test (`tests/tests/leases.rs`):
//! opens the engine on a data directory (default durability), acquires
//! consumer group `readers` of stream `b/leased` as owner `child` for an
//! hour, then appends a record and commits the new tail under the lease,
//! again and again, printing `C <generation> <offset>` after every
//! acknowledged commit, until it is killed.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use rill::{AcquireLease, Append, Config, Create, Engine, StreamId};

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: lease_child <data dir>");
        return ExitCode::from(2);
    };
    let engine = match Engine::open(Config::new(&dir).cores(2).groups(4)) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("lease_child: opening {dir}: {e}");
            return ExitCode::from(3);
        }
    };
    let result: rill::Result<()> = futures::executor::block_on(async {
        let id = StreamId::new("b", "leased")?;
        engine.create(Create::new(id.clone())).await?;
        let lease = engine
            .acquire_lease(AcquireLease::new(&id, "readers", "child").ttl(Duration::from_secs(3600)))
            .await?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "L {}", lease.generation).ok();
        out.flush().ok();
        for n in 0u64.. {
            let put = engine.append(Append::new(id.clone(), format!("record-{n};"))).await?;
            let committed = engine.commit_offset(&lease, put.next_offset).await?;
            writeln!(out, "C {} {committed}", lease.generation).ok();
            out.flush().ok();
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lease_child: {e}");
            ExitCode::from(1)
        }
    }
}
