"""OpenAIAdapter end to end, through its light client and through the real `openai`
client (every test runs with both), against the scripted local server.

Every fault class of the server is survived or reported as the right ErrorKind; the
numbers asserted (attempts, statuses, in-flight maxima, encodings) are counted by the
server or by the test's own image readers, never taken from the adapter's word alone.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import hashlib
import io
import json
import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from medrcube.models.base import ErrorKind, ImageInput, ModelAdapter, Request, Response
from medrcube.models.images import ImageCache, ImageError, prepare_image
from medrcube.models.openai_adapter import (
    APIKeyMissingError,
    OpenAIAdapter,
    RetryPolicy,
    TokenBucket,
    parse_retry_after,
)
from medrcube.testing.server import ScriptedServer

KEY_ENV = "MEDRCUBE_TEST_OPENAI_KEY"
KEY = "sk-proj-MARKER-7f3a9c1e5b2d4f60"


@pytest.fixture(autouse=True, params=("auto", "sdk"), ids=("light", "sdk"))
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test through both transports: the light client ("auto" for a base URL without a
    proxy: tests/models/test_light_http.py checks the choice) and the real `openai` client."""
    monkeypatch.setattr(OpenAIAdapter, "default_transport", str(request.param))
    return str(request.param)


# ---------------------------------------------------------------------------- helpers


def prompt(question: str, options: Sequence[str] = ("lung", "heart", "brain")) -> str:
    lines = "\n".join(f"{'ABCDEFGH'[i]}. {o}" for i, o in enumerate(options))
    return f"Question: {question}\nOptions:\n{lines}\nAnswer with the option's letter from the given choices directly."


def encode(im: Image.Image, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt)
    return buf.getvalue()


