//! Kubernetes' CEL URL library (`k8s.io/apiserver/pkg/cel/library/urls.go`)
//! over a port of the part of Go's `net/url` it uses (Go 1.26, the
//! toolchain the kube-apiserver 1.36 and the oracle are built with).
//!
//! kube-cel parsed with the `url` crate, which follows the WHATWG URL
//! standard: it drops a scheme's default port (`http://[::1]:80/` had no
//! port), gives a relative URL the host `localhost` and an empty path `/`.
//! Go's parser keeps what was written, and the apiserver's answers follow
//! it, so this module reads a URL as Go does. Each function names the Go
//! function it follows; Go strings are bytes, so unescaped parts are kept as
//! bytes and turned into CEL strings at the accessors (a `%FF` that is not
//! UTF-8 becomes U+FFFD there, as the oracle prints it).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{FunctionContext, Value};

use super::strict::{StrictFunction, no_overload, resolved_args};

/// The encoding modes of Go's `net/url` (`encodePath`, ...): which part of
/// a URL a string is escaped or unescaped for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// Why a URL does not parse: the text of Go's error (`url.Error`'s cause).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UrlError(String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(text: impl Into<String>) -> UrlError {
    UrlError(text.into())
}

/// Go's `strconv.Quote` for the short texts in errors (close enough: the
/// texts here are ASCII or a few bytes).
fn quote(bytes: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(bytes))
}

/// `shouldEscape` (Go's `gen_encoding_table.go`, which the table in
/// `encoding_table.go` is generated from).
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// `unescape`: `%XX` decoded (and `+` as a space in a query component);
/// a `%` not followed by two hex digits is an error, and in a host only
/// non-ASCII bytes (and `%25`) may be escaped.
fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, UrlError> {
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                if i + 2 >= s.len()
                    || !s[i + 1].is_ascii_hexdigit()
                    || !s[i + 2].is_ascii_hexdigit()
                {
                    let bad = &s[i..s.len().min(i + 3)];
                    return Err(err(format!("invalid URL escape {}", quote(bad))));
                }
                let escaped = &s[i..i + 3];
                if mode == Mode::Host && unhex(s[i + 1]) < 8 && escaped != b"%25" {
                    return Err(err(format!("invalid URL escape {}", quote(escaped))));
                }
                if mode == Mode::Zone {
                    let v = unhex(s[i + 1]) << 4 | unhex(s[i + 2]);
                    if escaped != b"%25" && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(err(format!("invalid URL escape {}", quote(escaped))));
                    }
                }
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(err(format!(
                        "invalid character {} in host name",
                        quote(&s[i..=i])
                    )));
                }
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                out.push(unhex(s[i + 1]) << 4 | unhex(s[i + 2]));
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// `escape`: the bytes `mode` must not carry as `%XX` (upper-case hex), a
/// space as `+` in a query component.
fn escape(s: &[u8], mode: Mode) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &c in s {
        if c == b' ' && mode == Mode::QueryComponent {
            out.push('+');
        } else if should_escape(c, mode) {
            out.push('%');
            out.push(HEX[usize::from(c >> 4)] as char);
            out.push(HEX[usize::from(c & 15)] as char);
        } else {
            out.push(c as char);
        }
    }
    out
}

/// A URL as Go's `url.URL` holds it. Unescaped parts are bytes, the raw
/// (escaped) ones slices of the text parsed.
#[derive(Debug, Clone, Default)]
pub(super) struct GoUrl {
    scheme: String,
    opaque: String,
    /// Username and password (`None`: no `:` in the userinfo).
    user: Option<(Vec<u8>, Option<Vec<u8>>)>,
    host: Vec<u8>,
    path: Vec<u8>,
    raw_path: String,
    fragment: Vec<u8>,
    raw_fragment: String,
    raw_query: String,
    force_query: bool,
    omit_host: bool,
}

