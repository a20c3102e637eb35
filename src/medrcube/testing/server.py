"""A local OpenAI-compatible chat server whose answers, latency and faults are scripted.

It serves `POST /v1/chat/completions` and `GET /v1/models` on 127.0.0.1 so that tests
and benchmarks drive the real `openai` client end to end, plus three control endpoints:
`GET /_stats` (the counters below, as JSON; `?log=0` leaves out the per-request log),
`POST /_reset` (zero the counters and the fault rules' counts) and `POST /_script`
(replace the script with the JSON body).

In-process::

    with ScriptedServer({"answers": {"Which organ?": "B"}, "latency": 0.2}) as srv:
        client = AsyncOpenAI(base_url=srv.base_url, api_key="x")   # base_url ends in /v1
        ...
        srv.stats()["total"]

As a separate process (for SIGKILL and restart tests; the first stdout line is the base
URL, then it serves until killed)::

    python -m medrcube.testing.server --script script.json [--port 0] [--host 127.0.0.1]

The script (a JSON object; every key optional)::

    {
      "default": "A",                  # the reply when nothing below decides
      "answers": {"<question>": "<reply>"},
          # <question> matches the text between "Question:" and "Options:" of the prompt
          # exactly, or else is a substring of the prompt text
      "answer_key": {"<question>": "<correct option text>" | <option index>},
          # reply with the letter under which that option appears in THIS prompt's
          # option list ("A. ...", "B) ..."), so it stays right when options are rotated
      "reply_format": "{letter}",      # how an answer_key reply is written
      "latency": 0.2 | {"fixed": 0.2} | {"uniform": [0.1, 0.3]},   # seconds, per request
      "latency_by_question": {"<question>": <latency as above>},
      "faults": [<rule>, ...],         # the first rule that fires decides the request
      "models": ["m1"],                # if given: other model names get 404 model_not_found
      "model": "name",                 # the model name reported back (default: the request's)
      "require_auth": false,           # true: a request without Authorization gets 401
      "hang_s": 3600,                  # default duration of a "hang" fault
      "seed": 0,                       # random latency and fault fractions are reproducible
      "inspect_images": true,          # decode image headers to record size and digest
      "log_limit": 100000,             # at most this many entries in the request log
      "logprobs": {"<question>": {"A": 0.7, "B": 0.2, "C": 0.1}}
          # served when a request asks `logprobs: true` (and `top_logprobs: K`): at the
          # first token of the reply that is an option letter, the top K letters with
          # these probabilities (the emitted letter's own logprob from the same table);
          # every other token, and every reply without an entry, has logprob 0
    }

A fault rule::

    {"fault": "status", "status": 429,   # any HTTP status, with an OpenAI-style error body
     "retry_after": 1 | "Wed, 21 Oct 2015 07:28:00 GMT",  # Retry-After header, verbatim
     "retry_after_ms": 150,              # retry-after-ms header
     "message": "...", "code": "...",    # the error body's message and code
     "match": "<question>",             # only requests matching it (as for answers)
     "first": 3,                         # only the first N matching requests ...
     "after": 0,                         # ... after skipping M of them
     "per_prompt": false,                # count first/after separately per distinct request
     "fraction": 0.5,                    # then fire with this probability (seeded)
     "delay": 0.0}                       # seconds to wait before answering (default 0)

and with "fault" one of: "status"; "hang" ("seconds", default hang_s: no answer, then
the connection is closed); "malformed" (200 with a body that is not JSON); "truncated"
(200 whose JSON body is cut in half, Content-Length consistent); "empty_choices";
"content_filter" (finish_reason "content_filter", content "text" or null); "refusal"
(message.refusal set, content null; "text" gives it); "drop" (headers and half the body
sent, then the connection is reset); "reset" (the connection is reset before any
response). Apart from "status" and "reset", a fault waits the scripted latency first.

In process, `ScriptedServer(script, reply=fn)` also takes a callable
`fn(prompt: str, body: dict) -> str | None` consulted before `answers` (None: fall through).

Statistics (`.stats()` or `GET /_stats`): `total` chat requests; `by_fault` (counted
when a request arrives); `by_status` (HTTP status sent, as a string key) and `by_outcome`
("200", "429", ..., "hang", "drop", "reset"), both counted when the request ends, just
before its last bytes go out (so a hang still hanging is in `by_fault` and `in_flight`); `by_question`, `by_prompt` (sha256 of the prompt text, 16 hex digits) and
`by_request` (the same over model, prompt and image digests) request counts; `answered`
(successful answers per request hash) and `duplicates` (answers beyond the first for the
same request); `models`; `auth` ({"present": n, "absent": n}: the Authorization header's
value is never looked at or kept); `images` ({"with": n, "without": n, "total": n});
`in_flight`, `max_in_flight`; `other` (requests to other endpoints); and `requests`, the
per-request log: seq, t_start, t_end (seconds since the server started), model,
question, prompt_hash, request_hash, images ([{mime, bytes, width, height, sha256}]),
auth, params (every body key except messages), outcome, status.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import copy
import hashlib
import io
import json
import math
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ScriptedServer", "ServerProcess", "Script", "ScriptError", "question_of", "serve_main"]

ReplyFn = Callable[[str, Mapping[str, Any]], "str | None"]

FAULTS = ("status", "hang", "malformed", "truncated", "empty_choices", "content_filter", "refusal", "drop", "reset")
_SCRIPT_KEYS = {
    "default", "answers", "answer_key", "reply_format", "latency", "latency_by_question", "faults",
    "models", "model", "require_auth", "hang_s", "seed", "inspect_images", "log_limit", "logprobs",
}
_RULE_KEYS = {
    "fault", "status", "retry_after", "retry_after_ms", "message", "code", "match", "first", "after",
    "per_prompt", "fraction", "delay", "seconds", "text", "seed",
}
_QUESTION = re.compile(r"Question:\s*(.*?)\s*\n\s*Options:", re.S)
_OPTION = re.compile(r"^\s*\(?([A-Z])[.):]\s+(.*?)\s*$")


class ScriptError(ValueError):
    """A script that cannot be run; the message names the key and what is accepted."""


def question_of(prompt: str) -> str:
    """The question text of a prompt in the reference wording, else the stripped prompt."""
    m = _QUESTION.search(prompt)
    return m.group(1) if m else prompt.strip()


def _options_of(prompt: str) -> list[tuple[str, str]]:
    """(letter, text) pairs listed after "Options:" (empty when there is no such list)."""
    at = prompt.find("Options:")
    if at < 0:
        return []
    found: list[tuple[str, str]] = []
    for line in prompt[at + len("Options:"):].splitlines():
        m = _OPTION.match(line)
        if m:
            found.append((m.group(1), m.group(2)))
        elif found and line.strip():
            break  # the instruction line after the options
    return found


# ---------------------------------------------------------------------------- the script


@dataclass
class _Latency:
    low: float
    high: float

    @classmethod
    def parse(cls, value: Any, where: str) -> _Latency:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return cls(float(value), float(value))
        if isinstance(value, Mapping) and set(value) == {"fixed"}:
            return cls.parse(value["fixed"], where)
        if isinstance(value, Mapping) and set(value) == {"uniform"}:
            pair = value["uniform"]
            if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
                isinstance(x, (int, float)) and x >= 0 for x in pair
            ) and pair[0] <= pair[1]:
                return cls(float(pair[0]), float(pair[1]))
        raise ScriptError(
            f"script: {where} = {value!r} is not a latency; use seconds >= 0, "
            '{"fixed": s} or {"uniform": [low, high]}'
        )

    def sample(self, rng: random.Random) -> float:
        return self.low if self.low == self.high else rng.uniform(self.low, self.high)


@dataclass
class _Rule:
    spec: dict[str, Any]
    fault: str
    match: str | None
    first: int | None
    after: int
    per_prompt: bool
    fraction: float | None
    rng: random.Random
    seen: Counter[str] = field(default_factory=Counter)

    @classmethod
    def parse(cls, spec: Any, i: int, seed: int) -> _Rule:
        where = f"faults[{i}]"
        if not isinstance(spec, Mapping):
            raise ScriptError(f"script: {where} must be an object such as {{\"fault\": \"status\", \"status\": 429}}")
        unknown = set(spec) - _RULE_KEYS
        if unknown:
            raise ScriptError(f"script: {where} has unknown keys {sorted(unknown)}; accepted: {sorted(_RULE_KEYS)}")
        fault = spec.get("fault")
        if fault not in FAULTS:
            raise ScriptError(f"script: {where}.fault = {fault!r}; accepted: {', '.join(FAULTS)}")
        if fault == "status" and not (isinstance(spec.get("status"), int) and 100 <= spec["status"] <= 599):
            raise ScriptError(f"script: {where} is a status fault without a valid \"status\" (100..599)")
        fraction = spec.get("fraction")
        if fraction is not None and not (isinstance(fraction, (int, float)) and 0 <= fraction <= 1):
            raise ScriptError(f"script: {where}.fraction = {fraction!r}; use a number in [0, 1]")
        for k in ("first", "after"):
            v = spec.get(k)
            if v is not None and not (isinstance(v, int) and v >= 0):
                raise ScriptError(f"script: {where}.{k} = {v!r}; use an integer >= 0")
        return cls(
            spec=dict(spec), fault=fault, match=spec.get("match"), first=spec.get("first"),
            after=spec.get("after", 0) or 0, per_prompt=bool(spec.get("per_prompt", False)),
            fraction=fraction, rng=random.Random(spec.get("seed", seed * 1000 + i)),
        )

    def fires(self, question: str, prompt: str, request_hash: str) -> bool:
        """Count this request if it matches, and say whether the fault applies to it."""
        if self.match is not None and not _matches(self.match, question, prompt):
            return False
        counter = request_hash if self.per_prompt else ""
        self.seen[counter] += 1
        n = self.seen[counter]  # 1-based position among matching requests
        if n <= self.after:
            return False
        if self.first is not None and n > self.after + self.first:
            return False
        return self.fraction is None or self.rng.random() < self.fraction


def _matches(key: str, question: str, prompt: str) -> bool:
    return key == question or key in prompt


def _lookup(table: Mapping[str, Any], question: str, prompt: str) -> tuple[bool, Any]:
    """Find a question's entry: an exact hit on the question first (cheap), then substrings."""
    if question in table:
        return True, table[question]
    for key, value in table.items():
        if key in prompt:
            return True, value
    return False, None


