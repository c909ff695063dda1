//! The load generator's HTTP client: hyper's HTTP/1.1 client connections
//! on tokio, one keep-alive connection per simulated client, the same for
//! every server measured.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use crate::util::Result;

/// One keep-alive connection.
#[derive(Debug)]
pub struct Conn {
    send: SendRequest<Full<Bytes>>,
    host: String,
}

/// What a request returned.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub next_offset: Option<String>,
    pub up_to_date: bool,
    pub body: Bytes,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Result<Conn> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { send, host: addr.to_string() })
    }

    /// Sends a request and returns the response with its body unread.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response<Incoming>> {
        self.send.ready().await?;
        let mut req = Request::builder().method(method).uri(path).header("host", &self.host);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        Ok(self.send.send_request(req.body(Full::new(body))?).await?)
    }

    /// Sends a request and reads the whole answer.
    pub async fn call(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Answer> {
        let response = self.send(method, path, headers, body).await?;
        let status = response.status().as_u16();
        let header =
            |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let next_offset = header("stream-next-offset");
        let up_to_date = header("stream-up-to-date").as_deref() == Some("true");
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer { status, next_offset, up_to_date, body })
    }
}