/// `getScheme`: a leading `scheme:` (`[a-zA-Z][a-zA-Z0-9+.-]*`), or none.
fn split_scheme(raw: &str) -> Result<(&str, &str), UrlError> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok(("", raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err(err("missing protocol scheme"));
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// `url.Parse`: the fragment cut off at the first `#`, the rest parsed as
/// a URL reference (relative ones too).
pub(super) fn parse(raw: &str) -> Result<GoUrl, UrlError> {
    let (u, frag) = raw.split_once('#').unwrap_or((raw, ""));
    let mut url = parse_reference(u, false)?;
    if !frag.is_empty() {
        url.set_fragment(frag)?;
    }
    Ok(url)
}

/// `url.ParseRequestURI`: an absolute URI or an absolute path, no fragment
/// (a `#` is part of the path or query).
pub(super) fn parse_request_uri(raw: &str) -> Result<GoUrl, UrlError> {
    parse_reference(raw, true)
}

/// `parse`.
fn parse_reference(raw: &str, via_request: bool) -> Result<GoUrl, UrlError> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err(err("net/url: invalid control character in URL"));
    }
    if raw.is_empty() && via_request {
        return Err(err("empty url"));
    }
    let mut url = GoUrl::default();
    if raw == "*" {
        url.path = b"*".to_vec();
        return Ok(url);
    }
    let (scheme, mut rest) = split_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();

    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        rest = before;
        url.raw_query = query.to_owned();
    }

    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // A rootless path is opaque (RFC 3986).
            url.opaque = rest.to_owned();
            return Ok(url);
        }
        if via_request {
            return Err(err("invalid URI for request"));
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err(err("first path segment in URL cannot contain colon"));
        }
    }

    if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
        && rest.starts_with("//")
    {
        let (authority, path) = match rest[2..].find('/') {
            Some(i) => (&rest[2..2 + i], &rest[2 + i..]),
            None => (&rest[2..], ""),
        };
        let (user, host) = parse_authority(&url.scheme, authority)?;
        url.user = user;
        url.host = host;
        rest = path;
    } else if !url.scheme.is_empty() && rest.starts_with('/') {
        url.omit_host = true;
    }
    url.set_path(rest)?;
    Ok(url)
}

type Userinfo = Option<(Vec<u8>, Option<Vec<u8>>)>;