class CountingImage:
    """An image whose reader counts how often it is read (= decoded by the adapter)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.reads = 0
        self._lock = threading.Lock()
        self.input = ImageInput(hashlib.sha256(data).hexdigest(), self.read)

    def read(self) -> bytes:
        with self._lock:
            self.reads += 1
        return self.data


def req(question: str = "q", *, images: Sequence[ImageInput] = (), item: str | None = None, **params: Any) -> Request:
    return Request(key=f"k-{item or question}", item_id=item or question, prompt=prompt(question),
                   images=tuple(images), params=params)


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY_ENV


@pytest.fixture
def make_adapter(key_env: str) -> Callable[..., OpenAIAdapter]:
    """An adapter on a server, with fast retries and a fresh image cache."""

    def make(server: ScriptedServer, model: str = "scripted", **kw: Any) -> OpenAIAdapter:
        kw.setdefault("api_key_env", key_env)
        kw.setdefault("timeout", 5.0)
        kw.setdefault("backoff_base", 0.01)
        kw.setdefault("backoff_max", 0.05)
        kw.setdefault("image_cache", ImageCache())
        kw.setdefault("seed", 0)
        return OpenAIAdapter(model, base_url=server.base_url, **kw)

    return make


def run(adapter: OpenAIAdapter, requests: Sequence[Request]) -> list[Response]:
    async def go() -> list[Response]:
        try:
            return await adapter.generate(requests)
        finally:
            await adapter.aclose()

    return asyncio.run(go())


# ---------------------------------------------------------------------------- success


def test_protocol_and_plain_success(scripted_server, make_adapter):
    scripted_server.set_script({"answers": {"q1": "B", "q2": "The answer is C."}, "latency": 0.01})
    adapter = make_adapter(scripted_server, params={"temperature": 0.0, "top_p": None, "max_completion_tokens": 64})
    assert isinstance(adapter, ModelAdapter)
    out = run(adapter, [req("q1"), req("q2", seed=3), req("other")])
    assert [r.text for r in out] == ["B", "The answer is C.", "A"]
    assert all(r.ok and r.attempts == 1 and not r.refused for r in out)
    assert all(r.latency_s > 0 and r.usage and r.usage["total_tokens"] > 0 for r in out)
    s = scripted_server.stats()
    assert s["total"] == 3 and s["models"] == {"scripted": 3} and s["auth"] == {"present": 3, "absent": 0}
    params = {r["question"]: r["params"] for r in s["requests"]}
    assert params["q1"] == {"temperature": 0.0, "max_completion_tokens": 64, "model": "scripted"}  # None dropped
    assert params["q2"]["seed"] == 3  # per-request params pass through


def test_request_param_none_removes_an_adapter_default(scripted_server, make_adapter):
    adapter = make_adapter(scripted_server, params={"temperature": 0.7})
    run(adapter, [req("q", temperature=None)])
    assert "temperature" not in scripted_server.stats()["requests"][0]["params"]


def test_order_is_kept_under_random_latency(scripted_server, make_adapter):
    questions = [f"question {i}" for i in range(30)]
    scripted_server.set_script({"answers": {q: f"reply {i}" for i, q in enumerate(questions)},
                                "latency": {"uniform": [0.0, 0.05]}, "seed": 3})
    out = run(make_adapter(scripted_server, concurrency=8), [req(q) for q in questions])
    assert [r.text for r in out] == [f"reply {i}" for i in range(30)]


def test_image_is_sent_as_a_downscaled_data_url(scripted_server, make_adapter):
    big = CountingImage(encode(Image.new("RGB", (2000, 1000), (200, 10, 10))))
    small_jpeg = CountingImage(encode(Image.new("L", (300, 200), 90), "JPEG"))
    out = run(make_adapter(scripted_server, image_max_side=512),
              [req("q-big", images=[big.input]), req("q-small", images=[small_jpeg.input]), req("q-none")])
    assert all(r.ok for r in out)
    seen = {r["question"]: r["images"] for r in scripted_server.stats()["requests"]}
    (b,) = seen["q-big"]
    assert (b["mime"], b["format"], b["width"], b["height"]) == ("image/png", "PNG", 512, 256)
    (j,) = seen["q-small"]
    # a JPEG that fits keeps its size and format, but is re-encoded from its pixels
    assert (j["mime"], j["width"], j["height"]) == ("image/jpeg", 300, 200)
    assert j["sha256"] != hashlib.sha256(small_jpeg.data).hexdigest()[:16]
    assert j["sha256"] == prepare_image(small_jpeg.data, max_side=512).sha256[:16]  # the digest of what was sent
    assert seen["q-none"] == []
    assert scripted_server.stats()["images"] == {"with": 2, "without": 1, "total": 2}


def test_each_distinct_image_is_prepared_once(scripted_server, make_adapter):
    rng = np.random.default_rng(0)
    images = [CountingImage(encode(Image.fromarray(rng.integers(0, 255, (64, 1200), dtype=np.uint8))))
              for _ in range(3)]
    cache = ImageCache()
    requests = [req(f"q{i}", images=[images[i % 3].input]) for i in range(24)]
    adapter = make_adapter(scripted_server, image_cache=cache, image_max_side=256, concurrency=24)
    out = run(adapter, requests)
    assert all(r.ok for r in out)
    assert [im.reads for im in images] == [1, 1, 1]
    assert cache.prepared == 3
    # a second adapter in the same process shares the cache: nothing is read again
    run(make_adapter(scripted_server, image_cache=cache, image_max_side=256), requests[:6])
    assert [im.reads for im in images] == [1, 1, 1]
    sizes = {(i["width"], i["height"]) for r in scripted_server.stats()["requests"] for i in r["images"]}
    assert sizes == {(256, 14)}


def test_image_preparation_runs_a_bounded_way_ahead(scripted_server, make_adapter):
    """A big batch never holds more than 2 x concurrency prepared payloads at once."""
    scripted_server.set_script({"latency": 0.01})
    ahead: list[int] = []

    def reader(data: bytes) -> Callable[[], bytes]:
        def read() -> bytes:
            ahead.append(len(ahead) + 1 - scripted_server.stats(log=False)["by_outcome"].get("200", 0))
            return data
        return read

    rng = np.random.default_rng(1)
    images = []
    for _ in range(30):
        data = encode(Image.fromarray(rng.integers(0, 255, (8, 8), dtype=np.uint8)))
        images.append(ImageInput(hashlib.sha256(data).hexdigest(), reader(data)))
    out = run(make_adapter(scripted_server, concurrency=2), [req(f"q{i}", images=[im]) for i, im in enumerate(images)])
    assert all(r.ok for r in out) and len(ahead) == 30
    assert max(ahead) <= 4


def test_unreadable_image_fails_its_request_only(scripted_server, make_adapter):
    bad = ImageInput("deadbeef" * 8, lambda: b"not an image at all")
    out = run(make_adapter(scripted_server), [req("good"), req("bad", images=[bad]), req("good2")])
    assert out[0].ok and out[2].ok
    assert out[1].error_kind is ErrorKind.INTERNAL and "deadbeef" in out[1].error and "not a readable image" in out[1].error
    assert scripted_server.stats()["total"] == 2  # nothing was sent for the broken item


def test_credentials_in_the_base_url_are_refused_without_echo(scripted_server, key_env, monkeypatch):
    # Refused in specs and models.yaml, and in OPENAI_BASE_URL or a direct construction too.
    for url in (scripted_server.base_url.replace("http://", "http://user:pa55-Word@"),
                scripted_server.base_url + "?api-key=pa55-Word", scripted_server.base_url + "?sig=pa55-Word&x=1"):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        with pytest.raises(ValueError, match="holds credentials") as info:
            OpenAIAdapter("scripted", api_key_env=key_env, timeout=5.0, image_cache=ImageCache(), seed=0)
        assert "pa55-Word" not in str(info.value) and "environment variable" in str(info.value)
    assert scripted_server.stats()["total"] == 0  # nothing was sent


def test_a_404_for_the_model_name_says_model_not_found(scripted_server, make_adapter):
    scripted_server.set_script({"models": ["served-name"]})
    out = run(make_adapter(scripted_server), [req("q")])
    assert out[0].error_kind is ErrorKind.BAD_REQUEST and out[0].attempts == 1
    assert "model not found" in out[0].error and "'scripted'" in out[0].error
    assert scripted_server.base_url in out[0].error and "does not exist" in out[0].error  # the provider's words


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_an_image_truncated_past_its_header_fails_its_request_not_sent(scripted_server, make_adapter, fmt):
    # It fits max_side and the format: once passed through undecoded, its answer was graded.
    whole = encode(Image.radial_gradient("L").resize((64, 64)).convert("RGB"), fmt)
    cut = whole[: int(len(whole) * 0.8)]
    with Image.open(io.BytesIO(cut)) as im:
        assert im.size == (64, 64)  # the header is intact
    bad = ImageInput("c0ffee00" * 8, lambda: cut)
    good = ImageInput(hashlib.sha256(whole).hexdigest(), lambda: whole)
    out = run(make_adapter(scripted_server), [req("good", images=[good]), req("bad", images=[bad])])
    assert out[0].ok
    assert out[1].error_kind is ErrorKind.INTERNAL and out[1].text is None
    assert "c0ffee00" in out[1].error and "cannot decode" in out[1].error and "truncated" in out[1].error
    assert scripted_server.stats()["total"] == 1  # nothing was sent for the truncated image
    assert not prepare_image(whole, max_side=100).passthrough  # a whole one is never sent as it came either


# ---------------------------------------------------------------------------- retried faults


def test_429_burst_with_retry_after_is_retried(scripted_server, make_adapter):
    scripted_server.set_script({"faults": [
        {"fault": "status", "status": 429, "retry_after_ms": 30, "first": 3, "per_prompt": True}]})
    out = run(make_adapter(scripted_server), [req(f"q{i}") for i in range(5)])
    assert all(r.ok and r.attempts == 4 for r in out)
    assert scripted_server.stats()["by_status"] == {"429": 15, "200": 5}


def test_429_without_retry_after_backs_off_and_succeeds(scripted_server, make_adapter):
    scripted_server.set_script({"faults": [{"fault": "status", "status": 429, "first": 4}]})
    out = run(make_adapter(scripted_server), [req("q")])
    assert out[0].ok and out[0].attempts == 5


def test_retry_after_is_honoured(scripted_server, make_adapter, caplog):
    """The client waits what the server asked before its retry: told by the wait it chose
    (its own log line), not by a gap timed at the server (a loaded machine only makes
    waits longer; how precisely they hold is benchmarks/' to measure)."""
    scripted_server.set_script({"faults": [
        {"fault": "status", "status": 429, "retry_after_ms": 400, "match": "ms", "first": 1},
        {"fault": "status", "status": 503, "retry_after": 1, "match": "sec", "first": 1}]})
    with caplog.at_level(logging.DEBUG, logger="medrcube.models.openai"):
        out = run(make_adapter(scripted_server, backoff_base=0.0), [req("ms"), req("sec")])
    assert all(r.ok and r.attempts == 2 for r in out)
    assert scripted_server.stats()["total"] == 4  # one refusal and one answer each
    chosen = {m.group(1): float(m.group(2)) for r in caplog.records
              if (m := re.search(r"item (\w+): attempt 1 failed \(.*\); retrying in ([\d.]+)s", r.getMessage()))}
    assert chosen.keys() == {"ms", "sec"}
    assert chosen["ms"] >= 0.4 and chosen["sec"] >= 1.0, chosen


def test_5xx_storm_is_survived(scripted_server, make_adapter):
    scripted_server.set_script({"seed": 1, "faults": [
        {"fault": "status", "status": 500, "fraction": 0.3},
        {"fault": "status", "status": 502, "fraction": 0.3},
        {"fault": "status", "status": 503, "fraction": 0.3, "retry_after": 0}]})
    out = run(make_adapter(scripted_server, max_retries=20, concurrency=8), [req(f"q{i}") for i in range(30)])
    assert all(r.ok for r in out)
    s = scripted_server.stats()
    assert s["by_status"]["200"] == 30
    assert sum(s["by_status"].get(c, 0) for c in ("500", "502", "503")) == sum(r.attempts - 1 for r in out) > 0


def test_hang_times_out_and_is_retried(scripted_server, make_adapter):
    # the deadline is long enough that a loaded machine never times out the good answer,
    # the hang far longer than the deadline
    scripted_server.set_script({"faults": [{"fault": "hang", "seconds": 60, "first": 1}]})
    out = run(make_adapter(scripted_server, timeout=4.0), [req("q")])
    assert out[0].ok and out[0].attempts == 2
    s = scripted_server.stats()
    assert s["by_fault"] == {"hang": 1} and s["by_outcome"] == {"200": 1}  # the hang is still hanging


@pytest.mark.parametrize("fault", ["malformed", "truncated", "empty_choices", "drop", "reset"])
def test_broken_responses_are_retried(scripted_server, make_adapter, fault):
    scripted_server.set_script({"faults": [{"fault": fault, "first": 2}]})
    out = run(make_adapter(scripted_server), [req("q")])
    assert out[0].ok and out[0].text == "A" and out[0].attempts == 3
    assert scripted_server.stats()["by_outcome"] == {fault: 2, "200": 1}


@pytest.mark.parametrize(
    ("fault", "kind", "words"),
    [
        ({"fault": "malformed"}, ErrorKind.MALFORMED, "invalid JSON"),
        ({"fault": "empty_choices"}, ErrorKind.MALFORMED, "no choices"),
        ({"fault": "status", "status": 429}, ErrorKind.RATE_LIMIT, "429 x4"),
        ({"fault": "status", "status": 502}, ErrorKind.SERVER, "HTTP 502"),
        ({"fault": "reset"}, ErrorKind.CONNECTION, "check the base URL"),
        ({"fault": "hang", "seconds": 60}, ErrorKind.TIMEOUT, "timeout"),
    ],
)
def test_persistent_faults_end_in_a_recorded_error(scripted_server, make_adapter, fault, kind, words):
    scripted_server.set_script({"faults": [fault]})
    # 3 s: no loaded machine turns a malformed answer into a timeout (the hang waits 4 x 3 s)
    out = run(make_adapter(scripted_server, max_retries=3, timeout=3.0), [req("q")])
    assert out[0].text is None and out[0].error_kind is kind and words in out[0].error
    assert out[0].attempts == 4 == scripted_server.stats()["total"]


# ---------------------------------------------------------------------------- fail fast


@pytest.mark.parametrize(
    ("status", "kind", "words"),
    [
        (401, ErrorKind.AUTH, [f"${KEY_ENV}", "was rejected"]),
        (403, ErrorKind.AUTH, [f"${KEY_ENV}", "'scripted'"]),
        (404, ErrorKind.BAD_REQUEST, ["no such route", "'scripted'", "base URL", "/v1"]),
        (400, ErrorKind.BAD_REQUEST, ["bad request. Provider said: Incorrect API key"]),  # no hint that fits
        (422, ErrorKind.BAD_REQUEST, ["HTTP 422"]),
    ],
)
def test_client_errors_fail_fast_with_advice(scripted_server, make_adapter, status, kind, words):
    scripted_server.set_script({"faults": [{"fault": "status", "status": status,
                                            "message": f"Incorrect API key provided: {KEY[:10]}****{KEY[-4:]}"}]})
    out = run(make_adapter(scripted_server), [req("q")])
    assert out[0].error_kind is kind and out[0].attempts == 1
    for w in words:
        assert w in out[0].error
    assert KEY[:10] not in out[0].error  # the provider's masked key is cut out
    assert scripted_server.stats()["total"] == 1


@pytest.mark.parametrize(("said", "hint"), [
    ("Unsupported parameter: 'temperature' is not supported with this model.", "null in models.yaml"),
    ("Server is pinned to '/models/tiny'; requested 'scripted'.", "refuses the model name 'scripted'"),
    ("image too small", None),
])
def test_a_400_hint_is_given_only_when_the_providers_words_match_it(scripted_server, make_adapter, said, hint):
    scripted_server.set_script({"faults": [{"fault": "status", "status": 400, "message": said}]})
    error = run(make_adapter(scripted_server), [req("q")])[0].error or ""
    assert f"Provider said: {said}" in error
    if hint is None:
        assert "models.yaml" not in error and "model name" not in error
    else:
        assert hint in error



def test_unknown_model_is_a_404_naming_the_model(scripted_server, make_adapter):
    scripted_server.set_script({"models": ["vision-1"]})
    out = run(make_adapter(scripted_server, model="visoin-1"), [req("q")])
    assert out[0].error_kind is ErrorKind.BAD_REQUEST and "'visoin-1'" in out[0].error
    assert scripted_server.stats()["total"] == 1


def test_insufficient_quota_is_not_retried(scripted_server, make_adapter):
    scripted_server.set_script({"faults": [{"fault": "status", "status": 429, "code": "insufficient_quota"}]})
    out = run(make_adapter(scripted_server), [req("q")])
    assert out[0].error_kind is ErrorKind.RATE_LIMIT and "billing" in out[0].error and out[0].attempts == 1


def test_a_body_with_a_duplicate_key_is_an_error_not_a_choice(scripted_server, make_adapter):
    # {"content": "A", "content": "C"}: a JSON reader keeps the last; the adapter refuses both
    scripted_server.set_script({"default": "C", "faults": [{"fault": "duplicate_key", "text": "A"}]})
    out = run(make_adapter(scripted_server, max_retries=1, backoff_base=0.0), [req("q")])
    assert not out[0].ok and out[0].text is None
    assert out[0].error_kind is ErrorKind.MALFORMED and "'content' appears twice" in (out[0].error or "")
    assert out[0].attempts == 2 and scripted_server.stats()["total"] == 2  # retried like any malformed body


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("fault", "text"),
    [
        ({"fault": "content_filter", "text": "I can't"}, "I can't"),
        ({"fault": "content_filter"}, ""),
        ({"fault": "refusal", "text": "I won't read this image."}, "I won't read this image."),
        ({"fault": "status", "status": 400, "code": "content_filter", "message": "filtered prompt"}, "filtered prompt"),
    ],
)
def test_refusals_are_an_outcome_not_an_error(scripted_server, make_adapter, fault, text):
    scripted_server.set_script({"faults": [fault]})
    out = run(make_adapter(scripted_server), [req("q")])
    assert out[0].ok and out[0].refused and out[0].text == text and out[0].attempts == 1


