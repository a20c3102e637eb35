"""A response body read bounded: decoded (gzip, deflate) chunk by chunk and capped on the
wire and once inflated, so that a gzip bomb costs at most the cap in memory.

Shared by both transports of the OpenAI adapter: the SDK's (models/http.py) and the light
one (models/light_http.py). No HTTP library is imported here.
"""

from __future__ import annotations

import zlib
from typing import Any

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodyTooLargeError", "BoundedBody"]

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024  # a chat completion is kilobytes; 16 MiB is ample


class BodyTooLargeError(Exception):
    """The response body passed the cap (on the wire or once inflated)."""

    def __init__(self, limit: int, encoding: str, inflated: bool) -> None:
        self.limit = limit
        self.encoding = encoding
        self.inflated = inflated
        what = f"inflates (Content-Encoding {encoding})" if inflated else "is"
        super().__init__(f"the response body {what} past the cap of {limit // (1024 * 1024)} MiB")


class BoundedBody:
    """A response body read chunk by chunk, decoded (gzip, deflate) and capped at
    `cap` bytes on the wire and once inflated (BodyTooLargeError): what both transports
    read a body through (models/http.py, models/light_http.py)."""

    def __init__(self, encoding: str, cap: int) -> None:
        self.cap = int(cap)
        self.encoding = encoding
        self._decoder: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = _Deflate()
        elif encoding not in ("identity", ""):
            raise ValueError(f"the response uses Content-Encoding {encoding!r}, which was not offered")
        self._out = bytearray()
        self.wire = 0

    def feed(self, chunk: bytes) -> None:
        cap, out, decoder = self.cap, self._out, self._decoder
        self.wire += len(chunk)
        if self.wire > cap:
            raise BodyTooLargeError(cap, self.encoding, inflated=False)
        if decoder is None:
            out += chunk
            return
        out += decoder.decompress(chunk, cap + 1 - len(out))
        while len(out) <= cap and decoder.unconsumed_tail:
            out += decoder.decompress(decoder.unconsumed_tail, cap + 1 - len(out))
        if len(out) > cap:
            raise BodyTooLargeError(cap, self.encoding, inflated=True)

    def finish(self) -> bytes:
        if self._decoder is not None:
            self._out += self._decoder.flush()
            if len(self._out) > self.cap:
                raise BodyTooLargeError(self.cap, self.encoding, inflated=True)
        return bytes(self._out)


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


