//! Moving a group between two engines: snapshot the group that holds a
//! stream on one engine, copy the pack files its cold chunks name, install
//! the snapshot on a second engine of the same shape, and read the stream
//! back there.
//!
//! Run with `cargo run --release -p rill --example move_group` (both data
//! directories are temporary). The snapshot is taken after a cold flush, so
//! part of the stream lives in pack files: the install is refused until
//! those files are in the target's `cold/` directory, which the example
//! shows before it copies them.

use rill::{Append, Config, Create, Engine, ErrorCode, Read, StreamId};

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> rill::Error {
    move |e| rill::Error::io(what, e)
}

fn main() -> rill::Result<()> {
    let source_dir = tempfile::tempdir().map_err(io("create the source directory"))?;
    let target_dir = tempfile::tempdir().map_err(io("create the target directory"))?;
    let shape = |dir: &std::path::Path| Config::new(dir).cores(1).groups(4);
    let source = Engine::open(shape(source_dir.path()))?;
    let target = Engine::open(shape(target_dir.path()))?;

    futures::executor::block_on(async {
        let id = StreamId::new("sessions", "agent-7")?;
        source.create(Create::new(id.clone())).await?;
        for turn in 0..100 {
            source.append(Append::new(id.clone(), format!("turn {turn}\n"))).await?;
        }
        let flushed = source.flush_cold().await?;
        source.append(Append::new(id.clone(), &b"still hot\n"[..])).await?;
        let before = source.read(Read::new(id.clone()).max_len(1 << 20)).await?;

        let group = source.locate(&id).group;
        let snapshot = source.snapshot_group(group).await?;
        println!(
            "group {group}: commit index {}, {} bytes of state, {} pack file(s) ({flushed} chunk(s) flushed)",
            snapshot.commit_index,
            snapshot.bytes.len(),
            snapshot.pack_files.len()
        );

        // Without the pack files the install is refused and changes nothing.
        if !snapshot.pack_files.is_empty() {
            let refused = target.install_group_snapshot(snapshot.clone()).await.unwrap_err();
            assert_eq!(refused.code(), ErrorCode::BadRequest);
            println!("install before copying the packs: {refused}");
        }
        for name in &snapshot.pack_files {
            let from = source_dir.path().join("cold").join(name);
            let to = target_dir.path().join("cold").join(name);
            std::fs::copy(&from, &to).map_err(io("copy a pack file"))?;
        }
        let index = target.install_group_snapshot(snapshot).await?;
        let after = target.read(Read::new(id.clone()).max_len(1 << 20)).await?;
        assert_eq!(after.payload, before.payload);
        println!(
            "installed at commit index {index}; the target reads the same {} bytes",
            after.payload.len()
        );

        source.shutdown().await?;
        target.shutdown().await
    })
}