# ---------------------------------------------------------------------------- limits


def test_concurrency_limit_is_respected_at_the_server(scripted_server, make_adapter):
    # 0.2 s per answer: the sends overlap at the server however late a loaded client sends
    scripted_server.set_script({"latency": 0.2})
    out = run(make_adapter(scripted_server, concurrency=4), [req(f"q{i}") for i in range(20)])
    assert all(r.ok for r in out)
    assert 2 <= scripted_server.stats()["max_in_flight"] <= 4


def test_rpm_limit_schedules_the_sends(scripted_server, make_adapter):
    # Asserted on the bucket's own schedule, not on gaps seen at the server: a loaded
    # machine delays a send past its due time (the server then sees gaps shrink or grow),
    # but cannot make the bucket grant one early. Its precision on the wire is measured in
    # benchmarks/rate_limiter.py (RESULTS.md section 15).
    adapter = make_adapter(scripted_server, rpm=600, rpm_burst=1, concurrency=8)
    out = run(adapter, [req(f"q{i}") for i in range(5)])
    assert all(r.ok for r in out)
    bucket = adapter.rate_limiter
    assert bucket is not None and bucket.granted == scripted_server.stats()["total"] == 5  # every send through it
    assert bucket.first_due is not None and bucket.last_due is not None
    assert bucket.last_due - bucket.first_due >= 4 * 0.1 - 1e-9  # 600 per minute: one every 0.1 s


