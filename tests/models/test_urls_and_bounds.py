"""The URL credential rule, the endpoint identity, the bounded transport and the models.yaml
keys that go with them."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import pytest

from medrcube.models.http import BodyTooLargeError, BoundedTransport, httpx
from medrcube.models.models_file import ModelsFileError, parse_models
from medrcube.models.provider_errors import Redactor
from medrcube.models.urls import credential_parts, endpoint_identity, redact_urls


@pytest.mark.parametrize("url", [
    "http://user:pw@127.0.0.1:8000/v1", "https://gw.example/v1?api-key=abc", "https://gw.example/v1?x=1&KEY=abc",
    "https://gw.example/v1?sig=abc", "https://gw.example/v1?access_token=abc", "https://gw.example/v1?X-Api-Key=abc",
    "https://gw.example/v1?subscription-key=abc",
])
def test_credential_shaped_parts_are_found(url: str) -> None:
    assert credential_parts(url)
    shown = redact_urls(f"calling {url} failed")
    assert "abc" not in shown and "user:pw" not in shown and "[redacted]" in shown


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://gw.example/v1?api-version=2024-06-01"])
def test_clean_urls_pass(url: str) -> None:
    assert credential_parts(url) == [] and redact_urls(url) == url


def test_redaction_cuts_values_not_names() -> None:
    text = "POST https://u:p@gw/v1/chat?api-version=1&api-key=SECRET1&sig=SECRET2 failed"
    out = redact_urls(text)
    assert "SECRET" not in out and "u:p" not in out and "api-version=1" in out and "api-key=[redacted]" in out


def test_endpoint_identity_normalises_and_drops_credentials() -> None:
    assert endpoint_identity("HTTP://LocalHost:8000/v1/") == "http://localhost:8000/v1"
    assert endpoint_identity("http://u:p@h:1/v1?api-key=x") == "http://h:1/v1"
    assert endpoint_identity(None) == "https://api.openai.com/v1"


def test_the_redactor_cuts_the_key_with_and_without_its_prefix() -> None:
    r = Redactor("sk-proj-ABCDEFGHIJKLMNOP1234")
    assert r.key_only("echo sk-proj-ABCDEFGHIJKLMNOP1234 and proj-ABCDEFGHIJKLMNOP1234") == \
        "echo [redacted] and [redacted]"
    assert Redactor(None).key_only("B") == "B"


def test_models_yaml_keys_for_endpoints() -> None:
    entries = parse_models({"models": {
        "a": {"provider": "openai", "model": "m", "base_url": "http://h:1/v1", "endpoint_identity": "site-v3",
              "strict_model": True, "max_response_mib": 4, "api_key_header": "api-key"}}}, "models.yaml")
    e = entries["a"]
    assert (e.endpoint_identity, e.strict_model, e.max_response_mib, e.api_key_header) == ("site-v3", True, 4.0,
                                                                                           "api-key")
    for bad in ({"strict_model": "yes"}, {"api_key_header": "bad header!"}, {"endpoint_identity": ""}):
        with pytest.raises(ModelsFileError):
            parse_models({"models": {"a": {"provider": "openai", "model": "m", **bad}}}, "models.yaml")
    with pytest.raises(ModelsFileError, match="environment variable") as info:
        parse_models({"models": {"a": {"provider": "openai", "model": "m",
                                       "base_url": "https://gw/v1?api-key=SITE-SECRET-0000"}}}, "models.yaml")
    assert "SITE-SECRET-0000" not in str(info.value)


class _Fixed(httpx.AsyncBaseTransport):
    def __init__(self, body: bytes, encoding: str | None) -> None:
        self.body, self.encoding = body, encoding

    async def handle_async_request(self, request):  # type: ignore[no-untyped-def]
        headers = {"content-encoding": self.encoding} if self.encoding else {}
        chunks = [self.body[i:i + 65536] for i in range(0, len(self.body), 65536)]
        return httpx.Response(200, headers=headers, stream=_Stream(chunks), request=request)


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for c in self.chunks:
            yield c


def _read(body: bytes, encoding: str | None, cap: int) -> bytes:
    async def go() -> bytes:
        t = BoundedTransport(cap, inner=_Fixed(body, encoding))
        r = await t.handle_async_request(httpx.Request("POST", "http://h/v1/chat/completions"))
        return await r.aread()

    return asyncio.run(go())


def test_the_transport_inflates_within_the_cap_and_refuses_past_it() -> None:
    payload = b'{"ok": true}' + b" " * 5000
    assert _read(gzip.compress(payload), "gzip", 10_000) == payload
    assert _read(zlib.compress(payload), "deflate", 10_000) == payload
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    assert _read(raw.compress(payload) + raw.flush(), "deflate", 10_000) == payload  # raw deflate, a common slip
    assert _read(payload, None, 10_000) == payload
    bomb = gzip.compress(b" " * (8 << 20))  # 8 MiB inflated from about 8 KiB
    with pytest.raises(BodyTooLargeError, match="inflates"):
        _read(bomb, "gzip", 1 << 20)
    with pytest.raises(BodyTooLargeError):
        _read(b"x" * 20_000, None, 10_000)
    with pytest.raises(ValueError, match="not offered"):
        _read(b"x", "br", 10_000)
