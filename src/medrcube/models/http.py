"""The HTTP client under the OpenAI adapter, bounded: no redirects, a cap on the body.

The `openai` client is handed an `httpx.AsyncClient` of ours (the SDK's documented
`http_client` argument) so that three things hold whatever the endpoint sends:

- redirects are never followed: a 3xx comes back as a status error, and the adapter
  reports it naming the Location (a redirect to another host would otherwise have that
  host's answer graded under this endpoint's name);
- the body is read through `BoundedTransport`, which inflates gzip or deflate itself,
  chunk by chunk (models/bounded_body.py), and stops at `max_body_bytes` of *decoded* bytes (and of bytes on
  the wire): a gzip bomb costs at most the cap in memory, never its inflated size;
- only gzip and deflate are offered (Accept-Encoding), so no other decoder runs;
- with `strict_json`, a 2xx JSON body with a key written twice or a NaN is refused here
  (models/strict_json.py), for an SDK that parses bodies itself with a lenient reader
  (Gemini's); the OpenAI and Anthropic adapters read the bytes strictly themselves.

The total deadline of a request (that a body dripped a byte at a time cannot extend) is
the adapter's: it wraps the whole call in `asyncio.timeout` (openai_adapter.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from medrcube.models.bounded_body import DEFAULT_MAX_BODY_BYTES, BodyTooLargeError, BoundedBody

if TYPE_CHECKING:  # checked against the current SDK's library; httpx offers the same names
    import httpx2 as httpx
else:
    try:  # the openai SDK's own HTTP library: httpx2 in its current releases, httpx before
        import httpx2 as httpx
    except ImportError:  # pragma: no cover - older SDKs
        import httpx

from medrcube.models.strict_json import loads_wire

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodyTooLargeError", "BoundedBody", "BoundedTransport", "bounded_client"]


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
        body = BoundedBody(encoding, self.max_body_bytes)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        async for chunk in response.stream:
            body.feed(chunk)
        return body.finish()

    async def aclose(self) -> None:
        await self.inner.aclose()


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
