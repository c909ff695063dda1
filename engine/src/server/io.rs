//! A glommio TCP stream as hyper's I/O: the adapter from futures'
//! `AsyncRead`/`AsyncWrite` to `hyper::rt::Read`/`Write`.
//!
//! glommio reads synchronously into the buffer it is given (a `recv`
//! first, a readiness poll on io_uring only when nothing is there), so a
//! read goes through one scratch buffer per core thread and is copied into
//! hyper's cursor with the safe `put_slice`; no `unsafe`, one extra copy of
//! at most [`SCRATCH_BYTES`] per read. Writes go straight through.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::io::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;
use hyper::rt::ReadBufCursor;

/// The largest read one `poll_read` does.
pub(crate) const SCRATCH_BYTES: usize = 64 * 1024;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; SCRATCH_BYTES]);
}

/// One accepted connection, for hyper.
#[derive(Debug)]
pub(crate) struct Io {
    stream: TcpStream,
}

impl Io {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Io { stream }
    }
}

impl hyper::rt::Read for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let want = buf.remaining().min(SCRATCH_BYTES);
        if want == 0 {
            return Poll::Ready(Ok(()));
        }
        let this = self.get_mut();
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            match Pin::new(&mut this.stream).poll_read(cx, &mut scratch[..want]) {
                Poll::Ready(Ok(n)) => {
                    buf.put_slice(&scratch[..n]);
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
    }
}

impl hyper::rt::Write for Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_close(cx)
    }
}
