//! The simulated WAL device of one core: a [`WalDir`] whose operations
//! complete only when the simulation says so, and which knows what a crash
//! leaves behind.
//!
//! Every `create`, `write_at` and `sync` the real WAL writer issues takes a
//! ticket and waits until the driver grants it ([`SimDir::grant`]), so the
//! driver decides how far the device got when the machine crashes: between
//! a write and its sync, after a header but before the first batch, in the
//! middle of a checkpoint's retirement. A grant may carry a fault: the
//! operation fails, or a write lands only a prefix. Removal completes at
//! once.
//!
//! Each file keeps its bytes as of its last sync (what survives a power
//! failure) and the writes since, in order. A removal is durable once a
//! later `create` has synced the directory (the writer's `create` does);
//! until then a power failure may bring the file back. [`SimDir::image`]
//! computes what a crash leaves: after a process crash, everything written;
//! after a power failure, the synced bytes plus a prefix of the unsynced
//! writes (the last one possibly cut at a byte, sector or page), possibly
//! with the rest of the file's new length as zeros.
//! The device checks that the writer never changes a nonzero byte that was
//! already synced (synced zeros, as in a preallocated segment, may be
//! written over).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::task::{Poll, Waker};

use rill_shard::error::{Error, Result};
use rill_shard::wal::device::{SegmentFile, WalDir};
use rill_shard::wal::log::LocalFuture;

use super::plan::DevFault;
use crate::rng::Rng;

#[derive(Debug, Default, Clone)]
struct File {
    /// The bytes as of the last sync.
    synced: Vec<u8>,
    /// Writes since the last sync, in order: `(offset, bytes)`.
    pending: Vec<(usize, Vec<u8>)>,
}

fn overlay(bytes: &mut Vec<u8>, offset: usize, data: &[u8]) {
    let end = offset + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[offset..end].copy_from_slice(data);
}

impl File {
    /// The bytes as written so far (what the OS holds).
    fn written(&self) -> Vec<u8> {
        let mut bytes = self.synced.clone();
        for (offset, data) in &self.pending {
            overlay(&mut bytes, *offset, data);
        }
        bytes
    }
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<String, File>,
    /// Removed files whose removal is not durable yet, with their synced
    /// bytes.
    removed: BTreeMap<String, Vec<u8>>,
    next_ticket: u64,
    /// Tickets below this are granted.
    granted: u64,
    wakers: BTreeMap<u64, Waker>,
    /// What each waiting ticket is (`"create"`, `"write"`, `"sync"`).
    kinds: BTreeMap<u64, &'static str>,
    faults: BTreeMap<u64, DevFault>,
    /// A fault was delivered: the log on this device has failed.
    failed: bool,
    /// The writer broke the device contract (described).
    violation: Option<String>,
    completed: u64,
}

/// One core's simulated WAL directory (cheap to clone; clones share it).
#[derive(Debug, Clone, Default)]
pub struct SimDir {
    state: Rc<RefCell<State>>,
}

fn injected(op: &'static str) -> Error {
    Error::io(op, std::io::Error::other("simulated device fault"))
}

/// The error of `op` under `fault`: a full disk reports ENOSPC.
fn failure(op: &'static str, fault: DevFault) -> Error {
    match fault {
        DevFault::Full => Error::io(op, std::io::Error::from_raw_os_error(28)),
        _ => injected(op),
    }
}

impl SimDir {
    pub fn new() -> Self {
        SimDir::default()
    }

    /// Operations issued and not yet granted.
    pub fn waiting(&self) -> u64 {
        let st = self.state.borrow();
        st.next_ticket - st.granted
    }

