"""A light HTTP/1.1 client for the OpenAI-compatible adapter: keep-alive connections on
asyncio streams, for plain chat completions (docs/speed.md says why, with figures).

The `openai` SDK on httpx spends several milliseconds of CPU per request on a loaded
machine (request options, httpx's models, httpcore's pool scanning every idle connection
with a socket poll, anyio): more than the whole budget of a fast local server. This client
does what the adapter needs and nothing else, under the same rules as the SDK path
(models/http.py, models/bounded_body.py, openai_adapter.py):

- one request per connection at a time, connections kept alive for reuse (LIFO) and
  closed after `KEEPALIVE_S` idle, on `Connection: close`, on a body read to EOF, and
  after any failure or cancellation mid-exchange (a half-read connection is never reused);
  a connection the server closed while idle is seen at once (the event loop has read its
  EOF) and dropped, never sent on;
- no request is ever re-sent by the client: every attempt is the adapter's, counted and
  paced by its retry loop;
- redirects are never followed (a 3xx is a `StatusError` naming its headers, so the adapter
  names the Location);
- the body is read through `BoundedBody` (gzip and deflate only, offered as such; a cap on
  the wire and once inflated), chunked or by Content-Length;
- connecting has its own deadline (`connect_timeout`, as httpx's connect timeout) and the
  adapter bounds the whole attempt with `asyncio.timeout`;
- a failed status is a `StatusError` carrying what the SDK's error carries (status, headers,
  the JSON body's `error` object or the text, a message), so `provider_says` and
  `status_attempt` word it the same; any failure of the connection or of the protocol is a
  `LightConnectionError` raised from its cause.

TLS (https) uses the default context with certifi's roots when installed (as httpx does),
or `SSL_CERT_FILE`. Proxies are not spoken: the adapter uses the SDK when a proxy variable
applies (openai_adapter.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from medrcube.models.bounded_body import DEFAULT_MAX_BODY_BYTES, BodyTooLargeError, BoundedBody
from medrcube.models.strict_json import VerbatimJSON

if TYPE_CHECKING:
    import ssl

__all__ = ["KEEPALIVE_S", "TRANSPORTS", "LightClient", "LightConnectionError", "StatusError", "light_headers", "pick"]

TRANSPORTS = ("auto", "light", "sdk")

KEEPALIVE_S = 5.0  # idle seconds before a kept connection is dropped (httpcore's default expiry)
_MAX_HEADERS = 200  # header lines in one response; each line is bounded by the stream's limit
_LINE_LIMIT = 64 * 1024


def pick(transport: str, base_url: str | None) -> str:
    """"light" or "sdk" for models.yaml's `transport` ("auto": light for an http(s) base URL
    without a query that no proxy variable applies to; the SDK for api.openai.com, whose
    client reads more of the environment, and wherever a proxy or a query is involved)."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if transport != "auto":
        if transport == "light" and (base_url is None or not base_url.startswith(("http://", "https://"))):
            raise ValueError("transport 'light' needs a base_url (http:// or https://)")
        return transport
    if base_url is None:
        return "sdk"
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or parts.query or not parts.hostname:
        return "sdk"
    # urllib reads a proxy only from a variable whose name ends in "_proxy" (any case): with none
    # set, as on most CI machines, its import (with http.client and email's parser: about 11 ms of
    # CPU before the first request) is not needed to know that none applies.
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return "light"
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    if (proxies.get(parts.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(parts.hostname):
        return "sdk"
    return "light"


def light_headers(api_key: str, api_key_header: str | None) -> dict[str, str]:
    """The headers the SDK path sends that matter to a server: the key as a bearer token
    (and in `api_key_header` when set, as the SDK's default_headers do), the organisation
    and project the SDK reads from the environment, what is accepted."""
    from medrcube import __version__

    headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
               "Accept-Encoding": "gzip, deflate", "User-Agent": f"medrcube/{__version__}"}
    if api_key_header:
        headers[api_key_header] = api_key
    for env, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(env):
            headers[name] = os.environ[env]
    return headers


_SPLICE_MIN = 4096  # characters: a data URL, not a prompt


def json_body(body: Any, token: str) -> bytes:
    """`json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)` as
    UTF-8, with each long `VerbatimJSON` string (an image's data URL, which JSON writes as
    itself) copied in instead of scanned by the encoder: a data URL is tens to hundreds of
    KB, and its encoding was the largest part of building a request (about 140-190 us of
    CPU for 45 KB, 12 us spliced)."""
    long: list[str] = []

    def swap(value: Any) -> Any:
        if type(value) is VerbatimJSON and len(value) >= _SPLICE_MIN:
            long.append(value)
            return f"{token}-{len(long) - 1}"
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    light = swap(body)
    encoded = json.dumps(light, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    if not long:
        return encoded
    pieces = encoded.split(f'"{token}-'.encode())
    if len(pieces) != len(long) + 1:  # pragma: no cover - the token is unguessable
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    out = [pieces[0]]
    for piece in pieces[1:]:
        index, _, rest = piece.partition(b'"')
        out += (b'"', long[int(index)].encode("ascii"), b'"', rest)
    return b"".join(out)


class LightConnectionError(Exception):
    """The connection failed or the server broke HTTP/1.1 (raised from the cause)."""


class StatusError(Exception):
    """An HTTP status of 300 or more, with what the SDK's APIStatusError carries."""

    def __init__(self, status_code: int, headers: Mapping[str, str], text: str) -> None:
        self.status_code = status_code
        self.headers = dict(headers)
        self.response = self  # as the SDK's error: `exc.response.headers`
        message = f"Error code: {status_code}"
        body: Any = text
        try:
            body = json.loads(text)
        except ValueError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, Mapping) else None
            said = error.get("message") if isinstance(error, Mapping) else None
            if isinstance(said, str) and said:
                message += f" - {said}"
        # As the SDK hands it on: the `error` object of an OpenAI-style body, else the body.
        self.body = body.get("error", body) if isinstance(body, Mapping) else body
        self.message = message
        super().__init__(message)


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self, now: float) -> bool:
        # EOF or bytes nobody asked for: the server closed it, or broke the protocol.
        return (not self.writer.is_closing() and not self.reader.at_eof() and not self.reader._buffer  # type: ignore[attr-defined]
                and now - self.idle_since < KEEPALIVE_S)

    def close(self) -> None:
        self.writer.close()


