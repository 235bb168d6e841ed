//! A tiny HTTP/1.1 server for the Prometheus endpoint, on std::net: bound
//! to exactly the address given (no wildcard fallback), it answers
//! `GET /metrics` (and `HEAD`) with the text the caller renders at that
//! moment, 404 for other paths, 405 for other methods, 400 for requests it
//! cannot read; one connection at a time, closed after each answer. It is
//! not a general web server: no keep-alive, no chunked bodies, requests
//! larger than 8 KiB are refused.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const MAX_REQUEST: usize = 8192;

/// A running metrics server.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind `addr` (port 0: any free port) and serve `render()` on
    /// `/metrics` from a thread.
    pub fn start<F>(addr: SocketAddr, render: F) -> Result<MetricsServer>
    where
        F: Fn() -> String + Send + 'static,
    {
        let err = |source| Error::Server {
            addr: addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(addr).map_err(err)?;
        let local = listener.local_addr().map_err(err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = conn {
                        let _ = serve(stream, &render);
                    }
                }
            })
            .map_err(err)?;
        Ok(MetricsServer {
            addr: local,
            stop,
            thread: Some(thread),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop serving and wait for the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // wake the accept() with a connection of our own
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn serve(mut s: TcpStream, render: &dyn Fn() -> String) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let complete = loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            break true;
        }
        if buf.len() > MAX_REQUEST {
            break false;
        }
        match s.read(&mut chunk) {
            Ok(0) => break false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => break false,
        }
    };
    let (status, body, head_only) = if !complete {
        ("400 Bad Request", "bad request\n".to_string(), false)
    } else {
        route(&buf, render)
    };
    let mut resp = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if status.starts_with("200") {
        resp.push_str(&format!("Content-Type: {CONTENT_TYPE}\r\n"));
    } else {
        resp.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    if status.starts_with("405") {
        resp.push_str("Allow: GET, HEAD\r\n");
    }
    resp.push_str("\r\n");
    s.write_all(resp.as_bytes())?;
    if !head_only {
        s.write_all(body.as_bytes())?;
    }
    s.flush()?;
    let _ = s.shutdown(Shutdown::Both);
    Ok(())
}

fn route(req: &[u8], render: &dyn Fn() -> String) -> (&'static str, String, bool) {
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return ("400 Bad Request", "bad request\n".into(), false);
    };
    if !version.starts_with("HTTP/1.") {
        return ("400 Bad Request", "bad request\n".into(), false);
    }
    let path = target.split('?').next().unwrap_or(target);
    let head = method == "HEAD";
    if method != "GET" && !head {
        return (
            "405 Method Not Allowed",
            "method not allowed\n".into(),
            false,
        );
    }
    if path != "/metrics" {
        return ("404 Not Found", "not found: try /metrics\n".into(), head);
    }
    ("200 OK", render(), head)
}