/// `parseAuthority`: `[userinfo@]host[:port]`, split at the last `@`.
fn parse_authority(scheme: &str, authority: &str) -> Result<(Userinfo, Vec<u8>), UrlError> {
    let at = authority.rfind('@');
    let host = parse_host(scheme, at.map_or(authority, |i| &authority[i + 1..]))?;
    let Some(i) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..i];
    if !valid_userinfo(userinfo) {
        return Err(err("net/url: invalid userinfo"));
    }
    let user = match userinfo.split_once(':') {
        None => (unescape(userinfo.as_bytes(), Mode::UserPassword)?, None),
        Some((name, password)) => (
            unescape(name.as_bytes(), Mode::UserPassword)?,
            Some(unescape(password.as_bytes(), Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

/// `parseHost`: a bracketed IPv6 literal (with an RFC 6874 zone after
/// `%25`) and an optional port, or a name or IPv4 address and an optional
/// port; `http` and `https` hosts may have one colon only (Go 1.26's
/// default, `GODEBUG=urlstrictcolons=1`).
fn parse_host(scheme: &str, host: &str) -> Result<Vec<u8>, UrlError> {
    let open = host.rfind('[');
    if open.is_some_and(|i| i > 0) {
        return Err(err("invalid IP-literal"));
    }
    if open == Some(0) {
        let Some(close) = host.rfind(']') else {
            return Err(err("missing ']' in host"));
        };
        let colon_port = &host[close + 1..];
        if !valid_optional_port(colon_port) {
            return Err(err(format!("invalid port {colon_port:?} after host")));
        }
        let colon_port = unescape(colon_port.as_bytes(), Mode::Host)?;
        // `]` before `[` (`[]...`): Go slices the same way and fails in
        // ParseAddr on what is between.
        let hostname = host.get(1..close).unwrap_or("");
        let mut unescaped = match hostname.find("%25") {
            Some(zone) => {
                let mut h = unescape(&hostname.as_bytes()[..zone], Mode::Host)?;
                h.extend(unescape(&hostname.as_bytes()[zone..], Mode::Zone)?);
                h
            }
            None => unescape(hostname.as_bytes(), Mode::Host)?,
        };
        check_ipv6_literal(&unescaped)?;
        let mut out = b"[".to_vec();
        out.append(&mut unescaped);
        out.push(b']');
        out.extend(colon_port);
        return Ok(out);
    }
    if let Some(first) = host.find(':') {
        let last = host.rfind(':').unwrap_or(first);
        let colon = if scheme == "http" || scheme == "https" {
            first
        } else {
            last
        };
        let colon_port = &host[colon..];
        if !valid_optional_port(colon_port) {
            return Err(err(format!("invalid port {colon_port:?} after host")));
        }
    }
    unescape(host.as_bytes(), Mode::Host)
}

/// What `parseHost` asks of the text between brackets: `netip.ParseAddr`
/// reads it as an IPv6 address (with an optional non-empty zone after
/// `%`), not an IPv4 one.
fn check_ipv6_literal(text: &[u8]) -> Result<(), UrlError> {
    let text = std::str::from_utf8(text).map_err(|_| {
        err(format!(
            "invalid host: ParseAddr({}): unexpected character",
            quote(text)
        ))
    })?;
    let invalid = |why: &str| err(format!("invalid host: ParseAddr({text:?}): {why}"));
    let (addr, zone) = match text.find('%') {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    if !addr.contains(':') {
        return if zone.is_none() && addr.parse::<std::net::Ipv4Addr>().is_ok() {
            Err(err("invalid IP-literal"))
        } else {
            Err(invalid("unable to parse IP"))
        };
    }
    if zone == Some("") {
        return Err(invalid("zone must be a non-empty string"));
    }
    addr.parse::<std::net::Ipv6Addr>()
        .map(|_| ())
        .map_err(|_| invalid("unable to parse IP"))
}

/// `validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// `validUserinfo`: RFC 3986's userinfo characters, and `@`.
fn valid_userinfo(s: &str) -> bool {
    s.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    })
}

/// `validEncoded`.
fn valid_encoded(s: &str, mode: Mode) -> bool {
    s.bytes().all(|c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c, mode)
    })
}

/// `splitHostPort` (the `url.URL` method's): a valid numeric port after the
/// last colon, and the brackets of an IPv6 literal removed.
fn split_host_port(host_port: &[u8]) -> (&[u8], &[u8]) {
    let mut host = host_port;
    let mut port: &[u8] = b"";
    if let Some(colon) = host.iter().rposition(|&b| b == b':')
        && host[colon + 1..].iter().all(u8::is_ascii_digit)
    {
        (host, port) = (&host_port[..colon], &host_port[colon + 1..]);
    }
    if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
        host = &host[1..host.len() - 1];
    }
    (host, port)
}

impl GoUrl {
    /// `setPath`: the path unescaped, and the text kept when the default
    /// escaping would not give it back.
    fn set_path(&mut self, p: &str) -> Result<(), UrlError> {
        self.path = unescape(p.as_bytes(), Mode::Path)?;
        self.raw_path = if escape(&self.path, Mode::Path) == p {
            String::new()
        } else {
            p.to_owned()
        };
        Ok(())
    }

    /// `setFragment`.
    fn set_fragment(&mut self, f: &str) -> Result<(), UrlError> {
        self.fragment = unescape(f.as_bytes(), Mode::Fragment)?;
        self.raw_fragment = if escape(&self.fragment, Mode::Fragment) == f {
            String::new()
        } else {
            f.to_owned()
        };
        Ok(())
    }

