//! Building responses: the body type, empty and full answers, failures.
//!
//! Every response goes through [`finish`], which adds the headers all
//! responses carry (see [`super::headers::add_common`]); a header value
//! that cannot be encoded is a bug in this crate, so builders only take
//! values made here (offsets, numbers, known content types).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body::{Frame, SizeHint};

use super::headers;
use super::status::Failure;

/// The body of every response: known bytes, or a stream of chunks made on
/// this core (not `Send`: an SSE body holds the core's context).
pub(crate) enum Body {
    Full(Option<Bytes>),
    Stream(Pin<Box<dyn Stream<Item = Bytes>>>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Full(b) => write!(f, "Body::Full({} bytes)", b.as_ref().map_or(0, Bytes::len)),
            Body::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(bytes) => {
                Poll::Ready(bytes.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(b))))
            }
            Body::Stream(stream) => {
                stream.as_mut().poll_next(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None)) || matches!(self, Body::Full(Some(b)) if b.is_empty())
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Stream(_) => SizeHint::default(),
        }
    }
}

/// An empty body.
pub(crate) fn empty_body() -> Body {
    Body::Full(None)
}

/// A body of known bytes.
pub(crate) fn full_body(bytes: Bytes) -> Body {
    Body::Full(Some(bytes))
}

/// A response under construction.
#[derive(Debug)]
pub(crate) struct Reply {
    response: Response<Body>,
}

impl Reply {
    pub(crate) fn new(status: StatusCode) -> Self {
        let mut response = Response::new(empty_body());
        *response.status_mut() = status;
        Reply { response }
    }

    /// Sets a header; values that are not valid header text are dropped
    /// with a warning (they never come from a client).
    pub(crate) fn header(mut self, name: &'static str, value: impl AsRef<str>) -> Self {
        match HeaderValue::from_str(value.as_ref()) {
            Ok(v) => {
                self.response.headers_mut().insert(HeaderName::from_static(name), v);
            }
            Err(_) => tracing::warn!(header = name, "dropped a header value that is not valid text"),
        }
        self
    }

    pub(crate) fn header_if(self, cond: bool, name: &'static str, value: impl AsRef<str>) -> Self {
        if cond {
            self.header(name, value)
        } else {
            self
        }
    }

    pub(crate) fn content_type(self, value: &str) -> Self {
        self.header(CONTENT_TYPE.as_str(), value)
    }

    pub(crate) fn body(mut self, body: Body) -> Self {
        *self.response.body_mut() = body;
        self
    }

    pub(crate) fn bytes(self, bytes: Bytes) -> Self {
        self.body(full_body(bytes))
    }

    pub(crate) fn build(self) -> Response<Body> {
        finish(self.response)
    }
}

/// Adds the common headers.
pub(crate) fn finish(mut response: Response<Body>) -> Response<Body> {
    headers::add_common(response.headers_mut());
    response
}

/// A failure as a response: status, protocol headers, `<code>: <message>`.
pub(crate) fn failure(f: &Failure) -> Response<Body> {
    let mut reply = Reply::new(f.status).content_type("text/plain; charset=utf-8");
    for (name, value) in &f.headers {
        reply = reply.header(name, value);
    }
    reply.bytes(Bytes::from(f.body())).build()
}
