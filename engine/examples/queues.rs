//! Queues: a stream used as a durable work queue. Three workers of queue
//! group `mailers` compete for its messages; an unacknowledged message
//! comes back after its visibility timeout; a poison message is nacked
//! until it reaches the group's `max_attempts` and lands in the dead
//! letters, which are then redriven; a second group, `audit`, sees every
//! message on its own (fan-out), and both backlogs end empty.
//!
//! Run with `cargo run --release -p rill --example queues [DATA_DIR]`
//! (a temporary directory when none is given).

use std::time::Duration;

use rill::{Append, Config, Create, Engine, QueuePolicy, Receive, StreamId};

fn main() -> rill::Result<()> {
    let temp = tempfile::tempdir().map_err(|e| rill::Error::io("create a temporary directory", e))?;
    let dir =
        std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(|| temp.path().to_path_buf());
    let engine = Engine::open(Config::new(&dir).cores(2).groups(8))?;
    futures::executor::block_on(async {
        let id = StreamId::new("shop", "emails")?;
        engine.create(Create::new(id.clone())).await?;
        for n in 0..6 {
            engine.append(Append::new(id.clone(), format!("email {n}"))).await?;
        }
        engine.append(Append::new(id.clone(), "poison")).await?;

        // Two attempts, then a message is a dead letter.
        engine.set_queue_policy(&id, "mailers", QueuePolicy::new().max_attempts(2)).await?;

        // Three workers take turns; each message goes to one of them.
        // Worker 0 takes two messages and "crashes" without acking them.
        let receive = |max: usize| {
            Receive::new(&id, "mailers").max_messages(max).visibility(Duration::from_millis(200))
        };
        let lost = engine.receive(receive(2)).await?;
        println!("worker 0 took {:?} and died", texts(&lost));
        for worker in 1..3 {
            for d in engine.receive(receive(2)).await? {
                handle(&engine, &id, worker, d).await?;
            }
        }

        // Once the visibility passes, worker 0's messages come back, with
        // a second attempt charged; the poison message fails again and,
        // at its second attempt, is dead-lettered.
        engine.sleep(Duration::from_millis(250)).await?;
        loop {
            let got = engine.receive(receive(4)).await?;
            if got.is_empty() {
                let b = engine.backlog(&id, "mailers").await?;
                if b.in_flight == 0 {
                    break;
                }
                engine.sleep(Duration::from_millis(50)).await?; // a nacked message's visibility
                continue;
            }
            for d in got {
                handle(&engine, &id, 1, d).await?;
            }
        }
        let b = engine.backlog(&id, "mailers").await?;
        println!("mailers: {} ready, {} in flight, {} dead", b.ready, b.in_flight, b.dead);
        for d in engine.dead_letters(&id, "mailers", 10).await? {
            println!(
                "dead letter at offset {}: {:?} after {} attempts",
                d.offset,
                text(&d.payload),
                d.attempts
            );
        }

        // Redrive puts the dead letter back with fresh attempts; this time
        // it is acknowledged (say the bug was fixed).
        println!("redriven: {}", engine.redrive_dead_letters(&id, "mailers").await?);
        for d in engine.receive(receive(1)).await? {
            println!("mailers acked {:?} on attempt {}", text(&d.payload), d.attempts);
            engine.ack(&id, "mailers", d.receipt).await?;
        }

        // Fan-out: "audit" is independent and gets every message.
        let all = engine.receive(Receive::new(&id, "audit").max_messages(100)).await?;
        println!("audit got {} messages: {:?}", all.len(), texts(&all));
        for d in &all {
            engine.ack(&id, "audit", d.receipt).await?;
        }
        for group in ["mailers", "audit"] {
            let b = engine.backlog(&id, group).await?;
            println!("{group}: {} ready, {} in flight, {} dead", b.ready, b.in_flight, b.dead);
        }
        Ok::<_, rill::Error>(())
    })?;
    futures::executor::block_on(engine.shutdown())
}

/// A worker's handling: the poison message fails (nack, retried 10 ms
/// later), every other one is sent and acked.
async fn handle(engine: &Engine, id: &StreamId, worker: usize, d: rill::Delivery) -> rill::Result<()> {
    if d.payload.as_ref() == b"poison" {
        println!("worker {worker}: {:?} failed on attempt {}", text(&d.payload), d.attempts);
        return engine.nack(id, "mailers", d.receipt, Duration::from_millis(10)).await;
    }
    println!("worker {worker}: sent {:?} (attempt {})", text(&d.payload), d.attempts);
    engine.ack(id, "mailers", d.receipt).await
}

fn text(payload: &[u8]) -> String {
    String::from_utf8_lossy(payload).into_owned()
}

fn texts(ds: &[rill::Delivery]) -> Vec<String> {
    ds.iter().map(|d| text(&d.payload)).collect()
}
