//! Consumers: two members of one consumer group share four streams with
//! the coordinated reader, one of them leaves and the other takes its
//! streams over from their committed offsets; then a projection runner
//! counts every record with a handler that fails once (and is retried),
//! until it is cancelled.
//!
//! Run with `cargo run --release -p rill --example consumers [DATA_DIR]`
//! (a temporary directory when none is given).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rill::consumer::{CancelToken, FlushPolicy, ProjectionRunner, Reader, ReaderConfig, Retry};
use rill::{Append, Config, Create, Engine, StreamId};

fn main() -> rill::Result<()> {
    let temp = tempfile::tempdir().map_err(|e| rill::Error::io("create a temporary directory", e))?;
    let dir =
        std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(|| temp.path().to_path_buf());
    let engine = Engine::open(Config::new(&dir).cores(2).groups(8))?;
    futures::executor::block_on(async {
        let streams: Vec<StreamId> =
            (0..4).map(|i| StreamId::new("shop", format!("orders-{i}"))).collect::<rill::Result<_>>()?;
        for id in &streams {
            engine.create(Create::new(id.clone())).await?;
            for n in 0..3 {
                engine.append(Append::new(id.clone(), format!("{id} order {n}"))).await?;
            }
        }

        // Two members of consumer group "billing". Each claims its share
        // (two streams) at its next rebalance, a third of the lease TTL.
        let config = |member: &str| {
            ReaderConfig::new("shop", "billing", member, streams.clone())
                .lease_ttl(Duration::from_secs(3))
                .flush(FlushPolicy::new(2, Duration::from_millis(200)))
        };
        let mut a = Reader::join(&engine, config("a")).await?;
        let mut b = Reader::join(&engine, config("b")).await?;
        for _ in 0..20 {
            for r in [&mut a, &mut b] {
                if let Some(d) = r.next_timeout(Duration::from_millis(100)).await? {
                    println!("{} got {:?}", r.member(), String::from_utf8_lossy(&d.record.payload));
                    r.ack(&d).await?;
                }
            }
        }
        println!("a holds {:?}, b holds {:?}", names(&a.owned()), names(&b.owned()));

        // "a" leaves cleanly: it commits its acks and releases its leases,
        // so "b" takes over at its next rebalance, from a's committed
        // offsets, without seeing a record twice.
        a.shutdown().await?;
        engine.append(Append::new(streams[0].clone(), "late order")).await?;
        while let Some(d) = b.next_timeout(Duration::from_secs(2)).await? {
            println!("b got {:?} from {}", String::from_utf8_lossy(&d.record.payload), d.stream);
            b.ack(&d).await?;
        }
        println!("b holds {:?}", names(&b.owned()));
        b.shutdown().await?;

        // A projection: a handler per record, retried on error, acked on
        // success; cancelled from outside once it has seen everything.
        let seen = Arc::new(AtomicU64::new(0));
        let cancel = CancelToken::new();
        let (count, stop) = (seen.clone(), cancel.clone());
        let failed_once = Arc::new(AtomicU64::new(0));
        let runner = ProjectionRunner::new(&engine)
            .retry(Retry { max_attempts: 3, backoff: vec![Duration::from_millis(10)] })
            .subscribe("count", ReaderConfig::new("shop", "count", "worker", streams.clone()), move |d| {
                let (count, stop, failed_once) = (count.clone(), stop.clone(), failed_once.clone());
                async move {
                    if d.record.offset == 0 && failed_once.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err("a transient failure, retried");
                    }
                    if count.fetch_add(1, Ordering::SeqCst) + 1 == 13 {
                        stop.cancel(); // 4 streams × 3 records + the late one
                    }
                    Ok(())
                }
            });
        runner.run(cancel).await.map_err(|e| rill::Error::bad_request(e.to_string()))?;
        println!("the projection handled {} records", seen.load(Ordering::SeqCst));
        for id in &streams {
            println!("{id}: committed {:?}", engine.committed_offset(id, "count").await?);
        }
        engine.shutdown().await
    })
}

fn names(ids: &[StreamId]) -> Vec<String> {
    ids.iter().map(ToString::to_string).collect()
}
