//! Shared by the `http_*` tests: an in-process `rill` HTTP server on a
//! temporary directory, a blocking client that returns every status as a
//! value, and a raw TCP helper for requests no well-behaved client sends.

#![allow(dead_code)]

pub mod cluster;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rill::server::{ServeOptions, Server};
use rill::{Config, Engine};

/// A server and its engine, shut down when dropped.
pub struct TestServer {
    pub engine: Engine,
    pub server: Server,
    pub base: String,
    pub dir: tempfile::TempDir,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.server.shutdown();
    }
}

/// Options for tests: a short long-poll, small bodies.
pub fn options() -> ServeOptions {
    ServeOptions {
        long_poll_timeout: Duration::from_millis(300),
        max_body_bytes: 1 << 20,
        max_read_bytes: 64 << 10,
        ..ServeOptions::default()
    }
}

/// Starts a server with `options` on an engine of one core and 8 groups
/// (`tweak` may change the engine's config).
pub fn start_with(options: ServeOptions, tweak: impl FnOnce(Config) -> Config) -> TestServer {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = tweak(Config::new(dir.path().join("data")).cores(1).groups(8));
    let engine = Engine::open(config).expect("open engine");
    let server =
        Server::start(engine.clone(), "127.0.0.1:0".parse().unwrap(), options).expect("start server");
    let base = format!("http://{}", server.local_addr());
    TestServer { engine, server, base, dir }
}

pub fn start() -> TestServer {
    start_with(options(), |c| c)
}

/// A response, whatever its status.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The stream-next-offset header, which every stream answer has.
    pub fn offset(&self) -> String {
        self.header("stream-next-offset")
            .unwrap_or_else(|| panic!("no stream-next-offset in {self:?}"))
            .to_string()
    }
}

pub fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build()
}

fn to_resp(r: ureq::Response) -> Resp {
    let status = r.status();
    let headers = r.headers_names().into_iter().map(|n| {
        let v = r.header(&n).unwrap_or("").to_string();
        (n, v)
    });
    let headers: Vec<(String, String)> = headers.collect();
    let mut body = Vec::new();
    r.into_reader().read_to_end(&mut body).expect("read body");
    Resp { status, headers, body }
}

/// Sends one request; any status comes back as a [`Resp`].
pub fn call(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut req = agent().request(method, url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let result = if body.is_empty() && matches!(method, "GET" | "HEAD" | "DELETE" | "OPTIONS") {
        req.call()
    } else {
        req.send_bytes(body)
    };
    match result {
        Ok(r) => to_resp(r),
        Err(ureq::Error::Status(_, r)) => to_resp(r),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn put(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        call("PUT", &self.url(path), headers, body)
    }

    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        call("POST", &self.url(path), headers, body)
    }

    pub fn get(&self, path: &str) -> Resp {
        call("GET", &self.url(path), &[], b"")
    }

    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        call("GET", &self.url(path), headers, b"")
    }

    pub fn head(&self, path: &str) -> Resp {
        call("HEAD", &self.url(path), &[], b"")
    }

    pub fn delete(&self, path: &str) -> Resp {
        call("DELETE", &self.url(path), &[], b"")
    }

    /// Creates a text/plain stream, asserting 201.
    pub fn create_text(&self, path: &str, body: &[u8]) -> Resp {
        let r = self.put(path, &[("content-type", "text/plain")], body);
        assert_eq!(r.status, 201, "{r:?}");
        r
    }

    /// Appends text, asserting 204.
    pub fn append_text(&self, path: &str, body: &[u8]) -> Resp {
        let r = self.post(path, &[("content-type", "text/plain")], body);
        assert_eq!(r.status, 204, "{r:?}");
        r
    }

    /// Opens a raw TCP connection to the server.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.server.local_addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }

    /// True while `/health` answers 200.
    pub fn healthy(&self) -> bool {
        call("GET", &self.url("/health"), &[], b"").status == 200
    }
}

/// Writes `bytes` and reads until the server closes or `limit` bytes came.
pub fn raw_exchange(stream: &mut TcpStream, bytes: &[u8]) -> String {
    stream.write_all(bytes).expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() > 1 << 20 {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Like [`call`], but a transport failure (refused, reset) is an `Err`.
pub fn try_call(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Resp, String> {
    let mut req = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build().request(method, url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    match req.send_bytes(body) {
        Ok(r) => Ok(to_resp(r)),
        Err(ureq::Error::Status(_, r)) => Ok(to_resp(r)),
        Err(e) => Err(e.to_string()),
    }
}

/// A `rill serve` child process (the `rill_serve` test binary), killed
/// when dropped.
pub struct Child {
    pub process: std::process::Child,
    pub base: String,
    pub stderr_path: std::path::PathBuf,
}

impl Child {
    /// Starts `rill_serve serve --dir DIR --listen 127.0.0.1:0 ARGS...` and
    /// waits for its "listening" line.
    pub fn start(bin: &str, dir: &std::path::Path, args: &[&str]) -> Result<Child, String> {
        use std::io::BufRead;
        let stderr_path = dir.with_extension(format!("stderr-{}", std::process::id()));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut process = std::process::Command::new(bin)
            .arg("serve")
            .arg("--dir")
            .arg(dir)
            .args(["--listen", "127.0.0.1:0", "--cores", "2"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn rill_serve");
        let stdout = process.stdout.take().expect("stdout");
        let mut line = String::new();
        let read = std::io::BufReader::new(stdout).read_line(&mut line);
        let stderr_text = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
        match read {
            Ok(n) if n > 0 && line.starts_with("rill listening on ") => {
                let base = line.trim().trim_start_matches("rill listening on ").to_string();
                Ok(Child { process, base, stderr_path })
            }
            _ => {
                let status = process.wait().expect("wait");
                Err(format!("exit {:?}: {}", status.code(), stderr_text()))
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.process.id().to_string();
        std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
        self.process.wait().expect("wait")
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.stderr_path);
    }
}
