//! Live subscribe: a writer appends events and closes the stream while a
//! subscriber, started after the first few, catches up on them and then
//! follows the tail until the close ends its subscription; a second
//! subscriber resumes after the last event id the first one handled half
//! way through, as a reconnecting SSE client would.
//!
//! Run with `cargo run --release -p rill --example subscribe`.

use std::time::Duration;

use rill::{Append, Config, Create, Engine, StreamId, Subscribe};

fn main() -> rill::Result<()> {
    let temp = tempfile::tempdir().map_err(|e| rill::Error::io("create a temporary directory", e))?;
    let engine = Engine::open(Config::new(temp.path()).cores(2).groups(8))?;
    let id = StreamId::new("sessions", "agent-7")?;
    futures::executor::block_on(async {
        engine.create(Create::new(id.clone()).content_type("text/plain")).await?;
        for i in 0..3 {
            engine.append(Append::new(id.clone(), format!("event {i}"))).await?;
        }
        Ok::<_, rill::Error>(())
    })?;

    // The writer keeps going on its own thread, then closes the stream.
    let writer = {
        let (engine, id) = (engine.clone(), id.clone());
        std::thread::spawn(move || {
            futures::executor::block_on(async {
                for i in 3..8 {
                    engine.sleep(Duration::from_millis(20)).await?;
                    engine.append(Append::new(id.clone(), format!("event {i}"))).await?;
                }
                engine.close(&id).await.map(|_| ())
            })
        })
    };

    futures::executor::block_on(async {
        let mut live = engine.subscribe(Subscribe::new(&id));
        let mut midway = None;
        while let Some(record) = live.next().await {
            let record = record?;
            println!("live: {} at offset {}", String::from_utf8_lossy(&record.payload), record.offset);
            if record.payload.ends_with(b"4") {
                midway = Some(record.offset);
            }
        }
        println!("the stream is closed: {}", live.is_closed());

        // A client that had handled "event 4" reconnects with its id.
        let last = midway.expect("event 4 arrived");
        let mut resumed = engine.subscribe(Subscribe::new(&id).last_event_id(last));
        while let Some(record) = resumed.next().await {
            println!("resumed: {}", String::from_utf8_lossy(&record?.payload));
        }
        Ok::<_, rill::Error>(())
    })?;
    writer.join().expect("the writer thread")?;
    futures::executor::block_on(engine.shutdown())
}