@settings(max_examples=200, deadline=None)
@given(
    rpm=st.floats(min_value=1.0, max_value=100_000.0),
    burst=st.integers(min_value=1, max_value=8),
    arrivals=st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=1, max_size=40).map(sorted),
)
def test_token_bucket_never_grants_faster_than_its_rate(rpm: float, burst: int, arrivals: list[float]) -> None:
    """Whenever requests arrive, the due times keep the rate: no send before it arrives,
    and any k consecutive sends span at least (k - burst) / rate."""
    now = [0.0]
    bucket = TokenBucket(rpm, burst=burst, clock=lambda: now[0])
    due = []
    for t in arrivals:
        now[0] = t
        due.append(t + bucket.reserve())
    rate = rpm / 60.0
    assert all(d >= t for d, t in zip(due, arrivals, strict=True))
    assert due == sorted(due)  # granted in arrival order
    for i in range(len(due)):
        for j in range(i + burst, len(due)):
            assert due[j] - due[i] >= (j - i + 1 - burst) / rate * (1 - 1e-9) - 1e-9
    assert bucket.granted == len(arrivals) and bucket.first_due == due[0] and bucket.last_due == due[-1]


def test_token_bucket_reserves_in_order():
    now = [0.0]
    bucket = TokenBucket(60, burst=2, clock=lambda: now[0])  # one per second, two at once
    assert [bucket.reserve() for _ in range(4)] == [0.0, 0.0, 1.0, 2.0]
    now[0] = 10.0  # refilled, but only up to the burst (the two reservations ahead are repaid first)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 1.0]
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_token_bucket_paces_sends_woken_late():
    """Waiters a stalled event loop wakes together go out at the rate, not at once: their
    due times have all passed, but the sends' own bucket holds only `burst` tokens."""
    now = [0.0]
    bucket = TokenBucket(60, burst=2, clock=lambda: now[0])  # one per second, two at once
    assert [bucket.reserve() for _ in range(6)] == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    now[0] = 100.0  # every waiter wakes at once, long after its due time
    assert [bucket.conform() == 0.0 for _ in range(6)] == [True, True, False, False, False, False]
    now[0] = 101.0
    assert bucket.conform() == 0.0 and bucket.conform() == pytest.approx(1.0)
    fresh = TokenBucket(60, burst=1, clock=lambda: now[0])
    assert fresh.reserve() == 0.0 and fresh.conform() == 0.0  # on time: no extra wait


