//! A tiny HTTP/1.1 server for the Prometheus endpoint, on std::net: bound
//! to exactly the address given (no wildcard fallback), it answers
//! `GET /metrics` (and `HEAD`) with the text the caller renders at that
//! moment, 404 for other paths, 405 for other methods, 400 for requests it
//! cannot read, closing the connection after each answer. It is not a
//! general web server: no keep-alive, no chunked bodies, requests larger
//! than 8 KiB are refused.
//!
//! Each connection is served on its own thread with deadlines: the request
//! must arrive within [`REQUEST_TIMEOUT`] and the answer be taken within
//! [`WRITE_TIMEOUT`], so a client that connects and sends nothing (or
//! reads nothing) delays no other scrape; at most [`MAX_CONNECTIONS`] are
//! served at once, more are closed unanswered. The accepting thread waits
//! in poll(2) on the listener and a pipe of its own, so [`MetricsServer::stop`]
//! returns at once — it never needs a connection to wake it (with the
//! loopback down, as in a fresh network namespace, none could arrive) and
//! never waits for a connection still being served.

use crate::error::{Error, Result};
use rustix::event::{PollFd, PollFlags, poll};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const MAX_REQUEST: usize = 8192;

/// How long a client has to send its whole request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a client has to take the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections served at once; more are closed unanswered.
pub const MAX_CONNECTIONS: usize = 64;

/// A running metrics server.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    /// Written to (then closed) to make the accepting thread return.
    wake: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind `addr` (port 0: any free port) and serve `render()` on
    /// `/metrics` from a thread.
    pub fn start<F>(addr: SocketAddr, render: F) -> Result<MetricsServer>
    where
        F: Fn() -> String + Send + Sync + 'static,
    {
        let err = |source| Error::Server {
            addr: addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(addr).map_err(err)?;
        let local = listener.local_addr().map_err(err)?;
        listener.set_nonblocking(true).map_err(err)?;
        let (wake_rx, wake_tx) = rustix::pipe::pipe().map_err(|e| err(e.into()))?;
        let render = Arc::new(render);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_loop(&listener, &wake_rx, &render))
            .map_err(err)?;
        Ok(MetricsServer {
            addr: local,
            wake: Some(wake_tx),
            thread: Some(thread),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting and return: connections being served finish (or
    /// time out) on their own threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(w) = self.wake.take() {
            let _ = rustix::io::write(&w, b"x");
            // closing the pipe's end wakes the poll too
            drop(w);
        }
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

/// Accepts until the wake pipe is readable (or closed); each connection
/// gets a thread of its own.
fn accept_loop<F>(listener: &TcpListener, wake: &OwnedFd, render: &Arc<F>)
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let busy = Arc::new(AtomicUsize::new(0));
    loop {
        let mut fds = [
            PollFd::new(listener, PollFlags::IN),
            PollFd::new(wake, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        }
        if !fds[1].revents().is_empty() {
            return;
        }
        // take every connection that is waiting
        loop {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // (ECONNABORTED, EMFILE...): nothing to serve this time;
                // poll again after a pause rather than spin
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    break;
                }
            };
            if busy.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                drop(stream);
                continue;
            }
            busy.fetch_add(1, Ordering::SeqCst);
            let (render, count) = (Arc::clone(render), Arc::clone(&busy));
            let spawned = std::thread::Builder::new()
                .name("metrics-conn".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    let _ = serve(stream, &*render);
                    count.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                busy.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

fn serve(mut s: TcpStream, render: &dyn Fn() -> String) -> std::io::Result<()> {
    // (accepted sockets do not inherit the listener's O_NONBLOCK on Linux)
    s.set_nonblocking(false)?;
    s.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let complete = loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            break true;
        }
        if buf.len() > MAX_REQUEST {
            break false;
        }
        // the whole request within the deadline (not per read: a client
        // trickling a byte at a time gets no longer)
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break false;
        }
        s.set_read_timeout(Some(left))?;
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
