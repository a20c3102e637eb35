"""The OpenAI-compatible chat adapter (OpenAI, Azure-style gateways, vLLM, SGLang, TGI ...).

It sends each request to `/chat/completions` with the official `openai.AsyncOpenAI`
client, created with `max_retries=0`: the retry loop is ours so that every attempt is
counted and `Retry-After` is honoured exactly.

- Images go as base64 data URLs, downscaled to `image_max_side` (models/images.py); each
  distinct image is prepared once per process, on a worker thread.
- At most `concurrency` HTTP requests are in flight; with `rpm`, a token bucket spaces
  them to that many requests per minute (every attempt counts, as providers count them).
- 429, 5xx, 408/409, timeouts, connection errors and malformed bodies are retried with
  exponential backoff and full jitter, or after exactly the `Retry-After` /
  `retry-after-ms` the server asked for (capped). 400, 401, 403, 404, 422 fail at once,
  with a message that says what to check.
- A `content_filter` finish or a provider refusal is `Response(refused=True)`.
- `generate` never raises for a failed request: the failure is a Response with `error`.
- Each Response carries `attempts`, `usage` (the provider's token counts) and `latency_s`:
  from the first send to the final answer, retries and their waits included, time queued
  behind the concurrency and rate limits before the first send excluded.

The API key is read from its environment variable when the adapter is built and handed
to the client only; it is never logged, never put in an error message, never part of
the fingerprint.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import logging
import os
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.models.base import ErrorKind, Request, Response
from medrcube.models.confidence import from_logprobs
from medrcube.models.images import IMAGE_FORMATS, ImageCache, ImageError, shared_image_cache
from medrcube.models.models_file import redacted_url

__all__ = [
    "APIKeyMissingError", "OpenAIAdapter", "RetryPolicy", "TokenBucket", "parse_retry_after",
]

log = logging.getLogger("medrcube.models.openai")

PLACEHOLDER_KEY = "no-key-needed"  # for local servers (vLLM etc.) that check no key
# Parameters that do not change what the model answers, so not part of the fingerprint.
_NON_ANSWER_PARAMS = frozenset({
    "user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier",
    "stream_options", "timeout", "extra_headers",
})
_RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.TIMEOUT,
                        ErrorKind.CONNECTION, ErrorKind.MALFORMED})
_KEY_LIKE = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-\*\.]{3,}")


class APIKeyMissingError(ValueError):
    """The environment variable that should hold the API key is not set."""


# ---------------------------------------------------------------------------- retry policy


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `Retry-After` as
    seconds or as an HTTP date. None when absent or unreadable; never negative."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0 and value == value:  # not NaN
                return value
        except ValueError:
            pass
    ra = lower.get("retry-after")
    if ra is None:
        return None
    ra = ra.strip()
    try:
        value = float(ra)
        return value if value >= 0 and value == value else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait in between.

    Backoff is "full jitter": a uniform draw in [0, min(cap, base * 2**(n-1))] before the
    n-th retry, so that many clients hit by the same outage do not return in lockstep. A
    server's Retry-After is obeyed as given, up to `retry_after_cap` seconds.
    """

    max_retries: int = 6
    base: float = 1.0
    cap: float = 60.0
    retry_after_cap: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base < 0 or self.cap < 0 or self.retry_after_cap < 0:
            raise ValueError(f"retry policy values must be >= 0: {self}")

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        ceiling = min(self.cap, self.base * (2 ** (retry - 1)))
        return (rng or random).uniform(0.0, ceiling)


# ---------------------------------------------------------------------------- rate limit


class TokenBucket:
    """Requests-per-minute limiter: a token bucket whose tokens may be reserved ahead.

    Each `reserve()` takes a token and returns how long the caller must wait for it
    (0 while the bucket holds tokens), so waiters queue in arrival order with no lock
    held across an await. `burst` tokens may go at once; by default one second's worth.
    Thread-safe and independent of any event loop.
    """

    def __init__(self, rpm: float, *, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not rpm or rpm <= 0:
            raise ValueError(f"rpm must be a positive number of requests per minute, not {rpm!r}")
        self.rate = rpm / 60.0
        self.burst = float(burst) if burst is not None else max(1.0, self.rate)
        self._clock = clock
        self._tokens = self.burst
        self._stamp = clock()
        import threading

        self._lock = threading.Lock()

    def reserve(self) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)