def test_retry_policy_full_jitter_and_caps():
    import random

    policy = RetryPolicy(max_retries=3, base=0.5, cap=2.0, retry_after_cap=5.0)
    rng = random.Random(0)
    for retry, ceiling in ((1, 0.5), (2, 1.0), (3, 2.0), (6, 2.0)):
        draws = [policy.delay(retry, None, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws) and max(draws) > ceiling * 0.8
    assert policy.delay(1, 3.0) == 3.0 and policy.delay(1, 60.0) == 5.0
    assert policy.max_attempts == 4


def test_parse_retry_after_forms():
    now = 1_700_000_000.0
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "150", "Retry-After": "9"}) == 0.15
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(30.0)
    assert parse_retry_after({"Retry-After": email.utils.formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "-3"}) is None
    assert parse_retry_after({}) is None


def test_retry_after_http_date_end_to_end(scripted_server, make_adapter):
    date = email.utils.formatdate(0, usegmt=True)  # in the past: retry at once
    scripted_server.set_script({"faults": [{"fault": "status", "status": 429, "retry_after": date, "first": 1}]})
    out = run(make_adapter(scripted_server), [req("q")])
    assert out[0].ok and out[0].attempts == 2


# ---------------------------------------------------------------------------- keys and identity


def test_key_never_reaches_what_the_server_records(scripted_server, make_adapter):
    img = CountingImage(encode(Image.new("L", (40, 40), 7)))
    scripted_server.set_script({"faults": [
        {"fault": "status", "status": 429, "retry_after_ms": 1, "match": "limited", "first": 1},
        {"fault": "status", "status": 401, "match": "denied", "message": f"bad key {KEY}"}]})
    adapter = make_adapter(scripted_server)
    out = run(adapter, [req("ok", images=[img.input]), req("limited"), req("denied")])
    recorded = json.dumps(scripted_server.stats())
    assert KEY not in recorded and "MARKER" not in recorded
    assert scripted_server.stats()["auth"]["present"] == 4
    assert "MARKER" not in out[2].error and "[redacted]" in out[2].error
    assert all("MARKER" not in repr(r) for r in out)
    assert "MARKER" not in repr(adapter) + adapter.fingerprint + adapter.spec + json.dumps(adapter.params)