    /// `URL.EscapedPath`.
    pub(super) fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(self.raw_path.as_bytes(), Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return "*".to_owned();
        }
        escape(&self.path, Mode::Path)
    }

    /// `URL.EscapedFragment`.
    fn escaped_fragment(&self) -> String {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(self.raw_fragment.as_bytes(), Mode::Fragment)
                .is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }

    pub(super) fn scheme(&self) -> &str {
        &self.scheme
    }

    /// `URL.Host`: host and port as written (unescaped).
    pub(super) fn host(&self) -> String {
        String::from_utf8_lossy(&self.host).into_owned()
    }

    /// `URL.Hostname`.
    pub(super) fn hostname(&self) -> String {
        String::from_utf8_lossy(split_host_port(&self.host).0).into_owned()
    }

    /// `URL.Port`.
    pub(super) fn port(&self) -> String {
        String::from_utf8_lossy(split_host_port(&self.host).1).into_owned()
    }

    /// `URL.Query` (`ParseQuery` with its errors dropped): each
    /// `&`-separated `key=value`, unescaped, values in their order; a pair
    /// with a `;` or a bad escape is left out, and a query of more than
    /// 10,000 pairs gives nothing.
    pub(super) fn query(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if self.raw_query.matches('&').count() + 1 > 10_000 {
            return out;
        }
        for pair in self.raw_query.split('&') {
            if pair.contains(';') || pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(key), Ok(value)) = (
                unescape(key.as_bytes(), Mode::QueryComponent),
                unescape(value.as_bytes(), Mode::QueryComponent),
            ) else {
                continue;
            };
            out.entry(String::from_utf8_lossy(&key).into_owned())
                .or_default()
                .push(String::from_utf8_lossy(&value).into_owned());
        }
        out
    }

    /// `URL.String`: the URL written back (the apiserver compares URLs by
    /// it).
    pub(super) fn to_go_string(&self) -> String {
        let mut buf = String::new();
        if !self.scheme.is_empty() {
            buf.push_str(&self.scheme);
            buf.push(':');
        }
        if !self.opaque.is_empty() {
            buf.push_str(&self.opaque);
        } else {
            // An empty host is left out when the text had none (OmitHost).
            let has_authority =
                !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some();
            let omitted = self.omit_host && self.host.is_empty() && self.user.is_none();
            if has_authority && !omitted {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    buf.push_str("//");
                }
                if let Some((name, password)) = &self.user {
                    buf.push_str(&escape(name, Mode::UserPassword));
                    if let Some(password) = password {
                        buf.push(':');
                        buf.push_str(&escape(password, Mode::UserPassword));
                    }
                    buf.push('@');
                }
                buf.push_str(&escape(&self.host, Mode::Host));
            }
            let path = self.escaped_path();
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                buf.push('/');
            }
            if buf.is_empty() && path.split('/').next().unwrap_or("").contains(':') {
                buf.push_str("./");
            }
            buf.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push('?');
            buf.push_str(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push('#');
            buf.push_str(&self.escaped_fragment());
        }
        buf
    }
}

/// A `kubernetes.URL` value: equal to another when their `URL.String()`
/// are (`apiservercel.URL.Equal`).
#[derive(Debug)]
pub(super) struct KubeUrl(GoUrl);

impl PartialEq for KubeUrl {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_go_string() == other.0.to_go_string()
    }
}

impl Eq for KubeUrl {}

impl kube_cel::cel::objects::Opaque for KubeUrl {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

/// `url(<string>) -> URL` (`stringToUrl`): the text must pass
/// `ParseRequestURI`, and is then read with `Parse` (which cuts the
/// fragment off).
pub(super) fn url() -> StrictFunction {
    Box::new(|ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        let (None, [Value::String(text)]) = (&ftx.this, args.as_slice()) else {
            return Err(no_overload(ftx, ftx.this.as_ref(), &args));
        };
        let parsed = parse_request_uri(text)
            .and_then(|_| parse(text))
            .map_err(|e| {
                ftx.error(format!(
                    "URL parse error during conversion from string: parse {:?}: {e}",
                    text.as_str()
                ))
            })?;
        Ok(Value::Opaque(Arc::new(KubeUrl(parsed))))
    })
}

