//! Embedding rill: open an engine on a data directory, create a stream,
//! append to it, read it back, follow its tail with a live read, and shut
//! down cleanly.
//!
//! Run with `cargo run --release -p rill --example embed [DATA_DIR]` (a
//! temporary directory when none is given). Every `append` below returns
//! only once its bytes are durable (the default durability).

use std::time::Duration;

use rill::{Append, Config, Create, Engine, Read, StreamId};

fn main() -> rill::Result<()> {
    let temp = tempfile::tempdir().map_err(|e| rill::Error::io("create a temporary directory", e))?;
    let dir =
        std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(|| temp.path().to_path_buf());
    let engine = Engine::open(Config::new(&dir).cores(2).groups(8))?;
    futures::executor::block_on(async {
        let id = StreamId::new("orders", "eu-west")?;
        let created = engine.create(Create::new(id.clone())).await?;
        println!(
            "created {id:?} (already there: {}) at tail {}",
            created.already_exists, created.next_offset
        );

        for i in 0..3 {
            let reply = engine.append(Append::new(id.clone(), format!("order-{i};"))).await?;
            println!("appended bytes [{}, {})", reply.start_offset, reply.next_offset);
        }

        let all = engine.read(Read::new(id.clone()).max_len(1 << 20)).await?;
        println!("read {:?} (up to date: {})", String::from_utf8_lossy(&all.payload), all.up_to_date);

        // A live read at the tail parks until the next append lands.
        let tail = all.next_offset;
        let follower = engine.clone();
        let follow_id = id.clone();
        let live = async move {
            follower.wait_read(Read::new(follow_id).offset(tail), Duration::from_secs(5)).await
        };
        let write = async { engine.append(Append::new(id.clone(), &b"order-3;"[..])).await };
        let (seen, written) = futures::join!(live, write);
        let (seen, written) = (seen?, written?);
        println!(
            "the live read saw {:?}, appended at {}",
            String::from_utf8_lossy(&seen.payload),
            written.start_offset
        );

        let head = engine.head(&id).await?;
        println!(
            "head: tail {}, {} records in the integrity sum",
            head.tail_offset, head.integrity.live.records
        );
        engine.shutdown().await
    })
}
