"""Fault handling of the scripted server: the HTTP handler and what each fault sends.

The handler reads a chat request, asks the server that owns it (process.py, seen here
through owner.py's `Owner`, so neither module imports the other) for its plan (which
rule fires, the reply, the latency), then answers as planned: a normal completion, or
one of the scripted faults (script.py `FAULTS`). The outcome is counted just before the
last bytes go out.
"""

from __future__ import annotations

import json
import math
import re
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from medrcube.testing.server.owner import Owner, _Plan
from medrcube.testing.server.script import Parsed, ScriptError, _lookup, _parse_chat
from medrcube.testing.server.wires import ANTHROPIC, GEMINI, GEMINI_ROUTE, Wire, models_listing


def _error_body(status: int, message: str, code: str | None = None) -> bytes:
    kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "invalid_request_error", 429: "rate_limit_error"}.get(status, "server_error")
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def _completion(model: str, text: str | None, finish: str = "stop", refusal: str | None = None,
                prompt_tokens: int = 0, seq: int = 0) -> dict[str, Any]:
    completion_tokens = len(text.split()) if text else 0
    return {
        "id": f"chatcmpl-scripted-{seq}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                     "message": {"role": "assistant", "content": text, "refusal": refusal}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


OPENAI = Wire("openai", ("Authorization",), lambda body, decode, path: _parse_chat(body, decode), _completion,
              _error_body, "model", lambda obj: {**obj, "choices": []},
              lambda params: int(params.get("top_logprobs") or 0) if params.get("logprobs") else None,
              lambda obj, logprobs: obj["choices"][0].update(logprobs=logprobs))
_TOKEN = re.compile(r"\s*\S+|\s+")


def _logprobs(text: str, dist: Mapping[str, float] | None, top_k: int) -> dict[str, Any]:
    """An OpenAI `choice.logprobs` for `text` (tokens: words with their leading space)."""
    content: list[dict[str, Any]] = []
    scripted = False
    for tok in _TOKEN.findall(text):
        core = tok.strip(" \t\n()[]*:.,")
        entry: dict[str, Any] = {"token": tok, "logprob": 0.0, "bytes": list(tok.encode())}
        if dist is not None and not scripted and len(core) == 1 and core.isupper():
            scripted = True
            lead = tok[: len(tok) - len(tok.lstrip())]
            entry["logprob"] = math.log(dist.get(core, 1e-9))
            ranked = sorted(dist.items(), key=lambda kv: -kv[1])[:top_k]
            entry["top_logprobs"] = [{"token": lead + k, "logprob": math.log(v), "bytes": list((lead + k).encode())}
                                     for k, v in ranked]
        else:
            entry["top_logprobs"] = [dict(entry)][:top_k]
        content.append(entry)
    return {"content": content, "refusal": None}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # 64+ clients connecting at once must not wait on SYN retries
    owner: Owner

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (timeouts, dropped connections) are the point of the exercise.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    _wire: Wire = OPENAI  # the wire of the request being answered (set by _chat)
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections
    disable_nagle_algorithm = True  # small responses must not wait on delayed ACKs
    server: _HTTPServer
    server_version = "medrcube-scripted/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # quiet: tests read stats(), not stderr

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    # -- writing --------------------------------------------------------------------

    def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None,
              content_length: int | None = None, ctype: str = "application/json") -> None:
        """Write the status line, headers and body in one send (no Nagle stalls)."""
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Status"
        lines = [f"HTTP/1.1 {status} {reason}", f"Server: {self.server_version}",
                 f"Content-Type: {ctype}",
                 f"Content-Length: {len(body) if content_length is None else content_length}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    def _abort(self) -> None:
        """Reset the connection (RST): the client sees it dropped, not closed cleanly."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _read_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    # -- routes ---------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        owner = self.server.owner
        url = urlsplit(self.path)
        if url.path == "/_stats":
            self._send_json(200, owner.stats(log="log=0" not in url.query))
        elif url.path.rstrip("/") in ("/v1/models", "/v1beta/models"):
            owner._count_other(f"GET {url.path.rstrip('/')}")
            wire = GEMINI if url.path.startswith("/v1beta") else OPENAI
            status = owner.script.models_status
            if status is not None:
                self._send(status, wire.error_body(status, f"scripted HTTP {status} for the model list", None))
                return
            # A server serves what it lists: with neither `models` nor `model` it answers any
            # name, so it lists none (a client's pre-flight then has nothing to compare).
            names = owner.script.models or ([owner.script.model] if owner.script.model else [])
            self._send_json(200, models_listing(wire.name, names))
        else:
            self._read_body()
            owner._count_other(f"GET {url.path}")
            self._send(404, _error_body(404, f"no route GET {url.path}"))

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        path = urlsplit(self.path).path
        if path == "/_reset":
            self._read_body()
            owner.reset_stats()
            self._send_json(200, {"ok": True})
        elif path == "/_script":
            try:
                owner.set_script(json.loads(self._read_body() or b"{}"))
            except (ValueError, ScriptError) as exc:
                self._send(400, _error_body(400, str(exc)))
            else:
                self._send_json(200, {"ok": True})
        elif path.rstrip("/") == "/v1/chat/completions":
            self._chat(OPENAI, path)
        elif path.rstrip("/") == "/v1/messages":
            self._chat(ANTHROPIC, path)
        elif path.startswith("/v1beta/models/") and path.endswith(GEMINI_ROUTE):
            self._chat(GEMINI, path)
        else:
            self._read_body()
            owner._count_other(f"POST {path}")
            self._send(404, _error_body(404, f"no route POST {path}"))

    def _chat(self, wire: Wire, path: str) -> None:
        owner = self.server.owner
        raw = self._read_body()
        self._wire = wire
        # Only whether the wire's key header is there; its value is never read or kept.
        auth = "present" if any(self.headers.get(h) for h in wire.auth_headers) else "absent"
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            if body.get("stream"):
                raise ValueError("the scripted server does not stream; send stream=false")
            parsed = wire.parse(body, owner.script.inspect_images, path)
        except ValueError as exc:
            owner._count_bad_request(auth)
            self._send(400, wire.error_body(400, f"invalid request body: {exc}", None))
            return
        plan = owner._begin(parsed, auth, body)
        try:
            self._execute(plan, parsed)
        finally:
            owner._end(plan, "error", None)  # a no-op unless _execute failed before recording

    def _execute(self, plan: _Plan, parsed: Parsed) -> None:
        """Answer as planned. The outcome is recorded just before the last bytes go out, so
        whatever a client has seen is already counted when it asks for stats()."""
        owner = self.server.owner
        rule = plan.rule
        spec = rule.spec if rule else {}
        fault = rule.fault if rule else None
        done = owner._end
        if fault in ("status", "reset"):
            delay = float(spec.get("delay", 0.0))
        else:
            delay = float(spec.get("delay", plan.latency))
        if delay > 0 and owner._stopping.wait(delay):
            done(plan, "stopped", None)
            self._abort()
            return
        model = owner.script.model or parsed.model
        ptoks = len(parsed.prompt.split()) + 85 * len(parsed.images)
        wire = self._wire

        def completion(text: str | None, finish: str = "stop", refusal: str | None = None) -> dict[str, Any]:
            obj = wire.completion(model, text, finish, refusal, prompt_tokens=ptoks, seq=plan.seq)
            top_k = wire.logprobs_asked(parsed.params)
            if top_k is not None and text is not None:
                _, dist = _lookup(owner.script.logprobs, parsed.question, parsed.prompt)
                wire.attach_logprobs(obj, _logprobs(text, dist, top_k))
            return obj

        if fault is None:
            body = json.dumps(completion(plan.reply)).encode()
            done(plan, "200", 200)
            self._send(200, body)
        elif fault == "status":
            status = int(spec["status"])
            headers: dict[str, str] = {}
            if "retry_after" in spec:
                ra = spec["retry_after"]
                headers["Retry-After"] = str(int(ra)) if isinstance(ra, float) and ra.is_integer() else str(ra)
            if "retry_after_ms" in spec:
                headers["retry-after-ms"] = str(spec["retry_after_ms"])
            message = spec.get("message") or f"scripted HTTP {status}"
            style = spec.get("style", "openai")
            done(plan, str(status), status)
            if style == "fastapi":  # FastAPI's HTTPException body (transformers serve)
                self._send(status, json.dumps({"detail": message}).encode(), headers)
            elif style == "text":
                self._send(status, message.encode(), headers, ctype="text/plain")
            else:
                self._send(status, wire.error_body(status, message, spec.get("code")), headers)
        elif fault == "hang":
            # Never answer: wait past the client's timeout, then close (FIN) the connection.
            owner._stopping.wait(float(spec.get("seconds", owner.script.hang_s)))
            done(plan, "hang", None)
            self.close_connection = True
        elif fault == "malformed":
            done(plan, "malformed", 200)
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [{"message": <not json>')
        elif fault == "truncated":
            full = json.dumps(completion(plan.reply)).encode()
            done(plan, "truncated", 200)
            self._send(200, full[: len(full) // 2])
        elif fault == "empty_choices":
            obj = wire.empty(completion(plan.reply))
            done(plan, "empty_choices", 200)
            self._send_json(200, obj)
        elif fault == "content_filter":
            body = json.dumps(completion(spec.get("text"), "content_filter")).encode()
            done(plan, "content_filter", 200)
            self._send(200, body)
        elif fault == "refusal":
            refusal = spec.get("text") or "I'm sorry, I can't help with that."
            body = json.dumps(completion(None, refusal=refusal)).encode()
            done(plan, "refusal", 200)
            self._send(200, body)
        elif fault == "drop":
            full = json.dumps(completion(plan.reply)).encode()
            done(plan, "drop", None)
            self._send(200, full[: len(full) // 2], content_length=len(full))
            self._abort()
        elif fault == "reset":
            done(plan, "reset", None)
            self._abort()
        elif fault == "endless":
            self._endless(plan, spec, parsed.params, completion)
        else:
            self._hostile(plan, fault, spec, completion)

    # -- hostile endpoints: answers a client must bound or refuse ------------------------

    def _hostile(self, plan: _Plan, fault: str, spec: Mapping[str, Any], completion: _Completer) -> None:
        done = self.server.owner._end
        if fault == "redirect":
            # A 307 keeps the method and the body: a client that follows it sends the
            # request (and the key, unless it strips it) to the other host.
            location = str(spec.get("location") or "http://127.0.0.1:9/v1/chat/completions")
            done(plan, "redirect", 307)
            self._send(307, self._wire.error_body(307, "moved", None), {"Location": location})
        elif fault == "drip":
            self._drip(plan, json.dumps(completion(plan.reply)).encode(), float(spec.get("interval", 1.0)))
        elif fault == "gzip_bomb":
            wire = _bomb(int(spec.get("inflated_mib", 512)), json.dumps(completion(plan.reply)).encode())
            done(plan, "gzip_bomb", 200)
            self._send(200, wire, {"Content-Encoding": "gzip"})
        elif fault == "served_model":
            obj = completion(plan.reply)
            obj[self._wire.model_key] = str(spec.get("model") or "another-model")
            done(plan, "served_model", 200)
            self._send_json(200, obj)
        elif fault == "length":
            text = spec.get("text") or plan.reply
            done(plan, "length", 200)
            self._send_json(200, completion(str(text), "length"))
        elif fault == "die":
            done(plan, "die", None)
            self.server.owner.die()
            self._abort()
        elif fault == "duplicate_key":
            # `message.content` twice ({"content": "A", "content": <reply>}): JSON readers
            # keep the last, so a client that does not refuse it grades a hidden choice.
            body = json.dumps(completion(plan.reply)).replace(
                '"content": ', f'"content": {json.dumps(str(spec.get("text", "A")))}, "content": ', 1)
            done(plan, "duplicate_key", 200)
            self._send(200, body.encode())
        elif fault == "non_finite":
            # A number JSON has no word for (NaN), which Python's reader takes: a client that
            # does not refuse it grades the reply beside it.
            body = json.dumps(completion(plan.reply)).replace("{", '{"score": NaN, ', 1)
            done(plan, "non_finite", 200)
            self._send(200, body.encode())
        elif fault == "key_echo":
            # The one place the Authorization value is read: a gateway that echoes the
            # caller's key in its answer, which the client must never write anywhere.
            given = (self.headers.get(h) for h in self._wire.auth_headers)
            key = (next((v for v in given if v), None) or "").removeprefix("Bearer ").strip()
            done(plan, "key_echo", 200)
            self._send_json(200, completion(f"{plan.reply} (request authorised with {key})"))

    def _endless(self, plan: _Plan, spec: Mapping[str, Any], params: Mapping[str, Any], completion: _Completer) -> None:
        """A model that never emits a stop token, on one inference thread: each request
        waits its turn, then "generates" the request's token limit (the server's own,
        `max_tokens` 1024, when it sends none) at `token_s` seconds per token, and ends
        with finish_reason "length". A request whose client gave up is generated all the
        same, as a real single-threaded server does."""
        owner = self.server.owner
        limit = int(params.get("max_completion_tokens") or params.get("max_tokens") or spec.get("max_tokens", 1024))
        with owner._inference:
            if owner._stopping.wait(limit * float(spec.get("token_s", 0.002))):
                owner._end(plan, "stopped", None)
                self._abort()
                return
        text = " ".join([plan.reply, *(["and"] * max(0, limit - 1))])
        owner._end(plan, "endless", 200)
        self._send_json(200, completion(text, "length"))

    def _drip(self, plan: _Plan, body: bytes, interval: float) -> None:
        """Headers at once, then the body one byte per `interval` seconds: each read is
        quick, so only a total deadline (not a read timeout) stops the client waiting."""
        owner = self.server.owner
        head = (f"HTTP/1.1 200 OK\r\nServer: {self.server_version}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
        owner._end(plan, "drip", 200)  # counted at the start: a client may never read the end
        try:
            self.wfile.write(head)
            self.wfile.flush()
            for i in range(len(body)):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                if owner._stopping.wait(interval):
                    break
        except OSError:  # the client gave up (its deadline): the point of the fault
            pass
        self.close_connection = True


_Completer = Callable[..., dict[str, Any]]
_BOMBS: dict[int, tuple[bytes, Any]] = {}  # inflated MiB -> (compressed prefix, compressor state)
_BOMBS_LOCK = threading.Lock()


def _bomb(inflated_mib: int, tail: bytes) -> bytes:
    """A gzip body that inflates to `inflated_mib` MiB of JSON whitespace followed by a
    valid completion (so a client without a cap would grade it). The whitespace is
    compressed once per size (512 MiB of spaces give about half a MiB) and the
    compressor's state copied for each request's own tail."""
    with _BOMBS_LOCK:
        hit = _BOMBS.get(inflated_mib)
        if hit is None:
            z = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip wrapper
            chunk = b" " * (1 << 20)
            prefix = b"".join(z.compress(chunk) for _ in range(max(0, inflated_mib)))
            hit = _BOMBS[inflated_mib] = (prefix, z)
    prefix, state = hit
    z = state.copy()
    return prefix + z.compress(tail) + z.flush()