/// `isURL(<string>) -> bool`: whether `ParseRequestURI` accepts it.
pub(super) fn is_url() -> StrictFunction {
    Box::new(|ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        match (&ftx.this, args.as_slice()) {
            (None, [Value::String(text)]) => Ok(Value::Bool(parse_request_uri(text).is_ok())),
            _ => Err(no_overload(ftx, ftx.this.as_ref(), &args)),
        }
    })
}

/// The accessors of a URL, by their CEL names.
#[allow(clippy::type_complexity)]
pub(super) const ACCESSORS: [(&str, fn(&GoUrl) -> Value); 6] = [
    ("getScheme", |u| string(u.scheme().to_owned())),
    ("getHost", |u| string(u.host())),
    ("getHostname", |u| string(u.hostname())),
    ("getPort", |u| string(u.port())),
    ("getEscapedPath", |u| string(u.escaped_path())),
    ("getQuery", |u| {
        let map = u
            .query()
            .into_iter()
            .map(|(k, v)| {
                let values = v.into_iter().map(string).collect();
                (Key::String(Arc::new(k)), Value::List(Arc::new(values)))
            })
            .collect();
        Value::Map(Map { map: Arc::new(map) })
    }),
];

fn string(s: String) -> Value {
    Value::String(Arc::new(s))
}

