#!/usr/bin/env python3
"""Slow partial bodies against `katalog serve` (issue 29 item 1): CLIENTS
connections each send the headers of a POST /convert with
`Content-Length: 1000`, then `{"a":`, and stall; each reopens when the
server closes it. Meanwhile GOOD real ConversionReviews are sent, evenly
over SECONDS, each on a new connection; prints how many were answered 200.
docs/server.md ("Reviews and bytes in flight") reads a run:

    target/debug/katalog serve --katalog katalogs/crontab.yaml \\
        --listen 127.0.0.1:18443 --dev-cert-dir /tmp/katalog-slow &
    benches/slow-bodies.py 127.0.0.1:18443 --clients 70 --good 24 --seconds 25

No certificate is checked (a development server on 127.0.0.1).
"""
import argparse
import collections
import os
import socket
import ssl
import threading
import time

REVIEW = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "../crates/katalog-lang/src/conversion/testdata/conversion-review-v1.json",
)


def tls(host, port, timeout):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection((host, port), timeout=timeout)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def slow_client(host, port, stop, opened):
    head = (
        b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{\"a\":"
    )
    while not stop.is_set():
        try:
            s = tls(host, port, 5)
            s.sendall(head)
            opened[0] += 1
            s.settimeout(0.5)
            while not stop.is_set():
                try:
                    if not s.recv(4096):
                        break  # closed by the server: reopen
                except socket.timeout:
                    continue
            s.close()
        except (OSError, ssl.SSLError):
            time.sleep(0.05)


def good_request(host, port, body):
    try:
        s = tls(host, port, 10)
        s.sendall(
            b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            + body
        )
        status = s.recv(64).split(b" ")[1].decode()
        s.close()
        return status
    except (OSError, ssl.SSLError, IndexError) as e:
        return type(e).__name__


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--clients", type=int, default=70)
    p.add_argument("--good", type=int, default=24)
    p.add_argument("--seconds", type=float, default=25.0)
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)
    port = int(port)
    body = open(REVIEW, "rb").read()
    stop = threading.Event()
    opened = [0]
    threads = [
        threading.Thread(target=slow_client, args=(host, port, stop, opened), daemon=True)
        for _ in range(a.clients)
    ]
    for t in threads:
        t.start()
    time.sleep(2)  # the slow clients connect and stall
    statuses = collections.Counter()
    started = time.monotonic()
    for i in range(a.good):
        statuses[good_request(host, port, body)] += 1
        next_at = started + (i + 1) * a.seconds / a.good
        time.sleep(max(0.0, next_at - time.monotonic()))
    stop.set()
    for t in threads:
        t.join(2)
    print(
        f"good requests served: {statuses['200']}/{a.good} over {a.seconds:.0f} s "
        f"({dict(statuses)}); {a.clients} slow clients opened {opened[0]} connections"
    )


if __name__ == "__main__":
    main()