def _tls_context() -> ssl.SSLContext:
    import ssl

    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:  # pragma: no cover - certifi comes with httpx
            cafile = None
    return ssl.create_default_context(cafile=cafile)


class LightClient:
    """HTTP/1.1 to one base URL (scheme, host, port, path prefix), connections kept alive."""

    def __init__(self, base_url: str, *, headers: Mapping[str, str], connect_timeout: float,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the light transport needs an http(s) base URL, not {base_url!r}")
        self.host = parts.hostname
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        default_port = self.port == (443 if self.tls else 80)
        host_header = self.host if ":" not in self.host else f"[{self.host}]"
        host_header += "" if default_port else f":{self.port}"
        bad = [k for k, v in headers.items() if any(c in f"{k}{v}" for c in "\r\n\0")]
        if bad:  # a key with a line break in it would write headers of its own
            raise ValueError(f"the HTTP header {bad[0]!r} has a line break or NUL in its name or value")
        lines = [f"Host: {host_header}", *(f"{k}: {v}" for k, v in headers.items())]
        self._head_tail = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self.connect_timeout = float(connect_timeout)
        self.max_body_bytes = int(max_body_bytes)
        self._idle: list[_Connection] = []
        self._ssl: ssl.SSLContext | None = _tls_context() if self.tls else None
        self.connections_opened = 0
        self._token = f"medrcube-splice-{secrets.token_hex(16)}"  # unguessable: never in a prompt
        # Set once a request's bytes are all handed to the kernel (the pump's first wave: run/pump.py).
        self.written = asyncio.Event()

    async def post(self, path: str, body: bytes, *, max_body: int | None = None) -> bytes:
        """POST `body` (JSON) to prefix + path; the response body, decoded (or StatusError).
        `max_body`: this request's own cap on the body, below the client's (BodyTooLargeError)."""
        return await self._request(b"POST", path, body, max_body)

    async def post_json(self, path: str, body: Any, *, max_body: int | None = None) -> bytes:
        """POST `body` as the JSON httpx would send (compact, UTF-8, no NaN), byte for byte."""
        return await self.post(path, json_body(body, self._token), max_body=max_body)

    async def get(self, path: str) -> bytes:
        return await self._request(b"GET", path, None)

    async def model_ids(self) -> list[str]:
        """GET models: the ids of the list (a malformed list raises, and the pre-flight
        takes that for no list: models/listing.py)."""
        listed = json.loads(await self.get("models")).get("data") or []
        return [str(m["id"]) for m in listed]

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- one exchange -------------------------------------------------------------------

    async def _request(self, method: bytes, path: str, body: bytes | None, max_body: int | None = None) -> bytes:
        conn = self._take_idle() or await self._connect()
        cap = self.max_body_bytes if max_body is None else min(self.max_body_bytes, int(max_body))
        try:
            status, headers, data, keep = await self._exchange(conn, method, path, body, cap)
        except BaseException:  # a failure, a timeout, a cancellation: never reused half-read
            conn.close()
            raise
        if keep:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()
        if status >= 300:
            raise StatusError(status, headers, data.decode("utf-8", "replace").strip())
        return data

    def _take_idle(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable(now):
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self._ssl, limit=_LINE_LIMIT,
                    server_hostname=self.host if self.tls else None)
        except TimeoutError:
            raise
        except OSError as exc:  # ssl.SSLError included
            raise LightConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self.connections_opened += 1
        return _Connection(reader, writer)

    async def _exchange(self, conn: _Connection, method: bytes, path: str,
                        body: bytes | None, cap: int) -> tuple[int, dict[str, str], bytes, bool]:
        target = (self.prefix + "/" + path.lstrip("/")).encode("ascii")
        head = b"%s %s HTTP/1.1\r\n%s" % (method, target, self._head_tail)
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        try:
            # Head and body in one send: as two, the head left in a segment of its own (asyncio sets
            # TCP_NODELAY), and the server read it and the body in two wake-ups. writelines joins them
            # on Python 3.11 (a copy: about 1 us for a 48 KB body) and gathers them without one from 3.12.
            conn.writer.writelines((head + b"\r\n", body) if body is not None else (head + b"\r\n",))
            await conn.writer.drain()
            self.written.set()
            return await self._response(conn.reader, cap)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, UnicodeError) as exc:
            raise LightConnectionError(f"HTTP exchange with {self.host}:{self.port} failed: "
                                       f"{type(exc).__name__}: {exc}") from exc

    async def _response(self, reader: asyncio.StreamReader, cap: int) -> tuple[int, dict[str, str], bytes, bool]:
        while True:
            line = await reader.readline()
            if not line:
                raise ConnectionResetError("the server closed the connection before answering")
            version, _, rest = line.decode("latin-1").partition(" ")
            if version not in ("HTTP/1.1", "HTTP/1.0"):
                raise ValueError(f"not an HTTP/1.x status line: {line[:80]!r}")
            status = int(rest.split(" ", 1)[0])
            headers = await self._headers(reader)
            if not 100 <= status < 200:  # 1xx are interim: the answer follows
                break
        conn_tokens = headers.get("connection", "").lower()
        keep = "close" not in conn_tokens and (version == "HTTP/1.1" or "keep-alive" in conn_tokens)
        bounded = BoundedBody(headers.get("content-encoding", "identity").strip().lower(), cap)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self._chunked(reader, bounded)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length < 0:
                raise ValueError(f"Content-Length {length}")
            if length > bounded.cap:  # refused unread
                raise BodyTooLargeError(bounded.cap, bounded.encoding, inflated=False)
            bounded.feed(await reader.readexactly(length))
        elif status in (204, 304):
            pass
        else:  # delimited by the end of the connection
            keep = False
            while chunk := await reader.read(65536):
                bounded.feed(chunk)
        return status, headers, bounded.finish(), keep

    @staticmethod
    async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
        headers: dict[str, str] = {}
        for _ in range(_MAX_HEADERS):
            line = await reader.readline()
            if line in (b"\r\n", b"\n"):
                return headers
            if not line:
                raise asyncio.IncompleteReadError(b"", None)
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise ValueError(f"a malformed header line: {line[:80]!r}")
            key = name.strip().lower()
            # The first of a repeated header, as a mapping read of httpx's headers gives.
            headers.setdefault(key, value.strip())
        raise ValueError(f"more than {_MAX_HEADERS} header lines")

    @staticmethod
    async def _chunked(reader: asyncio.StreamReader, bounded: BoundedBody) -> None:
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise asyncio.IncompleteReadError(b"", None)
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                break
            if bounded.wire + size > bounded.cap:  # refused unread
                raise BodyTooLargeError(bounded.cap, bounded.encoding, inflated=False)
            bounded.feed(await reader.readexactly(size))
            await reader.readexactly(2)  # the chunk's CRLF
        while (line := await reader.readline()) not in (b"\r\n", b"\n"):  # trailers
            if not line:
                raise asyncio.IncompleteReadError(b"", None)
