"""The HTTP client under the OpenAI adapter, bounded: no redirects, a cap on the body.

The `openai` client is handed an `httpx.AsyncClient` of ours (the SDK's documented
`http_client` argument) so that three things hold whatever the endpoint sends:

- redirects are never followed: a 3xx comes back as a status error, and the adapter
  reports it naming the Location (a redirect to another host would otherwise have that
  host's answer graded under this endpoint's name);
- the body is read through `BoundedTransport`, which inflates gzip or deflate itself,
  chunk by chunk, and stops at `max_body_bytes` of *decoded* bytes (and of bytes on
  the wire): a gzip bomb costs at most the cap in memory, never its inflated size;
- only gzip and deflate are offered (Accept-Encoding), so no other decoder runs;
- with `strict_json`, a 2xx JSON body with a key written twice or a NaN is refused here
  (models/strict_json.py), for an SDK that parses bodies itself with a lenient reader
  (Gemini's); the OpenAI and Anthropic adapters read the bytes strictly themselves.

The total deadline of a request (that a body dripped a byte at a time cannot extend) is
the adapter's: it wraps the whole call in `asyncio.timeout` (openai_adapter.py).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # checked against the current SDK's library; httpx offers the same names
    import httpx2 as httpx
else:
    try:  # the openai SDK's own HTTP library: httpx2 in its current releases, httpx before
        import httpx2 as httpx
    except ImportError:  # pragma: no cover - older SDKs
        import httpx

from medrcube.models.strict_json import loads_wire

__all__ = ["BodyTooLargeError", "BoundedTransport", "bounded_client"]

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024  # a chat completion is kilobytes; 16 MiB is ample


class BodyTooLargeError(Exception):
    """The response body passed the cap (on the wire or once inflated)."""

    def __init__(self, limit: int, encoding: str, inflated: bool) -> None:
        self.limit = limit
        self.encoding = encoding
        self.inflated = inflated
        what = f"inflates (Content-Encoding {encoding})" if inflated else "is"
        super().__init__(f"the response body {what} past the cap of {limit // (1024 * 1024)} MiB")


class BoundedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that reads and decodes each response body itself, bounded."""

    def __init__(self, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, inner: httpx.AsyncBaseTransport | None = None,
                 *, strict_json: bool = False):
        self.max_body_bytes = int(max_body_bytes)
        self.inner = inner or httpx.AsyncHTTPTransport()
        self.strict_json = strict_json

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "gzip, deflate"
        response = await self.inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        try:
            body = await self._read(response, encoding)
        finally:
            await response.aclose()
        if self.strict_json and 200 <= response.status_code < 300 and "json" in response.headers.get("content-type", ""):
            loads_wire(body)  # DuplicateKeyError / NonStandardNumberError (ValueErrors): the adapter's MALFORMED
        headers = [(k, v) for k, v in response.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=body,
                              extensions=response.extensions, request=request)

    async def _read(self, response: httpx.Response, encoding: str) -> bytes:
        cap = self.max_body_bytes
        decoder: Any = None
        if encoding in ("gzip", "x-gzip"):
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            decoder = _Deflate()
        elif encoding not in ("identity", ""):
            raise ValueError(f"the response uses Content-Encoding {encoding!r}, which was not offered")
        out = bytearray()
        wire = 0
        assert isinstance(response.stream, httpx.AsyncByteStream)
        async for chunk in response.stream:
            wire += len(chunk)
            if wire > cap:
                raise BodyTooLargeError(cap, encoding, inflated=False)
            if decoder is None:
                out += chunk
                continue
            data = decoder.decompress(chunk, cap + 1 - len(out))
            out += data
            while len(out) <= cap and decoder.unconsumed_tail:
                out += decoder.decompress(decoder.unconsumed_tail, cap + 1 - len(out))
            if len(out) > cap:
                raise BodyTooLargeError(cap, encoding, inflated=True)
        if decoder is not None:
            out += decoder.flush()
            if len(out) > cap:
                raise BodyTooLargeError(cap, encoding, inflated=True)
        return bytes(out)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Deflate:
    """'deflate' as servers send it: zlib-wrapped as the RFC says, or raw (a common slip)."""

    def __init__(self) -> None:
        self._d: Any = None

    @property
    def unconsumed_tail(self) -> bytes:
        return self._d.unconsumed_tail if self._d is not None else b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._d is None:
            raw = not (len(data) >= 2 and (data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0)
            self._d = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
        return bytes(self._d.decompress(data, max_length))

    def flush(self) -> bytes:
        return bytes(self._d.flush()) if self._d is not None else b""


def bounded_client(timeout: float, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, *,
                   strict_json: bool = False) -> httpx.AsyncClient:
    """The httpx client the OpenAI adapter gives the SDK: no redirects, bounded bodies.
    Connection limits are left to the adapter's semaphores (generous pool here). The limits
    go to the inner transport, the one holding the connections (a client's own `limits`
    apply only to a transport it makes itself): with httpx's default of 20 kept alive, a
    run at 64 in flight opened a new connection for a fifth of its requests."""
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    return httpx.AsyncClient(
        transport=BoundedTransport(max_body_bytes, inner=httpx.AsyncHTTPTransport(limits=limits), strict_json=strict_json),
        follow_redirects=False,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
    )
