//! A recording HTTPS proxy for capturing what the apiserver really sends:
//! it listens on 127.0.0.1 with a certificate from the test CA, forwards
//! each request unchanged to a katalog server, returns its answer, and keeps
//! both bodies. Registered in place of the katalog server's URL.
//!
//! Bounded: the accept loop ends when dropped or after [`LIFETIME`]; each
//! connection serves at most [`MAX_REQUESTS`] requests and ends after
//! [`IDLE`] without one (and at once when dropped).

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use katalog_runtime::certs::tls::{self, DevCa, ReloadingCert};
use katalog_runtime::http::client::HttpsClient;
use rustls::{ServerConnection, StreamOwned};
use serde_json::Value;

const LIFETIME: Duration = Duration::from_secs(600);
const IDLE: Duration = Duration::from_secs(30);
const MAX_REQUESTS: usize = 10_000;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request and the answer it got.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub path: String,
    pub request: Value,
    pub status: u16,
    pub response: Value,
}

#[derive(Default)]
struct Shared {
    exchanges: Mutex<Vec<Exchange>>,
    connections: Mutex<Vec<TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

pub struct Recorder {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Recorder {
    /// Listens on 127.0.0.1:<ephemeral> and forwards to `upstream`.
    pub fn start(ca: &DevCa, upstream: SocketAddr) -> Recorder {
        tls::install_crypto_provider();
        let (cert, key) = ca.issue(&[]).expect("a serving certificate");
        let key = tls::certified_key_from_pem(cert.as_bytes(), key.as_bytes(), "cert", "key")
            .expect("a certified key");
        let config = Arc::new(
            tls::server_config(Arc::new(ReloadingCert::new(key))).expect("a TLS configuration"),
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let addr = listener.local_addr().expect("the bound address");
        let shared = Arc::new(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let ca_pem = ca.ca_pem().as_bytes().to_vec();
        let accept = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                // At most one pass per 10 ms of LIFETIME.
                for _ in 0..LIFETIME.as_millis() / 10 {
                    if stop.load(Ordering::SeqCst) || started.elapsed() >= LIFETIME {
                        break;
                    }
                    match listener.accept() {
                        Ok((tcp, _)) => {
                            let _ = tcp.set_nonblocking(false);
                            if let Ok(clone) = tcp.try_clone() {
                                lock(&shared.connections).push(clone);
                            }
                            let (config, shared2, ca_pem) =
                                (config.clone(), shared.clone(), ca_pem.clone());
                            let t = std::thread::spawn(move || {
                                match serve(tcp, config, upstream, &ca_pem, &shared2) {
                                    // The apiserver (or Drop) closing the connection.
                                    Err(e) if closed(&e) => {}
                                    Err(e) => eprintln!("recorder: connection failed: {e}"),
                                    Ok(()) => {}
                                }
                            });
                            lock(&shared.threads).push(t);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(e) => {
                            eprintln!("recorder: accept failed: {e}");
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            })
        };
        Recorder {
            addr,
            shared,
            stop,
            accept: Some(accept),
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Everything recorded so far, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        lock(&self.shared.exchanges).clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        for c in lock(&self.shared.connections).drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
        let threads: Vec<JoinHandle<()>> = lock(&self.shared.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

fn closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected
    )
}

struct Request {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// One HTTP/1.1 request; `None` when the client closed the connection.
fn read_request<R: BufRead>(r: &mut R) -> io::Result<Option<Request>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| invalid(format!("bad request line {line:?}")))?
        .to_string();
    let (mut content_type, mut length, mut chunked) = (String::new(), None, false);
    for _ in 0..200 {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "content-type" => content_type = v.to_string(),
                "content-length" => length = v.parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        for _ in 0..MAX_BODY {
            line.clear();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            if body.len() + size > MAX_BODY {
                return Err(invalid("body too large".into()));
            }
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = length {
        if len > MAX_BODY {
            return Err(invalid("body too large".into()));
        }
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    }
    Ok(Some(Request {
        path,
        content_type,
        body,
    }))
}

fn serve(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    upstream: SocketAddr,
    ca_pem: &[u8],
    shared: &Shared,
) -> io::Result<()> {
    tcp.set_read_timeout(Some(IDLE))?;
    tcp.set_write_timeout(Some(IDLE))?;
    let conn = ServerConnection::new(config).map_err(|e| invalid(e.to_string()))?;
    let mut stream = BufReader::new(StreamOwned::new(conn, tcp));
    let mut client = HttpsClient::new(upstream, ca_pem, "localhost")?;
    for _ in 0..MAX_REQUESTS {
        let Some(request) = read_request(&mut stream)? else {
            return Ok(());
        };
        let response = client.request(
            "POST",
            &request.path,
            Some(&request.content_type),
            &request.body,
        )?;
        lock(&shared.exchanges).push(Exchange {
            path: request.path.clone(),
            request: serde_json::from_slice(&request.body).unwrap_or(Value::Null),
            status: response.status,
            response: serde_json::from_slice(&response.body).unwrap_or(Value::Null),
        });
        let out = stream.get_mut();
        write!(
            out,
            "HTTP/1.1 {} Recorded\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n",
            response.status,
            response
                .header("content-type")
                .unwrap_or("application/json"),
            response.body.len()
        )?;
        out.write_all(&response.body)?;
        out.flush()?;
    }
    Ok(())
}