/// The CEL function for an accessor of [`ACCESSORS`]: a method of a URL,
/// without arguments.
pub(super) fn accessor(get: fn(&GoUrl) -> Value) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        let url = match (&ftx.this, args.as_slice()) {
            (Some(Value::Opaque(o)), []) => o.downcast_ref::<KubeUrl>(),
            _ => None,
        };
        match url {
            Some(url) => Ok(get(&url.0)),
            None => Err(no_overload(ftx, ftx.this.as_ref(), &args)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (scheme, host, hostname, port, escaped path, String()) of `Parse`.
    fn parts(raw: &str) -> Result<(String, String, String, String, String, String), UrlError> {
        let u = parse(raw)?;
        Ok((
            u.scheme().to_owned(),
            u.host(),
            u.hostname(),
            u.port(),
            u.escaped_path(),
            u.to_go_string(),
        ))
    }

    #[test]
    fn parses_as_go_net_url() {
        // (input, scheme, host, hostname, port, escaped path): answers of
        // Go 1.26's net/url.
        let cases = [
            ("http://[::1]:80/", "http", "[::1]:80", "::1", "80", "/"),
            (
                "https://example.com",
                "https",
                "example.com",
                "example.com",
                "",
                "",
            ),
            ("/a/b", "", "", "", "", "/a/b"),
            (
                "HTTP://Ex.com:8080/a%2Fb?q=1#f",
                "http",
                "Ex.com:8080",
                "Ex.com",
                "8080",
                "/a%2Fb",
            ),
            (
                "https://[fe80::1%25en0]:443/x",
                "https",
                "[fe80::1%en0]:443",
                "fe80::1%en0",
                "443",
                "/x",
            ),
            ("https://user:pw@host/", "https", "host", "host", "", "/"),
            ("https://h/a b", "https", "h", "h", "", "/a%20b"),
            ("https://h/π", "https", "h", "h", "", "/%CF%80"),
            ("https://h:/", "https", "h:", "h", "", "/"),
            ("mailto:a@b", "mailto", "", "", "", ""),
            ("x://a:1:2/", "x", "a:1:2", "a:1", "2", "/"),
        ];
        for (raw, scheme, host, hostname, port, path) in cases {
            let (s, h, hn, p, ep, _) = parts(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(
                (s.as_str(), h.as_str(), hn.as_str(), p.as_str(), ep.as_str()),
                (scheme, host, hostname, port, path),
                "{raw}"
            );
        }
    }

    #[test]
    fn refuses_as_go_net_url() {
        for raw in [
            "http://a:1:2/",
            "https://[::1",
            "https://[1.2.3.4]/",
            "https://a[::1]/",
            "http://h/%zz",
            "http://h%41/",
            "http://h:port/",
            "http://a b/",
            "http://\u{7f}/",
            ":foo",
            "http://[fe80::1%25]/",
            "http://us er@h/",
        ] {
            assert!(parse(raw).is_err(), "{raw} parses");
        }
        for raw in ["", "a/b", "./x", "http://a#b/"] {
            assert!(parse_request_uri(raw).is_err(), "{raw}");
        }
        // An opaque URL, and `//h/p` read as a path (Parse reads a host).
        for raw in ["a:b", "a:b/c#", "//h/p", "*"] {
            assert!(parse_request_uri(raw).is_ok(), "{raw}");
        }
        assert!(
            parse("a/b").is_ok() && parse("http://a#b/").is_ok(),
            "relative references"
        );
    }

    #[test]
    fn writes_back_as_go() {
        for (raw, written) in [
            (
                "HTTP://u%40:p@H/a%2fb?x#y z",
                "http://u%40:p@H/a%2fb?x#y%20z",
            ),
            ("file:///etc", "file:///etc"),
            ("a:b", "a:b"),
            ("https://h?", "https://h?"),
            ("/x:y", "/x:y"),
        ] {
            assert_eq!(
                parse(raw).map(|u| u.to_go_string()),
                Ok(written.to_owned()),
                "{raw}"
            );
        }
    }

    #[test]
    fn reads_queries_as_go() {
        let u = parse("https://h/?a=1&a=2&b&c=%zz&d;e=1&=v&f=x+y%20").expect("parses");
        let q = u.query();
        assert_eq!(q["a"], ["1", "2"]);
        assert_eq!(q["b"], [""]);
        assert_eq!(q[""], ["v"]);
        assert_eq!(q["f"], ["x y "]);
        assert!(!q.contains_key("c") && !q.contains_key("d;e"));
    }

    proptest::proptest! {
        /// Awkward text (unicode, brackets, zones, escapes, empty parts)
        /// never panics any step, and what parses writes back and reads
        /// again.
        #[test]
        fn never_panics(raw in "[a-zA-Z0-9:/?#\\[\\]@%25!$&'()*+,;=. _~πé\u{0}-\u{7f}-]{0,40}") {
            for u in [parse(&raw), parse_request_uri(&raw)].into_iter().flatten() {
                let _ = (u.host(), u.hostname(), u.port(), u.escaped_path(), u.query());
                let _ = parse(&u.to_go_string());
            }
        }

        /// URLs built from awkward parts (IPv6 literals with zones, escapes
        /// in every part, empty parts, unicode): no panic, and what Parse
        /// accepts writes back to a URL Parse reads the same.
        #[test]
        fn shaped_urls_never_panic(
            scheme in "(|http:|HTTPS:|x+y:|1a:|:)",
            slashes in "(|/|//|///)",
            user in "(|u@|u:p@|%zz@|@@|u%40:@|é@)",
            host in "(|h|H.é|\\[::1\\]|\\[fe80::1%25en0\\]|\\[fe80::1%25\\]|\\[1.2.3.4\\]|\\[::ffff:1.2.3.4\\]|\\[|h%41|h%C3%A9|a:b)",
            port in "(|:|:80|:x|:1:2)",
            path in "(|/|/a b|/%2F|/%zz|/π|/\\*|/a;b)",
            query in "(|\\?|\\?a=1&a=%FF&b|\\?;|\\?&&=)",
            fragment in "(|#|#f%20g|#%zz|#é)",
        ) {
            let raw = format!("{scheme}{slashes}{user}{host}{port}{path}{query}{fragment}");
            if let Ok(u) = parse_request_uri(&raw) {
                let _ = (u.host(), u.hostname(), u.port(), u.escaped_path(), u.query());
            }
            // (A request URI keeps a `#` that Parse would cut: only Parse's
            // results write back.)
            if let Ok(u) = parse(&raw) {
                let _ = (u.host(), u.hostname(), u.port(), u.escaped_path(), u.query());
                let written = u.to_go_string();
                if let Ok(again) = parse(&written) {
                    proptest::prop_assert_eq!(again.to_go_string(), written, "{}", raw);
                }
            }
        }
    }
}
