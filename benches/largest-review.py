#!/usr/bin/env python3
"""The largest ConversionReview `katalog serve` accepts by default: as many
CronTabs of katalogs/crontab.yaml (v1, with managedFields, a last-applied
annotation and a status, 2.1 KB each) as fit under the 32 MiB body limit,
to stable.example.com/v2. docs/security.md ("What is protected") reads a run:

    benches/largest-review.py > /tmp/review.json          # 15,815 objects, 33.5 MB
    target/release/katalog serve --katalog katalogs/crontab.yaml --listen 127.0.0.1:18443 &
    curl -sk -o /tmp/out.json -w '%{http_code} %{time_total}s\\n' \\
        -H 'Content-Type: application/json' --data-binary @/tmp/review.json \\
        https://127.0.0.1:18443/convert
    grep VmHWM /proc/$(pgrep -f 'listen 127.0.0.1:18443')/status
"""
import json
import sys

LIMIT = 32 * 1024 * 1024 - 4096  # --body-limit default, less headroom


def crontab(i):
    spec = {
        "schedule": "0 3 * * *",
        "image": f"registry.example.com/backup:1.{i % 50}",
        "timeoutSeconds": 600,
        "concurrencyPolicy": "Forbid",
    }
    labels = {"app": "backup", "tier": "batch"}
    last = {
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": f"job-{i}", "namespace": "default", "labels": labels},
        "spec": spec,
    }
    managed = [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "stable.example.com/v1",
            "time": "2026-12-01T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                    "f:labels": {".": {}, "f:app": {}, "f:tier": {}},
                },
                "f:spec": {".": {}, "f:concurrencyPolicy": {}, "f:image": {}, "f:schedule": {}, "f:timeoutSeconds": {}},
            },
        },
        {
            "manager": "crontab-controller",
            "operation": "Update",
            "apiVersion": "stable.example.com/v1",
            "time": "2026-12-01T10:00:05Z",
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {
                    ".": {},
                    "f:conditions": {
                        ".": {},
                        'k:{"type":"Ready"}': {
                            ".": {}, "f:lastTransitionTime": {}, "f:message": {},
                            "f:reason": {}, "f:status": {}, "f:type": {},
                        },
                    },
                    "f:lastScheduleTime": {},
                }
            },
        },
    ]
    return {
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {
            "name": f"job-{i}",
            "namespace": "default",
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "resourceVersion": str(100000 + i),
            "generation": 3,
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(last) + "\n"},
            "managedFields": managed,
        },
        "spec": spec,
        "status": {
            "lastScheduleTime": "2026-12-02T03:00:00Z",
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Scheduled",
                "message": "the last run succeeded " + "x" * 200,
                "lastTransitionTime": "2026-12-02T03:00:10Z",
            }],
        },
    }


def review(n):
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "big-1",
            "desiredAPIVersion": "stable.example.com/v2",
            "objects": [crontab(i) for i in range(n)],
        },
    })


n = (LIMIT - 200) // (len(json.dumps(crontab(0))) + 1)
body = review(n)
while len(body) > LIMIT:
    n -= 50
    body = review(n)
print(f"{n} objects, {len(body)} bytes", file=sys.stderr)
sys.stdout.write(body)
