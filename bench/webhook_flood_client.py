#!/usr/bin/env python3
"""One flood client of bench/webhook_flood.py: posts AdmissionReviews of ``MB`` megabytes to
``https://127.0.0.1:PORT/mutate-pod`` back to back until its stdin closes, then prints its tallies as JSON.

Standard library only, so that it starts at once.

    python3 bench/webhook_flood_client.py PORT MB
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import threading
import time


def review_bytes(megabytes: float) -> bytes:
    """A pod CREATE review of about ``megabytes`` MB (one padded annotation)."""
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "flood",
            "operation": "CREATE",
            "namespace": "default",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"generateName": "flood-", "annotations": {"padding": ""}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    size = len(json.dumps(body))
    body["request"]["object"]["metadata"]["annotations"]["padding"] = "x" * max(0, int(megabytes * 1e6) - size)
    return json.dumps(body).encode()


def main() -> int:
    port, megabytes = int(sys.argv[1]), float(sys.argv[2])
    body = review_bytes(megabytes)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    statuses: dict[str, int] = {}
    sent = 0
    started = time.monotonic()
    conn: http.client.HTTPSConnection | None = None
    print("ready", flush=True)
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
            conn.request("POST", "/mutate-pod", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            sent += len(body)
            statuses[str(resp.status)] = statuses.get(str(resp.status), 0) + 1
            if resp.will_close:
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as exc:
            statuses[type(exc).__name__] = statuses.get(type(exc).__name__, 0) + 1
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.01)
    print(json.dumps({"statuses": statuses, "bytes": sent, "seconds": time.monotonic() - started}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