# ---------------------------------------------------------------------------- one attempt


@dataclass
class _Attempt:
    """What one HTTP attempt gave: a final response, or an error (retryable or not)."""

    response: Response | None = None
    kind: ErrorKind | None = None
    label: str = ""  # short, for the attempt history: "429", "timeout", "malformed"
    message: str = ""
    retry_after: float | None = None
    retryable: bool = False
    logprobs: Any = None  # the choice's `logprobs` object, read against the request's options


@dataclass
class _LoopState:
    """What belongs to one event loop: the HTTP client and the two semaphores.

    `semaphore` bounds HTTP requests in flight (`concurrency`). `admission` bounds the
    requests that hold a prepared payload (images encoded, waiting or in flight or backing
    off) to twice that: image preparation runs ahead of the wire so that it overlaps the
    model's latency, but a batch of thousands never holds thousands of encoded images.
    """

    loop: asyncio.AbstractEventLoop
    client: Any
    semaphore: asyncio.Semaphore
    admission: asyncio.Semaphore


@dataclass
class AdapterStats:
    """Counters over the adapter's life (for logs and benchmarks)."""

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    errors: Counter[str] = field(default_factory=Counter)


class OpenAIAdapter:
    """An OpenAI-compatible chat model behind the ModelAdapter protocol (models/base.py)."""

    provider = "openai"
    batch_size = 1  # an API takes one request per call; concurrency does the rest

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        params: Mapping[str, Any] | None = None,
        concurrency: int = 16,
        rpm: float | None = None,
        timeout: float = 60.0,
        max_retries: int = 6,
        image_max_side: int = 1024,
        spec: str | None = None,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        retry_after_max: float = 120.0,
        image_format: str = "auto",
        image_cache: ImageCache | None = None,
        rpm_burst: float | None = None,
        seed: int | None = None,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValueError(f"OpenAIAdapter needs a model name, got {model!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, not {concurrency}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout}")
        if image_max_side < 0:
            raise ValueError(f"image_max_side must be >= 0 (0: no downscaling), not {image_max_side}")
        if image_format not in IMAGE_FORMATS:
            raise ValueError(f"image_format {image_format!r} is not one of {', '.join(IMAGE_FORMATS)}")
        self.model = model
        # The standard environment, as the openai client itself would read it, made explicit
        # so that the key check below and the error messages know where requests go.
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key_env = api_key_env
        key = os.environ.get(api_key_env) or None
        if key is None and self.base_url is None:
            raise APIKeyMissingError(
                f"the environment variable {api_key_env} is not set, so there is no API key for "
                f"model {model!r}: export {api_key_env}=<your key> (or set api_key_env in models.yaml to "
                f"the variable that holds it), or give a base_url for a local server that needs no key"
            )
        self._api_key = key or PLACEHOLDER_KEY  # handed to the client only; never logged
        self.params = {k: v for k, v in dict(params or {}).items() if v is not None}
        self.concurrency = int(concurrency)
        self.rpm = rpm
        self.timeout = float(timeout)
        self.retry = RetryPolicy(max_retries=max_retries, base=backoff_base, cap=backoff_max,
                                 retry_after_cap=retry_after_max)
        self.image_max_side = int(image_max_side)
        self.image_format = image_format
        self.images = image_cache if image_cache is not None else shared_image_cache()
        self._bucket = TokenBucket(rpm, burst=rpm_burst) if rpm else None
        self._rng = random.Random(seed)
        self._state: _LoopState | None = None
        self.stats = AdapterStats()
        self.spec = spec or (f"openai:{model}@{base_url}" if base_url else f"openai:{model}")
        self.fingerprint = self._fingerprint()

    def __repr__(self) -> str:
        return f"OpenAIAdapter(spec={self.spec!r}, fingerprint={self.fingerprint!r})"

    def _fingerprint(self) -> str:
        """provider + model + what changes answers; not the base URL, never the key."""
        answer_params = {k: v for k, v in self.params.items() if k not in _NON_ANSWER_PARAMS}
        payload = {"provider": self.provider, "model": self.model, "params": answer_params,
                   "image_max_side": self.image_max_side, "image_format": self.image_format}
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
        return f"{self.provider}:{self.model}:{digest[:16]}"

    # -- the client, per event loop ---------------------------------------------------

    def _loop_state(self) -> _LoopState:
        """The client and semaphore of the running loop (made anew if the loop changed,
        e.g. a caller using asyncio.run per batch: httpx connections belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            from openai import AsyncOpenAI

            client = AsyncOpenAI(api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
                                 max_retries=0)
            self._state = _LoopState(loop, client, asyncio.Semaphore(self.concurrency),
                                     asyncio.Semaphore(2 * self.concurrency))
        return self._state

    async def aclose(self) -> None:
        """Close the HTTP client (a later `generate` opens a new one)."""
        state, self._state = self._state, None
        # A client of another (finished) loop cannot be closed from here; its sockets go
        # with that loop.
        if state is not None and state.loop is asyncio.get_running_loop():
            await state.client.close()

    # -- generation -------------------------------------------------------------------

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        """One response per request, in order; all requests proceed concurrently (up to
        `concurrency` on the wire). Never raises for a failed request."""
        return list(await asyncio.gather(*(self._generate_one(r) for r in requests)))

    async def _generate_one(self, request: Request) -> Response:
        self.stats.requests += 1
        try:
            return await self._run(request)
        except Exception as exc:  # a bug of ours must not take the other requests down
            log.exception("internal error for item %s", request.item_id)
            return self._fail(ErrorKind.INTERNAL, f"internal error in the OpenAI adapter: "
                              f"{type(exc).__name__}: {self._redact(str(exc))}", 0.0, 0)

    async def _run(self, request: Request) -> Response:
        state = self._loop_state()
        async with state.admission:
            return await self._admitted(state, request)

    async def _admitted(self, state: _LoopState, request: Request) -> Response:
        try:
            messages = await self._messages(request)
        except ImageError as exc:
            return self._fail(ErrorKind.INTERNAL, f"item {request.item_id}: {exc}", 0.0, 0)
        merged = {**self.params, **request.params}
        params = {k: v for k, v in merged.items() if v is not None}  # None removes a default
        stats = self.stats
        started: float | None = None
        history: list[str] = []
        attempt = 0
        while True:
            attempt += 1
            async with state.semaphore:
                if self._bucket is not None:
                    await self._bucket.acquire()
                if started is None:  # latency counts from the first send, not the queue before it
                    started = time.monotonic()
                stats.in_flight += 1
                stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
                try:
                    result = await self._attempt(state.client, messages, params)
                finally:
                    stats.in_flight -= 1
            stats.attempts += 1
            elapsed = time.monotonic() - started if started is not None else 0.0
            if result.response is not None:
                r = result.response
                # Confidence hook (issue 16): per-option probabilities when logprobs came back.
                conf = from_logprobs(result.logprobs, len(request.options)) if result.logprobs else None
                return Response(text=r.text, refused=r.refused, usage=r.usage, latency_s=elapsed, attempts=attempt,
                                confidence=conf)
            history.append(result.label)
            if not result.retryable or attempt >= self.retry.max_attempts:
                assert result.kind is not None
                if result.retryable:
                    tally = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in Counter(history).items())
                    message = f"{result.message} (gave up after {attempt} attempts: {tally})"
                else:
                    message = result.message
                stats.errors[result.kind.value] += 1
                return self._fail(result.kind, message, elapsed, attempt)
            wait = self.retry.delay(attempt, result.retry_after, self._rng)
            stats.retries += 1
            log.debug("item %s: attempt %d failed (%s); retrying in %.2fs", request.item_id, attempt,
                      result.label, wait)
            await asyncio.sleep(wait)

    @staticmethod
    def _fail(kind: ErrorKind, message: str, latency: float, attempts: int) -> Response:
        return Response(text=None, error=message, error_kind=kind, latency_s=latency, attempts=attempts)

    async def _messages(self, request: Request) -> list[dict[str, Any]]:
        if not request.images:
            return [{"role": "user", "content": request.prompt}]
        # The reference evaluator's order: the text, then the image(s).
        content: list[dict[str, Any]] = [{"type": "text", "text": request.prompt}]
        for image in request.images:
            try:
                prepared = await self.images.get(image, max_side=self.image_max_side, fmt=self.image_format)
            except ImageError as exc:
                raise ImageError(f"image {image.digest[:12]} could not be prepared: {exc}") from exc
            except OSError as exc:  # the reader could not read the file
                raise ImageError(f"image {image.digest[:12]} could not be read: {exc}") from exc
            content.append({"type": "image_url", "image_url": {"url": prepared.data_url}})
        return [{"role": "user", "content": content}]

    async def _attempt(self, client: Any, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> _Attempt:
        import openai

        try:
            # The documented route for raw calls (`client.post`): the same auth, timeouts and
            # typed errors as `chat.completions.create`, without the per-request transform of
            # the message TypedDicts (about 1 ms of CPU for an image message) and without
            # model validation, since we read the body ourselves (`_completion`). Every
            # parameter goes in the body as given, so a provider-specific one needs no code.
            content = await client.post(
                "/chat/completions", cast_to=bytes, body={**params, "model": self.model, "messages": messages})
        except openai.APITimeoutError:
            return _Attempt(kind=ErrorKind.TIMEOUT, label="timeout", retryable=True,
                            message=f"no answer within {self.timeout:g}s (timeout) from {self._where()}; "
                                    f"raise timeout in models.yaml if the model is slow")
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            return _Attempt(kind=ErrorKind.CONNECTION, label="connection", retryable=True,
                            message=f"connection to {self._where()} failed ({type(cause).__name__}: "
                                    f"{self._redact(str(cause)) or 'no detail'}); check the base URL and that "
                                    f"the server is up")
        except openai.APIStatusError as exc:
            return self._status_error(exc)
        return self._completion(content)

    def _where(self) -> str:
        # Messages built with it are stored (results.jsonl, the store's errors table): a URL
        # with credentials (refused in specs and models.yaml, still possible through
        # OPENAI_BASE_URL or a direct construction) is shown with them cut.
        return redacted_url(self.base_url) if self.base_url else "api.openai.com"

    def _redact(self, text: str) -> str:
        """Provider messages can quote a (masked) key, or the URL with its credentials: cut them."""
        if self._api_key and self._api_key != PLACEHOLDER_KEY:
            text = text.replace(self._api_key, "[redacted]")
        return _KEY_LIKE.sub("[redacted]", redacted_url(text))

    def _provider_says(self, exc: Any) -> tuple[str, str | None]:
        body = getattr(exc, "body", None)
        message, code = None, None
        if isinstance(body, Mapping):
            err = body.get("error", body)
            if isinstance(err, Mapping):
                message, code = err.get("message"), err.get("code")
        if not message:
            message = str(getattr(exc, "message", "") or exc)
        return self._redact(str(message))[:500], (str(code) if code is not None else None)

    def _status_error(self, exc: Any) -> _Attempt:
        status = int(exc.status_code)
        said, code = self._provider_says(exc)
        label = str(status)
        retry_after = parse_retry_after(exc.response.headers) if exc.response is not None else None
        if status == 429:
            if code == "insufficient_quota":  # billing, not pace: waiting will not help
                return _Attempt(kind=ErrorKind.RATE_LIMIT, label=label, message=(
                    f"HTTP 429 insufficient_quota from {self._where()}: the account behind ${self.api_key_env} "
                    f"has no quota left; check its billing. Provider said: {said}"))
            return _Attempt(kind=ErrorKind.RATE_LIMIT, label=label, retryable=True, retry_after=retry_after,
                            message=f"rate limited (HTTP 429) by {self._where()}; lower concurrency or set rpm "
                                    f"in models.yaml. Provider said: {said}")
        if status >= 500 or status in (408, 409):
            kind = ErrorKind.TIMEOUT if status == 408 else ErrorKind.SERVER
            return _Attempt(kind=kind, label=label, retryable=True, retry_after=retry_after,
                            message=f"server error (HTTP {status}) from {self._where()}. Provider said: {said}")
        if status == 400 and code in ("content_filter", "content_policy_violation"):
            # The provider's filter refused the prompt: an outcome of its own, not an error.
            return _Attempt(response=Response(text=said, refused=True))
        if status == 401:
            return _Attempt(kind=ErrorKind.AUTH, label=label, message=(
                f"HTTP 401 from {self._where()}: the key in ${self.api_key_env} (or the variable models.yaml "
                f"names) was rejected; check that it is set to a valid key for this endpoint. Provider said: {said}"))
        if status == 403:
            return _Attempt(kind=ErrorKind.AUTH, label=label, message=(
                f"HTTP 403 from {self._where()}: the key in ${self.api_key_env} may not use model "
                f"{self.model!r} (organisation, project or region); check its permissions. Provider said: {said}"))
        if status == 404:
            return _Attempt(kind=ErrorKind.BAD_REQUEST, label=label, message=(
                f"HTTP 404 from {self._where()}: check the model name {self.model!r} and the base URL "
                f"{self._where()!r} (an OpenAI-compatible base URL usually ends in /v1). Provider said: {said}"))
        return _Attempt(kind=ErrorKind.BAD_REQUEST, label=label, message=(
            f"HTTP {status} from {self._where()} for model {self.model!r}: the request was rejected; if a "
            f"parameter is refused (e.g. temperature for a reasoning model), set it to null in models.yaml "
            f"to drop it. Provider said: {said}"))

    def _completion(self, content: bytes) -> _Attempt:
        """Read a chat completion body; anything else is MALFORMED (retried)."""

        def malformed(why: str) -> _Attempt:
            return _Attempt(kind=ErrorKind.MALFORMED, label="malformed", retryable=True,
                            message=f"the response from {self._where()} is not a chat completion: {why}")

        try:
            obj = json.loads(content)
        except ValueError as exc:
            return malformed(f"invalid JSON ({exc}; {len(content)} bytes)")
        if not isinstance(obj, Mapping):
            return malformed(f"a JSON {type(obj).__name__}, not an object")
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices:
            err = obj.get("error")
            if isinstance(err, Mapping):
                return malformed(f"an error body with status 200: {self._redact(str(err.get('message')))[:300]}")
            return malformed("no choices")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if not isinstance(message, Mapping):
            return malformed("the first choice has no message")
        text = message.get("content")
        if isinstance(text, list):  # some servers return content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, Mapping))
        if text is not None and not isinstance(text, str):
            return malformed(f"message.content is a {type(text).__name__}")
        usage = self._usage(obj.get("usage"))
        refusal = message.get("refusal")
        if choice.get("finish_reason") == "content_filter" or refusal:
            evidence = str(refusal) if refusal else (text or "")
            return _Attempt(response=Response(text=evidence, refused=True, usage=usage))
        return _Attempt(response=Response(text=text or "", usage=usage), logprobs=choice.get("logprobs"))

    @staticmethod
    def _usage(raw: Any) -> dict[str, int] | None:
        if not isinstance(raw, Mapping):
            return None
        usage = {k: int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}
        details = raw.get("completion_tokens_details")
        if isinstance(details, Mapping) and isinstance(details.get("reasoning_tokens"), int):
            usage["reasoning_tokens"] = int(details["reasoning_tokens"])
        return usage or None