def test_missing_key_is_a_clear_error_before_any_call(monkeypatch):
    monkeypatch.delenv("MEDRCUBE_NO_SUCH_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(APIKeyMissingError, match="MEDRCUBE_NO_SUCH_KEY") as err:
        OpenAIAdapter("gpt-x", api_key_env="MEDRCUBE_NO_SUCH_KEY")
    assert "models.yaml" in str(err.value)


def test_local_server_needs_no_key(scripted_server, monkeypatch):
    monkeypatch.delenv("MEDRCUBE_NO_SUCH_KEY", raising=False)
    adapter = OpenAIAdapter("local", base_url=scripted_server.base_url, api_key_env="MEDRCUBE_NO_SUCH_KEY",
                            image_cache=ImageCache())
    out = run(adapter, [req("q")])
    assert out[0].ok and adapter.spec == f"openai:local@{scripted_server.base_url}"


def test_fingerprint_tracks_what_changes_answers(key_env, monkeypatch):
    def fp(**kw: Any) -> str:
        return OpenAIAdapter("m", api_key_env=key_env, **kw).fingerprint

    base = fp(params={"temperature": 0})
    assert base.startswith("openai:m:")
    # The endpoint is part of it: the same model name elsewhere is another model, unless
    # models.yaml says the endpoints serve the same one (endpoint_identity).
    local = fp(params={"temperature": 0}, base_url="http://127.0.0.1:9/v1")
    assert local != base and local != fp(params={"temperature": 0}, base_url="http://127.0.0.1:10/v1")
    assert fp(params={"temperature": 0}, base_url="http://127.0.0.1:9/v1/") == local
    assert fp(params={"temperature": 0}, base_url="http://127.0.0.1:9/v1", endpoint_identity="same") == fp(
        params={"temperature": 0}, base_url="http://127.0.0.1:10/v1", endpoint_identity="same")
    assert fp(params={"temperature": 0, "top_p": None}) == base  # None is no parameter
    assert fp(params={"temperature": 0, "user": "ci"}) == base  # does not change answers
    monkeypatch.setenv(key_env, "sk-another-key-0000000000")
    assert fp(params={"temperature": 0}) == base  # not the key
    assert fp(params={"temperature": 1}) != base
    assert fp(params={"temperature": 0}, image_max_side=512) != base
    assert OpenAIAdapter("m2", api_key_env=key_env, params={"temperature": 0}).fingerprint != base


def test_adapter_survives_a_new_event_loop(scripted_server, make_adapter):
    adapter = make_adapter(scripted_server)
    first = asyncio.run(adapter.generate([req("q1")]))
    second = asyncio.run(adapter.generate([req("q2")]))  # a new loop: a new client, no "loop closed"
    asyncio.run(adapter.aclose())
    assert first[0].ok and second[0].ok


def test_constructor_rejects_bad_settings(key_env):
    for kw in ({"concurrency": 0}, {"timeout": 0}, {"image_max_side": -1}, {"image_format": "gif"}):
        with pytest.raises(ValueError):
            OpenAIAdapter("m", api_key_env=key_env, **kw)


# ---------------------------------------------------------------------------- image preparation


def test_prepare_image_modes_and_errors():
    sixteen = Image.fromarray(np.arange(0, 60000, 60, dtype=np.uint16).reshape(40, 25))
    assert sixteen.mode.startswith("I")
    p = prepare_image(encode(sixteen), max_side=100)  # fits, but 16-bit: converted
    assert p.mime == "image/png" and not p.passthrough and (p.width, p.height) == (25, 40)
    with Image.open(io.BytesIO(base64.b64decode(p.data_url.split(",", 1)[1]))) as im:
        assert im.mode == "L" and im.getextrema() == (0, 255)  # windowed to its own range
    assert max(prepare_image(encode(sixteen), max_side=20).width, 0) == 13  # 25x40 -> 13x20
    rgba = encode(Image.new("RGBA", (10, 10), (1, 2, 3, 4)))
    assert prepare_image(rgba, max_side=100).mime == "image/png"  # rebuilt (test_png_repack.py), never passed through
    as_jpeg = prepare_image(rgba, max_side=100, fmt="jpeg")
    assert as_jpeg.mime == "image/jpeg" and not as_jpeg.passthrough
    tiff = encode(Image.new("RGB", (8, 8)), "TIFF")
    assert prepare_image(tiff, max_side=0).mime == "image/png"  # other formats become PNG
    with pytest.raises(ImageError, match="not a readable image"):
        prepare_image(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(ImageError, match="cannot decode"):
        prepare_image(encode(Image.new("RGB", (3000, 40)))[:200], max_side=100)  # truncated


def test_image_cache_is_bounded_in_bytes():
    imgs = [CountingImage(encode(Image.new("L", (32, 32), i))) for i in range(5)]
    sizes = [len(prepare_image(im.data, max_side=64).data_url) for im in imgs]
    cache = ImageCache(max_bytes=sizes[3] + sizes[4])  # room for the last two, not three
    assert sizes[2] + sizes[3] + sizes[4] > cache.max_bytes
    for im in imgs:
        cache.get_sync(im.input, max_side=64)
    assert len(cache) == 2 and cache.prepared == 5
    cache.get_sync(imgs[-1].input, max_side=64)
    assert imgs[-1].reads == 1 and cache.hits >= 1  # the newest is still there
    cache.get_sync(imgs[0].input, max_side=64)
    assert imgs[0].reads == 2  # the oldest was evicted
