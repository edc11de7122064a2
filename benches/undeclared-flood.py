#!/usr/bin/env python3
"""Reviews of made-up resources against `katalog serve` (issue 31 item 1):
N ConversionReviews, each of a distinct group, kind and versions the
Katalog does not declare, on one keep-alive HTTPS connection. Prints the
server's RSS (from /proc, so the server must run on this machine), the
size and line count of /metrics and the number of /katalog stats entries
before and after. docs/security.md ("What the metrics may name") reads a
run:

    target/debug/katalog serve --katalog katalogs/crontab.yaml \\
        --listen 127.0.0.1:18643 --metrics-listen 127.0.0.1:18690 \\
        --dev-cert-dir /tmp/katalog-flood &
    benches/undeclared-flood.py 127.0.0.1:18643 127.0.0.1:18690 $! -n 10000

No certificate is checked (a development server on 127.0.0.1).
"""
import argparse
import http.client
import json
import ssl
import time
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("https", help="HOST:PORT of --listen")
    ap.add_argument("metrics", help="HOST:PORT of --metrics-listen")
    ap.add_argument("pid", type=int, help="the server's process id")
    ap.add_argument("-n", type=int, default=1000)
    a = ap.parse_args()
    host, port = a.https.rsplit(":", 1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)

    def rss_kb():
        with open(f"/proc/{a.pid}/status") as f:
            return int(next(l for l in f if l.startswith("VmRSS")).split()[1])

    def get(path):
        return urllib.request.urlopen(f"http://{a.metrics}{path}", timeout=30).read()

    def post(i):
        body = json.dumps({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": f"u{i}", "desiredAPIVersion": f"evil{i}.example.com/w{i}",
                        "objects": [{"apiVersion": f"evil{i}.example.com/v{i}",
                                     "kind": f"Kind{i}", "metadata": {"name": "x"}}]},
        })
        conn.request("POST", "/convert", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"review {i}: HTTP {r.status}")

    def report(what):
        m = get("/metrics")
        lines = m.count(b"\n")
        stats = len(json.loads(get("/katalog"))["stats"])
        print(f"{what}: rss {rss_kb()} kB, /metrics {len(m)} bytes, "
              f"{lines} lines, {stats} stats entries")

    post(0)
    report("after 1 review")
    started = time.monotonic()
    for i in range(1, a.n + 1):
        post(i)
    report(f"after {a.n + 1} reviews ({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
