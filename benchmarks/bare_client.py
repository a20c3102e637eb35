"""The bare client of the harness comparison: `python -m benchmarks.bare_client JOBS URL C`.

The ceiling of a server and a machine: no harness, no store, no grading. It reads a JSON
file of jobs (`[{"prompt": str, "image": path or null}, ...]`, written by
`benchmarks.throughput_harnesses` from the same cube the gate asks), base64-encodes each
image file once, and sends one OpenAI chat-completions request per job from C threads,
each holding one keep-alive connection (stdlib `http.client`). It reads every answer and
counts non-200 statuses; it prints one JSON line (requests, errors) and exits 1 on any
error, so that a broken ceiling is never quoted.

`python -m benchmarks.bare_client JOBS URL C lazy` builds each body when it is sent
instead of all of them first (each image still base64'd once): for the tens of thousands
of requests of the paper-scale cube with its variants, whose bodies would not fit in memory.
"""

from __future__ import annotations

import base64
import http.client
import json
import sys
import threading
from urllib.parse import urlsplit


def _body(job: dict, model: str, encoded: dict[str, str]) -> bytes:
    """One job's request body; `encoded` holds each image's data URL (one encoding per image)."""
    content: list[dict] = [{"type": "text", "text": job["prompt"]}]
    path = job.get("image")
    if path:
        if path not in encoded:
            with open(path, "rb") as f:
                encoded[path] = "data:image/png;base64," + base64.b64encode(f.read()).decode("ascii")
        content.append({"type": "image_url", "image_url": {"url": encoded[path]}})
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 32,
            "temperature": 0}
    return json.dumps(body).encode()


def _bodies(jobs: list[dict], model: str) -> list[bytes]:
    encoded: dict[str, str] = {}
    return [_body(job, model, encoded) for job in jobs]


def main(argv: list[str] | None = None) -> int:
    args = argv or sys.argv[1:]
    jobs_path, url, concurrency = args[:3]
    lazy = args[3:4] == ["lazy"]
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    encoded: dict[str, str] = {}
    bodies = None if lazy else _bodies(jobs, "bench")
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    lock = threading.Lock()
    state = {"next": 0, "errors": 0, "done": 0}

    def worker() -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
                if i < len(jobs) and bodies is None:
                    job = jobs[i]
                    if job.get("image") and job["image"] not in encoded:
                        _body(job, "bench", encoded)  # the image's one encoding, under the lock
            if i >= len(jobs):
                break
            body = bodies[i] if bodies is not None else _body(jobs[i], "bench", encoded)
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            json.loads(resp.read())
            with lock:
                state["done"] += 1
                state["errors"] += resp.status != 200
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(int(concurrency))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"requests": state["done"], "errors": state["errors"]}))
    return 1 if state["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
