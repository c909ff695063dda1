//! The `fuser::Filesystem` adapter: turns each kernel request into one call
//! on the shared [`Model`] and replies with its result or errno.
//!
//! Invariants: every handler replies exactly once and never panics on a
//! bad request (unknown inode, wrong kind, bad name: an errno); entry and
//! attribute timeouts are zero and no open asks the kernel to keep its
//! cache, so the kernel asks this file system for every lookup and
//! attribute; `flush` (a `close`) makes nothing durable, only `fsync`,
//! `fdatasync` and a directory's `fsync` do.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;

use super::model::{Attr, Kind, Model};

const TTL: Duration = Duration::ZERO;

/// The file system the kernel talks to.
#[derive(Debug)]
pub struct LazyFs {
    pub model: Arc<Mutex<Model>>,
}

fn errno(e: i32) -> Errno {
    Errno::from_i32(e)
}

fn file_attr(a: Attr) -> FileAttr {
    let (kind, perm, nlink) = match a.kind {
        Kind::File => (FileType::RegularFile, 0o644, 1),
        Kind::Dir => (FileType::Directory, 0o755, 2),
    };
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm,
        nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl LazyFs {
    fn entry(&self, result: Result<u64, i32>, reply: ReplyEntry) {
        let model = self.model.lock();
        match result.and_then(|ino| model.attr(ino)) {
            Ok(a) => reply.entry(&TTL, &file_attr(a), Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn empty(result: Result<(), i32>, reply: ReplyEmpty) {
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.model.lock().lookup(parent.0, name);
        self.entry(found, reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.model.lock().attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &file_attr(a)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut model = self.model.lock();
        let result = match size {
            Some(len) => model.truncate(ino.0, len),
            None => Ok(()),
        };
        // Modes, owners and times are not modelled: the attributes stay.
        match result.and_then(|()| model.attr(ino.0)) {
            Ok(a) => reply.attr(&TTL, &file_attr(a)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let created = self.model.lock().create(parent.0, name, Kind::Dir);
        self.entry(created, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::empty(self.model.lock().remove(parent.0, name, Kind::File), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::empty(self.model.lock().remove(parent.0, name, Kind::Dir), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        Self::empty(self.model.lock().rename(parent.0, name, newparent.0, newname, no_replace), reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut model = self.model.lock();
        let result = match model.attr(ino.0) {
            Ok(a) if a.kind == Kind::Dir => Err(libc::EISDIR),
            Ok(_) if flags.0 & libc::O_TRUNC != 0 => model.truncate(ino.0, 0),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut model = self.model.lock();
        match model.create(parent.0, name, Kind::File).and_then(|ino| model.attr(ino)) {
            Ok(a) => reply.created(&TTL, &file_attr(a), Generation(0), FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.model.lock().read(ino.0, offset, size as usize) {
            Ok(bytes) => reply.data(bytes),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.model.lock().write(ino.0, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        Self::empty(self.model.lock().fsync(ino.0), reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.model.lock().attr(ino.0) {
            Ok(a) if a.kind == Kind::Dir => reply.opened(FileHandle(0), FopenFlags::empty()),
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let entries = match self.model.lock().entries(ino.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(errno(e)),
        };
        let dots =
            [(OsStr::new(".").to_owned(), ino.0, Kind::Dir), (OsStr::new("..").to_owned(), ino.0, Kind::Dir)];
        for (i, (name, child, kind)) in dots.into_iter().chain(entries).enumerate().skip(offset as usize) {
            let kind = if kind == Kind::Dir { FileType::Directory } else { FileType::RegularFile };
            if reply.add(INodeNo(child), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        Self::empty(self.model.lock().fsync(ino.0), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // Plenty of room: the engine never sees a full disk here.
        reply.statfs(1 << 24, 1 << 24, 1 << 24, 1 << 20, 1 << 20, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        Self::empty(self.model.lock().attr(ino.0).map(|_| ()), reply);
    }
}