@dataclass
class Script:
    """A parsed script (see the module docstring); `raw` is its JSON form."""

    raw: dict[str, Any]
    default: str
    answers: dict[str, str]
    answer_key: dict[str, Any]
    reply_format: str
    latency: _Latency
    latency_by_question: dict[str, _Latency]
    rules: list[_Rule]
    models: list[str] | None
    model: str | None
    require_auth: bool
    hang_s: float
    inspect_images: bool
    log_limit: int
    rng: random.Random
    reply_fn: ReplyFn | None = None
    logprobs: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, reply_fn: ReplyFn | None = None) -> Script:
        raw = dict(raw or {})
        unknown = set(raw) - _SCRIPT_KEYS
        if unknown:
            raise ScriptError(f"script: unknown keys {sorted(unknown)}; accepted: {sorted(_SCRIPT_KEYS)}")
        seed = raw.get("seed", 0)
        for k in ("answers", "answer_key", "latency_by_question", "logprobs"):
            if not isinstance(raw.get(k, {}), Mapping):
                raise ScriptError(f"script: {k} must be an object mapping question text to a value")
        faults = raw.get("faults", [])
        if not isinstance(faults, list):
            raise ScriptError("script: faults must be a list of rules")
        models = raw.get("models")
        if models is not None and not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
            raise ScriptError("script: models must be a list of model names")
        default = raw.get("default", "A")
        if not isinstance(default, str):
            raise ScriptError(f"script: default = {default!r}; use a reply string such as \"A\"")
        return cls(
            raw=json.loads(json.dumps(raw)),  # proves it is JSON-serialisable, and detaches it
            default=default,
            answers={str(k): str(v) for k, v in raw.get("answers", {}).items()},
            answer_key=dict(raw.get("answer_key", {})),
            reply_format=str(raw.get("reply_format", "{letter}")),
            latency=_Latency.parse(raw.get("latency", 0.0), "latency"),
            latency_by_question={
                str(k): _Latency.parse(v, f"latency_by_question[{k!r}]")
                for k, v in raw.get("latency_by_question", {}).items()
            },
            rules=[_Rule.parse(r, i, seed) for i, r in enumerate(faults)],
            models=models,
            model=raw.get("model"),
            require_auth=bool(raw.get("require_auth", False)),
            hang_s=float(raw.get("hang_s", 3600.0)),
            inspect_images=bool(raw.get("inspect_images", True)),
            log_limit=int(raw.get("log_limit", 100_000)),
            rng=random.Random(seed),
            reply_fn=reply_fn,
            logprobs=_parse_logprobs(raw.get("logprobs", {})),
        )

    def reply(self, question: str, prompt: str, body: Mapping[str, Any]) -> str:
        if self.reply_fn is not None:
            text = self.reply_fn(prompt, body)
            if text is not None:
                return text
        hit, text = _lookup(self.answers, question, prompt)
        if hit:
            return text
        hit, correct = _lookup(self.answer_key, question, prompt)
        if hit:
            options = _options_of(prompt)
            for i, (letter, option) in enumerate(options):
                if (isinstance(correct, int) and correct == i) or (
                    isinstance(correct, str) and option.strip().casefold() == correct.strip().casefold()
                ):
                    return self.reply_format.format(letter=letter, option=option)
        return self.default

    def latency_for(self, question: str, prompt: str) -> float:
        hit, lat = _lookup(self.latency_by_question, question, prompt) if self.latency_by_question else (False, None)
        return (lat if hit else self.latency).sample(self.rng)


