"""The light HTTP/1.1 client (models/light_http.py) against raw servers on 127.0.0.1.

The adapter-level behaviour (faults, retries, errors, redaction) is tested through both
transports by test_openai_adapter.py and test_adapter_contract.py; here is what only the
wire shows: framing (chunked, Content-Length, to EOF, interim 1xx), bounded bodies,
keep-alive and its limits (Connection: close, an idle connection the server closed), and
which transport the adapter picks.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from medrcube.models.anthropic_adapter import AnthropicAdapter
from medrcube.models.base import Request
from medrcube.models.bounded_body import BodyTooLargeError
from medrcube.models.gemini_adapter import GeminiAdapter
from medrcube.models.images import prepare_image
from medrcube.models.light_http import (
    LightClient,
    LightConnectionError,
    StatusError,
    json_body,
    light_headers,
    pick,
)
from medrcube.models.models_file import ModelsFileError, load_models_file
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.models.registry import load_adapter
from medrcube.models.strict_json import VerbatimJSON

Reply = Callable[[int], bytes]  # request number on the server (0-based) -> raw response bytes


async def _serve(reply: Reply, requests: int, *, close_after: bool = False) -> tuple[list[int], str, Callable[[], Awaitable[None]]]:
    """A server answering `reply(n)` to the n-th request; returns (connections opened per
    request, base URL, stop). `close_after`: close each connection after its answer."""
    conns: list[int] = []
    seen = {"requests": 0, "connections": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        try:
            while seen["requests"] < requests:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                n = seen["requests"]
                seen["requests"] += 1
                conns.append(seen["connections"])
                writer.write(reply(n))
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def stop() -> None:
        server.close()
        await server.wait_closed()

    return conns, f"http://127.0.0.1:{port}/v1", stop


def _ok(body: bytes, *extra: str) -> bytes:
    head = "\r\n".join(("HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *extra))
    return head.encode() + b"\r\n\r\n" + body


def _client(url: str, cap: int = 1 << 20) -> LightClient:
    return LightClient(url, headers=light_headers("sk-test-0123456789", None), connect_timeout=5.0, max_body_bytes=cap)


def _run(reply: Reply, calls: int, *, cap: int = 1 << 20, close_after: bool = False, pause: float = 0.0
         ) -> tuple[list[bytes | BaseException], list[int]]:
    async def go() -> tuple[list[bytes | BaseException], list[int]]:
        conns, url, stop = await _serve(reply, calls, close_after=close_after)
        client = _client(url, cap)
        out: list[bytes | BaseException] = []
        try:
            for _ in range(calls):
                try:
                    out.append(await client.post("chat/completions", b"{}"))
                except Exception as exc:  # noqa: BLE001 - the test reads it
                    out.append(exc)
                await asyncio.sleep(pause)
        finally:
            await client.close()
            await stop()
        return out, conns

    return asyncio.run(go())


def test_connections_are_kept_alive_and_reused() -> None:
    out, conns = _run(lambda n: _ok(b'{"n": %d}' % n), 3)
    assert out == [b'{"n": 0}', b'{"n": 1}', b'{"n": 2}']
    assert conns == [1, 1, 1]  # one connection for all three


def test_connection_close_and_a_server_closed_idle_connection_are_not_reused() -> None:
    out, conns = _run(lambda n: _ok(b"x", "Connection: close") if n == 0 else _ok(b"y"), 2)
    assert out == [b"x", b"y"] and conns == [1, 2]
    # The server closes after each answer without saying so: the client sees the EOF while
    # idle and connects anew instead of sending on a dead connection (no error).
    out, conns = _run(lambda n: _ok(b"z"), 3, close_after=True, pause=0.05)
    assert out == [b"z", b"z", b"z"] and conns == [1, 2, 3]


def test_chunked_gzip_and_interim_responses_are_read() -> None:
    body = gzip.compress(b'{"choices": []}')
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:7], body[7:])) + b"0\r\n\r\n"
    raw = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
           b"Content-Encoding: gzip\r\n\r\n" + chunked)
    out, _ = _run(lambda n: raw, 2)
    assert out == [b'{"choices": []}'] * 2  # and the connection stayed usable after the chunked body


def test_bodies_past_the_cap_are_refused_on_the_wire_and_once_inflated() -> None:
    out, _ = _run(lambda n: _ok(b"x" * 5000), 1, cap=4096)
    assert isinstance(out[0], BodyTooLargeError) and not out[0].inflated
    bomb = gzip.compress(b"\0" * 1_000_000)
    out, _ = _run(lambda n: _ok(bomb, "Content-Encoding: gzip"), 1, cap=4096)
    assert isinstance(out[0], BodyTooLargeError) and out[0].inflated
    out, _ = _run(lambda n: _ok(b"x", "Content-Encoding: br"), 1)  # never offered
    assert isinstance(out[0], LightConnectionError) and "br" in str(out[0])


def test_statuses_carry_what_the_sdk_error_carries() -> None:
    err = json.dumps({"error": {"message": "slow down", "code": "rate_limit"}}).encode()
    raw = (b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: %d\r\n\r\n" % len(err)) + err
    redirect = b"HTTP/1.1 302 Found\r\nLocation: http://elsewhere.example/v1\r\nContent-Length: 0\r\n\r\n"
    out, conns = _run(lambda n: raw if n == 0 else redirect, 2)
    first, second = out
    assert isinstance(first, StatusError) and first.status_code == 429 and first.headers["retry-after"] == "2"
    assert first.body == {"message": "slow down", "code": "rate_limit"} and first.message == "Error code: 429 - slow down"
    assert isinstance(second, StatusError) and second.headers["location"] == "http://elsewhere.example/v1"
    assert conns == [1, 1]  # an error status with a whole body leaves the connection usable


def test_a_broken_status_line_or_a_reset_is_a_connection_error() -> None:
    out, _ = _run(lambda n: b"SMTP ready\r\n\r\n", 1)
    assert isinstance(out[0], LightConnectionError)
    out, _ = _run(lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", 1, close_after=True)
    assert isinstance(out[0], LightConnectionError) and isinstance(out[0].__cause__, asyncio.IncompleteReadError)


def test_the_adapter_picks_the_light_client_only_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                "no_proxy", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    assert OpenAIAdapter("m", base_url="http://127.0.0.1:8000/v1").transport == "light"
    assert OpenAIAdapter("m").transport == "sdk"  # api.openai.com: the SDK
    assert OpenAIAdapter("m", base_url="http://127.0.0.1:8000/v1", transport="sdk").transport == "sdk"
    assert AnthropicAdapter("m", base_url="http://127.0.0.1:8000", api_key_env="OPENAI_API_KEY").transport == "sdk"
    assert GeminiAdapter("m", base_url="http://127.0.0.1:8000", api_key_env="OPENAI_API_KEY").transport == "sdk"
    assert pick("auto", "https://gw.example/v1?api-version=1") == "sdk"  # a query: as the SDK joins it
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert pick("auto", "https://gw.example/v1") == "sdk" and pick("auto", "http://gw.example/v1") == "light"
    monkeypatch.setenv("NO_PROXY", "gw.example")
    assert pick("auto", "https://gw.example/v1") == "light"
    with pytest.raises(ValueError, match="needs a base_url"):
        OpenAIAdapter("m", transport="light")
    with pytest.raises(ValueError, match="not one of"):
        OpenAIAdapter("m", base_url="http://127.0.0.1:8000/v1", transport="fast")


def test_headers_hold_the_key_the_gateway_header_and_the_sdks_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.delenv("OPENAI_PROJECT_ID", raising=False)
    h = light_headers("sk-test-0123456789", "api-key")
    assert h["Authorization"] == "Bearer sk-test-0123456789" and h["api-key"] == "sk-test-0123456789"
    assert h["OpenAI-Organization"] == "org-1" and "OpenAI-Project" not in h
    assert h["Accept-Encoding"] == "gzip, deflate"
    with pytest.raises(ValueError, match="line break"):  # never a header of the key's own making
        LightClient("http://127.0.0.1:1/v1", headers=light_headers("sk-x\r\nX-Evil: 1", None), connect_timeout=1.0)


def test_models_yaml_names_the_transport(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "models.yaml"
    path.write_text("models:\n"
                    "  local: {provider: openai, model: m, base_url: 'http://127.0.0.1:8000/v1'}\n"
                    "  pinned: {provider: openai, model: m, base_url: 'http://127.0.0.1:8000/v1', transport: sdk}\n",
                    encoding="utf-8")
    assert load_adapter("local", models_file=path).transport == "light"  # type: ignore[attr-defined]
    assert load_adapter("pinned", models_file=path).transport == "sdk"  # type: ignore[attr-defined]
    for entry, said in (("{provider: openai, model: m, transport: fast}", "'fast'; choices: auto, light, sdk"),
                        ("{provider: anthropic, model: m, transport: light}", "applies to provider 'openai' or 'vllm' only")):
        path.write_text(f"models:\n  x: {entry}\n", encoding="utf-8")
        with pytest.raises(ModelsFileError, match=re.escape(said)):
            load_models_file(path)


def test_the_json_body_is_the_encoders_byte_for_byte_with_data_urls_spliced() -> None:
    jpeg = prepare_image(_png(), fmt="jpeg")  # a real data URL, as the adapter sends it
    url = VerbatimJSON("data:image/png;base64," + "iVBORw0KGgo+/=" * 800)
    assert isinstance(jpeg.data_url, VerbatimJSON)
    for body in (
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "Q: é?"},
                                                                {"type": "image_url", "image_url": {"url": url}}]}]},
        {"two": [url, jpeg.data_url, url], "n": 1.5, "none": None, "flag": True},
        {"plain": "data:image/png;base64," + "A" * 5000, "quoted": 'x"' * 3000, "uni": "é" * 5000},  # not marked
        {"short": VerbatimJSON("abc"), "tuple": (url,)},
        {"fake": "medrcube-splice-" + "ab" * 16 + "-0", "url": url},  # a prompt cannot name the client's token
    ):
        expected = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        assert json_body(body, "medrcube-splice-" + "cd" * 16) == expected


def _png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (300, 200), (10, 200, 30)).save(buf, format="PNG")
    return buf.getvalue()



def test_written_is_set_once_a_request_is_out_before_its_answer() -> None:
    async def go() -> None:
        got, answer = asyncio.Event(), asyncio.Event()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            got.set()
            await answer.wait()
            writer.write(_ok(b"{}"))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        client = _client(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1")
        try:
            assert not client.written.is_set()
            post = asyncio.create_task(client.post("chat/completions", b"{" + b" " * 300_000 + b"}"))
            await got.wait()  # the server read the whole body; no answer yet
            assert client.written.is_set() and not post.done()
            answer.set()
            assert await post == b"{}"
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(go(), 30))


def test_the_adapter_says_written_after_its_first_request_on_the_light_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")

    async def go() -> None:
        conns, url, stop = await _serve(lambda n: _ok(json.dumps(
            {"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}], "model": "m"}).encode()), 1)
        adapter = OpenAIAdapter("m", base_url=url)
        sdk = OpenAIAdapter("m", base_url=url, transport="sdk")
        try:
            await asyncio.wait_for(sdk.request_written(), 10)  # the SDK cannot tell: at once
            assert adapter.transport == "light"
            waiting = asyncio.create_task(adapter.request_written())
            await asyncio.sleep(0.05)
            assert not waiting.done()
            [response] = await adapter.generate([Request(key="k", item_id="i", prompt="?", options=("a", "b"))])
            assert response.text == "A"
            await asyncio.wait_for(waiting, 10)
        finally:
            await adapter.aclose()
            await sdk.aclose()
            await stop()

    asyncio.run(go())


def test_a_proxy_variable_in_any_case_is_read_as_urllib_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no variable ending in "_proxy" the light client is picked without urllib's import; any
    such variable, in any case, is read by urllib itself (an empty one applies to nothing)."""
    import os
    import subprocess
    import sys

    for name in [n for n in os.environ if n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    script = ("import sys\nfrom medrcube.models.light_http import pick\n"
              "print(pick('auto', 'https://gw.example/v1'), 'urllib.request' in sys.modules)")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=dict(os.environ))
    assert ran.stdout.split() == ["light", "False"]
    monkeypatch.setenv("Https_Proxy", "http://proxy.example:3128")
    assert pick("auto", "https://gw.example/v1") == "sdk"
    monkeypatch.setenv("Https_Proxy", "")
    assert pick("auto", "https://gw.example/v1") == "light"
