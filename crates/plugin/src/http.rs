//! The metrics endpoint: a minimal HTTP/1.0 server on `std::net`, one thread
//! (`commlens-prom`), serving `GET /metrics` (and `/`) with the text the
//! metrics writer last published ([`Server::publish`]); other paths get 404,
//! other methods 405. Bound to `127.0.0.1` unless `COMMLENS_PLUGIN_PROM_ADDR`
//! says otherwise.
//!
//! The listener is non-blocking and polled every 20 ms, so [`Server::stop`]
//! (the end of the session, before NCCL may unload the plugin) joins the thread
//! promptly. Each request is read with a 1 s timeout and answered with
//! `Connection: close`; one slow client delays the next by at most that.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub struct Server {
    addr: SocketAddr,
    body: Arc<Mutex<Arc<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Server {
    /// Binds `addr:port` (port 0: any free port) and starts serving.
    pub fn start(addr: &str, port: u16) -> std::io::Result<Server> {
        let listener = TcpListener::bind((addr, port))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let body = Arc::new(Mutex::new(Arc::new(b"# no metrics yet\n".to_vec())));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (body.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("commlens-prom".into()).spawn(move || serve(listener, b, s))?;
        Ok(Server { addr: local, body, stop, thread })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the text served from now on.
    pub fn publish(&self, text: Vec<u8>) {
        *crate::session::lock(&self.body) = Arc::new(text);
    }

    /// Stops serving and joins the thread (the port is closed when this returns).
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}

fn serve(listener: TcpListener, body: Arc<Mutex<Arc<Vec<u8>>>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((conn, _)) => {
                let text = crate::session::lock(&body).clone();
                let _ = answer(conn, &text);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The request line's method and path, from the bytes read so far (None: incomplete).
pub fn request_line(head: &[u8]) -> Option<(&str, &str)> {
    let end = head.windows(2).position(|w| w == b"\r\n").or_else(|| head.iter().position(|&b| b == b'\n'))?;
    let line = std::str::from_utf8(&head[..end]).ok()?;
    let mut parts = line.split_ascii_whitespace();
    Some((parts.next()?, parts.next()?))
}

fn answer(mut conn: TcpStream, text: &[u8]) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(1)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    // Read until the end of the headers (the request has no body we need).
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > 16 << 10 {
            break;
        }
    }
    let (status, ctype, payload): (&str, &str, &[u8]) = match request_line(&head) {
        Some(("GET", p)) if p == "/metrics" || p == "/" || p.starts_with("/metrics?") => ("200 OK", CONTENT_TYPE, text),
        Some(("GET", _)) => ("404 Not Found", "text/plain", b"not found: the metrics are at /metrics\n"),
        Some(_) => ("405 Method Not Allowed", "text/plain", b"only GET\n"),
        None => ("400 Bad Request", "text/plain", b"bad request\n"),
    };
    let header = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        payload.len()
    );
    conn.write_all(header.as_bytes())?;
    conn.write_all(payload)?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, req: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn serves_the_published_text_and_stops() {
        let s = Server::start("127.0.0.1", 0).unwrap();
        let addr = s.local_addr();
        assert!(addr.port() != 0 && addr.ip().is_loopback());
        s.publish(b"commlens_x 1\n".to_vec());
        let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.0 200 OK\r\n"), "{r}");
        assert!(r.contains(CONTENT_TYPE) && r.contains("Content-Length: 13\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\ncommlens_x 1\n"), "{r}");
        assert!(get(addr, "GET /nope HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
        assert!(get(addr, "POST /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 405"));
        s.stop();
        assert!(TcpStream::connect(addr).is_err(), "the port is closed after stop");
    }

    #[test]
    fn request_lines() {
        assert_eq!(request_line(b"GET /metrics HTTP/1.1\r\nHost: a\r\n"), Some(("GET", "/metrics")));
        assert_eq!(request_line(b"GET /metrics"), None);
    }
}
