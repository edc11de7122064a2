//! A small blocking HTTPS/1.1 client with keep-alive, verifying the server
//! against a given CA: used by the integration tests and the load tool, so
//! both speak real TLS to the server exactly as the apiserver does.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> io::Result<serde_json::Value> {
        serde_json::from_slice(&self.body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The one client certificate a test client presents.
#[derive(Debug)]
struct SingleClientCert(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for SingleClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A client bound to one server; it keeps its connection open between requests.
pub struct HttpsClient {
    config: Arc<ClientConfig>,
    addr: SocketAddr,
    server_name: ServerName<'static>,
    conn: Option<BufReader<TlsStream>>,
    timeout: Duration,
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

impl HttpsClient {
    /// Trust only the CA in `ca_pem`; `server_name` is checked against the certificate.
    pub fn new(addr: SocketAddr, ca_pem: &[u8], server_name: &str) -> io::Result<Self> {
        crate::certs::tls::install_crypto_provider();
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| invalid(format!("bad CA PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| invalid(format!("bad CA certificate: {e}")))?;
        }
        let config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| invalid(e.to_string()))?
                .with_root_certificates(roots)
                .with_no_client_auth();
        let server_name = ServerName::try_from(server_name.to_string())
            .map_err(|e| invalid(format!("bad server name: {e}")))?;
        Ok(HttpsClient {
            config: Arc::new(config),
            addr,
            server_name,
            conn: None,
            timeout: Duration::from_secs(60),
        })
    }

    /// Present this certificate chain and key (PEM) to the server (mutual TLS).
    pub fn with_client_cert(mut self, cert_pem: &[u8], key_pem: &[u8]) -> io::Result<Self> {
        let certs = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("bad client certificate PEM: {e}")))?;
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| invalid(format!("bad client key PEM: {e}")))?;
        let mut config = (*self.config).clone();
        config.client_auth_cert_resolver =
            Arc::new(SingleClientCert(Arc::new(rustls::sign::CertifiedKey::new(
                certs,
                rustls::crypto::ring::default_provider()
                    .key_provider
                    .load_private_key(key)
                    .map_err(|e| invalid(e.to_string()))?,
            ))));
        self.config = Arc::new(config);
        self.conn = None;
        Ok(self)
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// A fresh TLS connection, handshake done (for tests that write raw bytes).
    pub fn connect(&self) -> io::Result<TlsStream> {
        let tcp = TcpStream::connect_timeout(&self.addr, self.timeout)?;
        tcp.set_read_timeout(Some(self.timeout))?;
        tcp.set_write_timeout(Some(self.timeout))?;
        tcp.set_nodelay(true)?;
        let conn = ClientConnection::new(self.config.clone(), self.server_name.clone())
            .map_err(|e| invalid(e.to_string()))?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(stream)
    }

    pub fn post_json(&mut self, path: &str, body: &[u8]) -> io::Result<Response> {
        self.request("POST", path, Some("application/json"), body)
    }

    pub fn get(&mut self, path: &str) -> io::Result<Response> {
        self.request("GET", path, None, b"")
    }

    /// Send one request on the kept connection (opening one if needed). A
    /// kept connection the server has closed meanwhile is replaced once.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> io::Result<Response> {
        let reused = self.conn.is_some();
        match self.try_request(method, path, content_type, body) {
            Ok(r) => Ok(r),
            Err(e) if reused => {
                self.conn = None;
                self.try_request(method, path, content_type, body)
                    .map_err(|e2| {
                        io::Error::new(e2.kind(), format!("{e2} (after a stale connection: {e})"))
                    })
            }
            Err(e) => Err(e),
        }
    }

    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> io::Result<Response> {
        if self.conn.is_none() {
            self.conn = Some(BufReader::new(self.connect()?));
        }
        let conn = self.conn.as_mut().ok_or_else(|| invalid("no connection"))?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: katalog\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(ct) = content_type {
            head.push_str(&format!("Content-Type: {ct}\r\n"));
        }
        head.push_str("\r\n");
        let stream = conn.get_mut();
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        stream.flush()?;
        let response = read_response(conn);
        match &response {
            Ok(r)
                if r.header("connection")
                    .is_some_and(|c| c.eq_ignore_ascii_case("close")) =>
            {
                self.conn = None
            }
            Err(_) => self.conn = None,
            _ => {}
        }
        response
    }
}

/// Read one HTTP/1.1 response (Content-Length or chunked body).
pub fn read_response<R: BufRead>(r: &mut R) -> io::Result<Response> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| invalid(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}