def _parse_logprobs(table: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for question, dist in table.items():
        if not (isinstance(dist, Mapping) and dist and all(
                isinstance(k, str) and len(k) == 1 and isinstance(v, (int, float)) and 0 < v <= 1
                for k, v in dist.items())):
            raise ScriptError(f"script: logprobs[{question!r}] = {dist!r}; use an object of option letters to "
                              'probabilities in (0, 1], such as {"A": 0.7, "B": 0.3}')
        out[str(question)] = {k: float(v) for k, v in dist.items()}
    return out


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


# ---------------------------------------------------------------------------- statistics


def _new_stats() -> dict[str, Any]:
    return {
        "total": 0, "by_status": Counter(), "by_outcome": Counter(), "by_fault": Counter(),
        "by_question": Counter(), "by_prompt": Counter(), "by_request": Counter(), "answered": Counter(),
        "models": Counter(), "auth": Counter({"present": 0, "absent": 0}),
        "images": Counter({"with": 0, "without": 0, "total": 0}),
        "in_flight": 0, "max_in_flight": 0, "other": Counter(), "requests": [],
    }


@dataclass
class _Parsed:
    model: str
    prompt: str
    question: str
    images: list[dict[str, Any]]
    params: dict[str, Any]
    prompt_hash: str
    request_hash: str


def _inspect_image(url: str, decode: bool) -> dict[str, Any]:
    """What the server can say about an image_url: its type, size in pixels and digest."""
    if not url.startswith("data:"):
        return {"mime": None, "url_scheme": urlsplit(url).scheme}
    head, _, payload = url.partition(",")
    mime = head[5:].split(";")[0] or None
    info: dict[str, Any] = {"mime": mime, "base64": head.endswith(";base64")}
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        info["error"] = "invalid base64"
        return info
    info["bytes"] = len(raw)
    info["sha256"] = hashlib.sha256(raw).hexdigest()[:16]
    if decode:
        try:
            from PIL import Image  # lazy: the server itself needs only the standard library

            with Image.open(io.BytesIO(raw)) as im:  # reads the header only
                info["width"], info["height"], info["format"] = im.width, im.height, im.format
        except Exception as exc:  # an undecodable image is recorded, not fatal
            info["error"] = f"not an image: {type(exc).__name__}"
    return info


def _parse_chat(body: Mapping[str, Any], decode_images: bool) -> _Parsed:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("'messages' must be a list")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "image_url":
                    iu = part.get("image_url")
                    url = iu.get("url", "") if isinstance(iu, Mapping) else str(iu or "")
                    images.append(_inspect_image(url, decode_images))
    prompt = "\n".join(texts)
    model = str(body.get("model", ""))
    prompt_hash = hashlib.sha256(prompt.encode()).hexdigest()[:16]
    h = hashlib.sha256()
    for part in (model, prompt, *(str(i.get("sha256")) for i in images)):
        h.update(part.encode())
        h.update(b"\0")
    params = {k: v for k, v in body.items() if k != "messages"}
    return _Parsed(model, prompt, question_of(prompt), images, params, prompt_hash, h.hexdigest()[:16])


# ---------------------------------------------------------------------------- HTTP


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


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # 64+ clients connecting at once must not wait on SYN retries
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (timeouts, dropped connections) are the point of the exercise.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
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
        elif url.path.rstrip("/") == "/v1/models":
            owner._count_other("GET /v1/models")
            names = owner.script.models or [owner.script.model or "scripted"]
            self._send_json(200, {"object": "list", "data": [
                {"id": n, "object": "model", "created": 0, "owned_by": "medrcube"} for n in names]})
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
            self._chat()
        else:
            self._read_body()
            owner._count_other(f"POST {path}")
            self._send(404, _error_body(404, f"no route POST {path}"))

    def _chat(self) -> None:
        owner = self.server.owner
        raw = self._read_body()
        # Only whether an Authorization header is there; its value is never read or kept.
        auth = "present" if self.headers.get("Authorization") else "absent"
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            if body.get("stream"):
                raise ValueError("the scripted server does not stream; send stream=false")
            parsed = _parse_chat(body, owner.script.inspect_images)
        except ValueError as exc:
            owner._count_bad_request(auth)
            self._send(400, _error_body(400, f"invalid request body: {exc}"))
            return
        plan = owner._begin(parsed, auth, body)
        try:
            self._execute(plan, parsed)
        finally:
            owner._end(plan, "error", None)  # a no-op unless _execute failed before recording

    def _execute(self, plan: _Plan, parsed: _Parsed) -> None:
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

        def completion(text: str | None, finish: str = "stop", refusal: str | None = None) -> dict[str, Any]:
            obj = _completion(model, text, finish, refusal, prompt_tokens=ptoks, seq=plan.seq)
            if parsed.params.get("logprobs") and text is not None:
                _, dist = _lookup(owner.script.logprobs, parsed.question, parsed.prompt)
                obj["choices"][0]["logprobs"] = _logprobs(text, dist, int(parsed.params.get("top_logprobs") or 0))
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
            done(plan, str(status), status)
            self._send(status, _error_body(status, message, spec.get("code")), headers)
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
            obj = completion(plan.reply)
            obj["choices"] = []
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


@dataclass
class _Plan:
    seq: int
    entry: dict[str, Any]
    rule: _Rule | None
    latency: float
    reply: str
    request_hash: str
    ended: bool = False


class ScriptedServer:
    """The server, run on a background thread; a context manager (see the module docstring)."""

    def __init__(self, script: Mapping[str, Any] | Script | None = None, *, reply: ReplyFn | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self.script = script if isinstance(script, Script) else Script.parse(script, reply)
        if reply is not None:
            self.script.reply_fn = reply
        self._stats = _new_stats()
        self._seq = 0
        self._t0 = time.monotonic()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._host, self._port = host, port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._port = httpd.server_address[1]  # a restart comes back on the same port
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: wake hung handlers and cut every open connection."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def restart(self) -> ScriptedServer:
        """Stop (cutting open connections) and serve again on the same port; the script
        and the statistics are kept."""
        self.stop()
        return self.start()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running (use it as a context manager or call start())")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """Where the `openai` client should point: http://127.0.0.1:PORT/v1."""
        return f"http://{self._host}:{self.port}/v1"

    # -- control --------------------------------------------------------------------

    def set_script(self, script: Mapping[str, Any] | Script, *, reply: ReplyFn | None = None) -> None:
        """Replace the script (rule counters start afresh); statistics are kept."""
        parsed = script if isinstance(script, Script) else Script.parse(script, reply)
        if reply is not None:
            parsed.reply_fn = reply
        with self._lock:
            self.script = parsed

    def reset_stats(self) -> None:
        """Zero the statistics and the fault rules' counts."""
        with self._lock:
            in_flight = self._stats["in_flight"]
            self._stats = _new_stats()
            self._stats["in_flight"] = in_flight
            self.script = Script.parse(self.script.raw, self.script.reply_fn)

    def stats(self, log: bool = True) -> dict[str, Any]:
        """A JSON-ready snapshot of the counters (see the module docstring)."""
        with self._lock:
            s = {k: (dict(v) if isinstance(v, Counter) else v) for k, v in self._stats.items()}
            s["requests"] = copy.deepcopy(self._stats["requests"]) if log else []
        s["duplicates"] = sum(n - 1 for n in s["answered"].values() if n > 1)
        return s

    # -- bookkeeping called by the handler -----------------------------------------------

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    def _count_other(self, what: str) -> None:
        with self._lock:
            self._stats["other"][what] += 1

    def _count_bad_request(self, auth: str) -> None:
        with self._lock:
            st = self._stats
            st["total"] += 1
            st["auth"][auth] += 1
            st["by_status"]["400"] += 1
            st["by_outcome"]["400"] += 1

    def _begin(self, p: _Parsed, auth: str, body: Mapping[str, Any]) -> _Plan:
        with self._lock:
            script, st = self.script, self._stats
            self._seq += 1
            st["total"] += 1
            st["in_flight"] += 1
            st["max_in_flight"] = max(st["max_in_flight"], st["in_flight"])
            st["by_question"][p.question[:200]] += 1
            st["by_prompt"][p.prompt_hash] += 1
            st["by_request"][p.request_hash] += 1
            st["models"][p.model] += 1
            st["auth"][auth] += 1
            st["images"]["with" if p.images else "without"] += 1
            st["images"]["total"] += len(p.images)
            rule: _Rule | None = None
            if script.require_auth and auth == "absent":
                rule = _Rule.parse({"fault": "status", "status": 401, "message": "no Authorization header"}, -1, 0)
            elif script.models is not None and p.model not in script.models:
                rule = _Rule.parse({"fault": "status", "status": 404, "code": "model_not_found",
                                    "message": f"The model `{p.model}` does not exist"}, -1, 0)
            else:
                for r in script.rules:
                    if r.fires(p.question, p.prompt, p.request_hash):
                        rule = r
                        break
            if rule is not None:
                st["by_fault"][rule.fault if rule.fault != "status" else f"status:{rule.spec['status']}"] += 1
            entry = {"seq": self._seq, "t_start": round(time.monotonic() - self._t0, 6), "t_end": None,
                     "model": p.model, "question": p.question[:200], "prompt_hash": p.prompt_hash,
                     "request_hash": p.request_hash, "images": p.images, "auth": auth,
                     "params": p.params, "outcome": None, "status": None}
            if len(st["requests"]) < script.log_limit:
                st["requests"].append(entry)
            plan = _Plan(seq=self._seq, entry=entry, rule=rule, latency=script.latency_for(p.question, p.prompt),
                         reply="", request_hash=p.request_hash)
        # Outside the lock: an in-process reply callable may take its time (or call stats()).
        if rule is None or rule.fault in ("truncated", "drop", "empty_choices"):
            plan.reply = script.reply(p.question, p.prompt, body)
        return plan

    def _end(self, plan: _Plan, outcome: str, status: int | None) -> None:
        """Record how a request ended (once; later calls for the same plan do nothing)."""
        with self._lock:
            if plan.ended:
                return
            plan.ended = True
            st = self._stats
            st["in_flight"] -= 1
            st["by_outcome"][outcome] += 1
            if status is not None:
                st["by_status"][str(status)] += 1
            if outcome == "200":
                st["answered"][plan.request_hash] += 1
            plan.entry.update(t_end=round(time.monotonic() - self._t0, 6), outcome=outcome, status=status)


# ---------------------------------------------------------------------------- a separate process


class ServerProcess:
    """`python -m medrcube.testing.server` in a child process, for kill and restart tests.

    `restart()` comes back on the same port, so a client keeps its base URL across it.
    `stats()` and `reset_stats()` go over HTTP (`/_stats`, `/_reset`).
    """

    def __init__(self, script: Mapping[str, Any] | None = None, *, port: int = 0,
                 script_path: str | None = None, startup_timeout: float = 30.0) -> None:
        import os
        import tempfile

        self._script = Script.parse(script).raw  # fail here, with the key named, not in the child
        if script_path is None:
            fd, script_path = tempfile.mkstemp(prefix="medrcube-script-", suffix=".json")
            os.close(fd)
            self._own_file = True
        else:
            self._own_file = False
        with open(script_path, "w", encoding="utf-8") as fh:
            json.dump(self._script, fh)
        self.script_path = script_path
        self._port = port
        self._startup_timeout = startup_timeout
        self.proc: Any = None
        self.base_url = ""

    def start(self) -> ServerProcess:
        import subprocess

        cmd = [sys.executable, "-m", "medrcube.testing.server", "--script", self.script_path,
               "--port", str(self._port)]
        deadline = time.monotonic() + self._startup_timeout
        while True:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = self.proc.stdout.readline().strip()
            if line.startswith("http://"):
                break
            err = self.proc.stderr.read() if self.proc.wait(timeout=10) is not None else ""
            # On restart the old socket may linger for a moment: retry the same port briefly.
            if "Address already in use" not in err or time.monotonic() > deadline:
                raise RuntimeError(f"the scripted server process did not start: {err.strip() or line}")
            time.sleep(0.1)
        self.base_url = line
        self._port = int(urlsplit(line).port or 0)
        return self

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def _control(self, method: str, path: str) -> Any:
        import urllib.request

        root = self.base_url.rsplit("/v1", 1)[0]
        req = urllib.request.Request(root + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stats(self, log: bool = True) -> dict[str, Any]:
        return self._control("GET", "/_stats" if log else "/_stats?log=0")

    def reset_stats(self) -> None:
        self._control("POST", "/_reset")

    def kill(self) -> None:
        """SIGKILL: no goodbye to open connections (their clients see them dropped)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=10)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream:
                    stream.close()

    def restart(self) -> ServerProcess:
        """Kill and start again on the same port (statistics start from zero)."""
        self.kill()
        return self.start()

    def close(self) -> None:
        import os

        self.kill()
        if self._own_file:
            try:
                os.unlink(self.script_path)
            except OSError:
                pass

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------- CLI


def serve_main(argv: list[str] | None = None) -> int:
    """`python -m medrcube.testing.server`: print the base URL, serve until killed."""
    ap = argparse.ArgumentParser(prog="python -m medrcube.testing.server", description=__doc__.split("\n")[0])
    ap.add_argument("--script", help="a JSON script file (see the module docstring); default: reply 'A'")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 (the default) picks a free port")
    args = ap.parse_args(argv)
    script: dict[str, Any] = {}
    if args.script:
        try:
            with open(args.script, encoding="utf-8") as fh:
                script = json.load(fh)
        except (OSError, ValueError) as exc:
            print(f"{args.script}: cannot read the script: {exc}", file=sys.stderr)
            return 2
    try:
        server = ScriptedServer(script, host=args.host, port=args.port).start()
    except ScriptError as exc:
        print(f"{args.script}: {exc}", file=sys.stderr)
        return 2
    print(server.base_url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(serve_main())
