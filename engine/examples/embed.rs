//! Embedding rill: open an engine on a data directory, create a stream,
//! append to it, read it back as bytes and as records (with their times),
//! find a record by time, follow the tail with a live read, and shut down
//! cleanly.
//!
//! Run with `cargo run --release -p rill --example embed [DATA_DIR]` (a
//! temporary directory when none is given). Every `append` below returns
//! only once its bytes are durable (the default durability).

use std::time::Duration;

use bytes::Bytes;
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

        // Several records as one append: one reply, all or nothing.
        let batch = vec![Bytes::from("order-a;"), Bytes::from("order-b;")];
        let reply = engine.append(Append::records(id.clone(), batch)).await?;
        println!("appended two records as one append, bytes [{}, {})", reply.start_offset, reply.next_offset);

        let all = engine.read(Read::new(id.clone()).max_len(1 << 20)).await?;
        println!("read {:?} (up to date: {})", String::from_utf8_lossy(&all.payload), all.up_to_date);

        // A record read starting inside a record skips to the next one.
        let records = engine.read(Read::new(id.clone()).offset(3).records(true)).await?;
        for (meta, bytes) in records.record_iter() {
            println!(
                "record at {} stamped {} ms: {:?}",
                meta.offset,
                meta.at_ms,
                String::from_utf8_lossy(&bytes)
            );
        }
        let first = records.records.first().map_or(0, |m| m.at_ms);
        println!("the first record at or after {first} ms is at {}", engine.offset_at(&id, first).await?);

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