    /// What the oldest waiting operation is, if one waits.
    pub fn next_waiting(&self) -> Option<&'static str> {
        let st = self.state.borrow();
        st.kinds.get(&st.granted).copied()
    }

    /// Grants the oldest waiting operation, with `fault` if given. Returns
    /// false when nothing waits.
    pub fn grant(&self, fault: Option<DevFault>) -> bool {
        let mut st = self.state.borrow_mut();
        if st.next_ticket == st.granted {
            return false;
        }
        let ticket = st.granted;
        st.granted += 1;
        st.kinds.remove(&ticket);
        if let Some(fault) = fault {
            st.faults.insert(ticket, fault);
        }
        if let Some(waker) = st.wakers.remove(&ticket) {
            waker.wake();
        }
        true
    }

    /// True once a fault was delivered to the writer.
    pub fn failed(&self) -> bool {
        self.state.borrow().failed
    }

    /// A broken device contract, if the writer broke one.
    pub fn violation(&self) -> Option<String> {
        self.state.borrow().violation.clone()
    }

    /// Operations completed so far.
    pub fn completed(&self) -> u64 {
        self.state.borrow().completed
    }

    /// Bytes written but not synced, across all files.
    pub fn unsynced_bytes(&self) -> u64 {
        let st = self.state.borrow();
        st.files.values().flat_map(|f| &f.pending).map(|(_, data)| data.len() as u64).sum()
    }

    /// What a crash leaves: file name to contents (see the module doc).
    pub fn image(&self, power_loss: bool, rng: &mut Rng) -> BTreeMap<String, Vec<u8>> {
        let st = self.state.borrow();
        let mut out = BTreeMap::new();
        for (name, file) in &st.files {
            let written = file.written();
            if !power_loss {
                out.insert(name.clone(), written);
                continue;
            }
            // The unsynced writes that made it, in order: none, all, or the
            // first few and a prefix of the next, cut at a byte, a 512-byte
            // sector, a 4 KiB page, or a byte inside its data (not its
            // padding). The file may keep the length the writes gave it,
            // with zeros where their data did not land.
            let mut bytes = file.synced.clone();
            let (whole, cut) = match rng.below(5) {
                0 => (0, 0),
                1 => (file.pending.len(), 0),
                _ => {
                    let whole = rng.index(file.pending.len() + 1);
                    let next = file.pending.get(whole).map_or(&[][..], |(_, data)| &data[..]);
                    // Where the data ends (a batch is padded with zeros).
                    let data_end = next.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                    let cut = match rng.below(4) {
                        0 => rng.index(next.len() + 1),
                        1 => rng.index(next.len() + 1) / 512 * 512,
                        2 => rng.index(next.len() + 1) / 4096 * 4096,
                        _ => rng.index(data_end + 1),
                    };
                    (whole, cut)
                }
            };
            for (offset, data) in &file.pending[..whole] {
                overlay(&mut bytes, *offset, data);
            }
            if let Some((offset, data)) = file.pending.get(whole) {
                overlay(&mut bytes, *offset, &data[..cut]);
            }
            if rng.chance(1, 2) && bytes.len() < written.len() {
                bytes.resize(written.len(), 0);
            }
            out.insert(name.clone(), bytes);
        }
        if power_loss {
            for (name, synced) in &st.removed {
                if !out.contains_key(name) && rng.chance(1, 2) {
                    out.insert(name.clone(), synced.clone());
                }
            }
        }
        out
    }

    /// An operation that waits for its grant, then runs `action`.
    fn gated<T: 'static>(
        &self,
        kind: &'static str,
        action: impl FnOnce(&mut State, Option<DevFault>) -> Result<T> + 'static,
    ) -> LocalFuture<'static, Result<T>> {
        let state = self.state.clone();
        Box::pin(async move {
            let ticket = {
                let mut st = state.borrow_mut();
                st.next_ticket += 1;
                let ticket = st.next_ticket - 1;
                st.kinds.insert(ticket, kind);
                ticket
            };
            std::future::poll_fn(|cx| {
                let mut st = state.borrow_mut();
                if ticket < st.granted {
                    return Poll::Ready(());
                }
                st.wakers.insert(ticket, cx.waker().clone());
                Poll::Pending
            })
            .await;
            let mut st = state.borrow_mut();
            let fault = st.faults.remove(&ticket);
            st.completed += 1;
            let result = action(&mut st, fault);
            if result.is_err() {
                st.failed = true;
            }
            result
        })
    }
}

struct SimSegment {
    dir: SimDir,
    name: String,
}

fn write(st: &mut State, name: &str, bytes: &[u8], offset: usize) {
    let Some(file) = st.files.get_mut(name) else { return };
    let end = offset + bytes.len();
    if offset < file.synced.len() {
        // Synced zeros may be overwritten (a preallocated segment is made
        // of them); synced data may not.
        let synced_end = file.synced.len().min(end);
        let changed = file.synced[offset..synced_end]
            .iter()
            .zip(&bytes[..synced_end - offset])
            .position(|(old, new)| *old != 0 && old != new);
        if let Some(i) = changed {
            let what = format!("{name}: write at {offset} changes byte {} synced before", offset + i);
            st.violation.get_or_insert(what);
            return;
        }
    }
    file.pending.push((offset, bytes.to_vec()));
}

impl SegmentFile for SimSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        let name = self.name.clone();
        self.dir.gated("write", move |st, fault| {
            let offset = offset as usize;
            match fault {
                None => {
                    write(st, &name, &bytes, offset);
                    Ok(())
                }
                Some(fault @ (DevFault::Fail | DevFault::Full)) => Err(failure("wal write", fault)),
                Some(DevFault::Tear { keep_permille, zeros }) => {
                    let keep = bytes.len() * usize::from(keep_permille) / 1000;
                    let mut landed = bytes[..keep].to_vec();
                    if zeros {
                        landed.resize(bytes.len(), 0);
                    }
                    write(st, &name, &landed, offset);
                    Err(injected("wal write"))
                }
            }
        })
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        let name = self.name.clone();
        self.dir.gated("sync", move |st, fault| {
            if let Some(fault) = fault {
                return Err(failure("wal fdatasync", fault));
            }
            if let Some(file) = st.files.get_mut(&name) {
                file.synced = file.written();
                file.pending.clear();
            }
            Ok(())
        })
    }
}

impl WalDir for SimDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let name = name.to_string();
        let dir = self.clone();
        self.gated("create", move |st, fault| {
            if let Some(fault) = fault {
                return Err(failure("create wal segment", fault));
            }
            // Creating syncs the directory: earlier removals are durable.
            st.removed.clear();
            st.files.insert(name.clone(), File::default());
            Ok(Rc::new(SimSegment { dir, name }) as Rc<dyn SegmentFile>)
        })
    }

    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>> {
        let mut st = self.state.borrow_mut();
        if let Some(file) = st.files.remove(name) {
            st.removed.insert(name.to_string(), file.synced);
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
