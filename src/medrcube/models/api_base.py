"""The contract of a model behind an HTTP API, once for every provider: `ApiAdapter`.

A provider's adapter (openai_adapter.py, anthropic_adapter.py, gemini_adapter.py, or a
site package's, registered as a provider with `api`: models/providers.py) is its wire
only: it subclasses this class and gives the wire hooks (`_new_client`, `_listed_models`,
`_messages`, `_attempt`, `_failed`, and `_default_params` for its defaults) and the
attributes naming the provider and its environment. Everything else is here:

- At most `concurrency` HTTP requests are in flight, fewer while the server slows down
  (models/concurrency.py); with `rpm`, a token bucket spaces them to that many requests
  per minute (every attempt counts, as providers count them).
- A circuit breaker (models/breaker.py) stops asking an endpoint that has stopped
  answering; a request then ends as CIRCUIT_OPEN, unsent, and the runner stops the run.
- 429, 5xx, 408/409, timeouts, connection errors and malformed bodies are retried with
  exponential backoff and full jitter, or after exactly the `Retry-After` /
  `retry-after-ms` the server asked for. A Retry-After beyond `retry_after_max` opens
  the breaker at once, and no request waits more than `retry_wait_max` in all. 400,
  401, 403, 404, 422 fail at once, with a message that says what to check
  (models/provider_errors.py).
- Bounded answers (models/http.py, models/bounded_body.py): a total deadline per attempt
  (`timeout`, which a body dripped a byte at a time cannot extend), a cap on the decoded
  body (`max_response_bytes`), redirects never followed (an error naming the Location).
- The endpoint is part of the fingerprint (`endpoint_identity`: the base URL without
  credentials, unless models.yaml declares two endpoints the same model), so two
  endpoints serving the same model name never share stored answers. The `model` a
  response names is kept (`served_model`); one that differs from the requested model
  is logged and shown in the run's summary, or fails the request under `strict_model`.
- A cut-off answer is `Response(truncated=True)` and a refusal `Response(refused=True)`,
  as the wire reads them: never graded as an answer.
- `generate` never raises for a failed request: the failure is a Response with `error`. Each
  Response carries `attempts`, `usage` (the provider's token counts) and `latency_s`: from the
  first send to the final answer with retries and waits, not the queue before the first send.

The API key is read from its environment variable when the adapter is built and handed
to the client only; it is never logged, never part of the fingerprint, and cut from
every text the adapter returns: error messages, provider error bodies and model answers
alike (a gateway may echo it). A base URL with credentials in it (userinfo, `?api-key=`)
is refused (models/urls.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import random
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from medrcube.models.base import ErrorKind, Preflight, Request, Response, same_model
from medrcube.models.bounded_body import DEFAULT_MAX_BODY_BYTES, BodyTooLargeError
from medrcube.models.breaker import BREAKER_FAILURES, BREAKER_SECONDS, CircuitBreaker
from medrcube.models.concurrency import AdaptiveLimit
from medrcube.models.confidence import from_logprobs
from medrcube.models.images import IMAGE_FORMATS, ImageCache, ImageError, shared_image_cache
from medrcube.models.light_http import pick
from medrcube.models.provider_errors import Attempt, Redactor, provider_says, status_attempt
from medrcube.models.retry import RetryPolicy, TokenBucket, parse_retry_after
from medrcube.models.transport import AdapterStats, LoopState
from medrcube.models.urls import credential_parts, endpoint_identity, redact_urls, refusal_hint

__all__ = ["APIKeyMissingError", "ApiAdapter", "PLACEHOLDER_KEY"]


PLACEHOLDER_KEY = "no-key-needed"  # for local servers (vLLM etc.) that check no key
# Parameters that do not change what the model answers, so not part of the fingerprint.
_NON_ANSWER_PARAMS = frozenset({
    "user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier",
    "stream_options", "timeout", "extra_headers",
})


def _default_identity(base_url: str | None) -> str:
    """The endpoint part of the fingerprint: "" for the provider's default endpoint (so its
    fingerprints stay as they were), else the base URL without credentials or query."""
    return "" if base_url is None else endpoint_identity(base_url)


class APIKeyMissingError(ValueError):
    """The environment variable that should hold the API key is not set."""


# ---------------------------------------------------------------------------- the adapter


class ApiAdapter(ABC):
    """A model behind an HTTP API, on the ModelAdapter contract (models/base.py): the
    contract's transport (module docstring) around a provider's wire hooks."""

    provider: str = ""  # the spec word, in the fingerprint and the spec
    batch_size = 1  # an API takes one request per call; concurrency does the rest
    keyed_by_item = False
    engine: Mapping[str, Any] | None = None  # an endpoint's engine is not known (vllm_adapter.py knows its own)
    # The provider's standard environment, as its own SDK reads it, and where it answers
    # when no base URL is given (a provider sets all four).
    default_key_env = ""
    base_url_env = ""
    default_endpoint = ""
    base_url_hint = ""
    light_wire = False  # its wire is plain chat completions, which the light client speaks
    default_transport = "auto"  # when neither the caller nor models.yaml names one

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
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
        retry_wait_max: float = 300.0,
        breaker_failures: int = BREAKER_FAILURES,
        breaker_seconds: float = BREAKER_SECONDS,
        image_format: str = "auto",
        image_cache: ImageCache | None = None,
        rpm_burst: float | None = None,
        seed: int | None = None,
        endpoint_identity: str | None = None,
        strict_model: bool = False,
        max_response_bytes: int = DEFAULT_MAX_BODY_BYTES,
        api_key_header: str | None = None,
        price: Mapping[str, Any] | None = None,
        transport: str | None = None,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValueError(f"{type(self).__name__} needs a model name, got {model!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, not {concurrency}")
        if not 0 < timeout < math.inf:  # NaN fails both comparisons
            raise ValueError(f"timeout must be a finite number of seconds > 0, not {timeout}")
        if image_max_side < 0:
            raise ValueError(f"image_max_side must be >= 0 (0: no downscaling), not {image_max_side}")
        if image_format not in IMAGE_FORMATS:
            raise ValueError(f"image_format {image_format!r} is not one of {', '.join(IMAGE_FORMATS)}")
        self.model = model
        # The standard environment, as the provider's client itself would read it, made
        # explicit so that the key check below and the error messages know where requests go.
        self.base_url = base_url or os.environ.get(self.base_url_env) or None
        if self.base_url and credential_parts(self.base_url):
            where = "the base URL" if base_url else f"the environment variable {self.base_url_env}"
            raise ValueError(refusal_hint(where, self.base_url, credential_parts(self.base_url)))
        api_key_env = api_key_env or self.default_key_env
        self.api_key_env = api_key_env
        self.api_key_header = api_key_header
        key = os.environ.get(api_key_env) or None
        if key is None and self.base_url is None:
            raise APIKeyMissingError(
                f"the environment variable {api_key_env} is not set, so there is no API key for "
                f"model {model!r}: export {api_key_env}=<your key> (or set api_key_env in models.yaml to "
                f"the variable that holds it), or give a base_url for a local server that needs no key"
            )
        self._api_key = key or PLACEHOLDER_KEY  # handed to the client only; never logged
        self._redactor = Redactor(key)
        self.params = {k: v for k, v in dict(params or {}).items() if v is not None}
        self.params.update(self._default_params(dict(params or {})))
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
        self.retry_wait_max = float(retry_wait_max)
        self.breaker = CircuitBreaker(self._where(), failures=breaker_failures,
                                      seconds=breaker_seconds)
        self._state: LoopState | None = None
        self.stats = AdapterStats()
        self.spec = spec or (f"{self.provider}:{model}@{base_url}" if base_url else f"{self.provider}:{model}")
        self.price = price  # models.yaml's price per million tokens; never sent anywhere
        self.endpoint_identity = endpoint_identity or _default_identity(self.base_url)
        self.strict_model = bool(strict_model)
        self.max_response_bytes = int(max_response_bytes)
        self.served_models: Counter[str] = Counter()  # the `model` of each answer, as the endpoint named it
        self.transport = pick(transport or self.default_transport, self.base_url) if self.light_wire else "sdk"
        self.fingerprint = self._fingerprint()

    # -- the wire hooks, one set per provider ------------------------------------------

    def _default_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Parameters sent unless models.yaml's `params` (`given`, None values kept: a null
        drops a default) set them: the provider's token limit, for one."""
        return {}

    @abstractmethod
    def _new_client(self) -> Any:
        """The provider's client, never retrying (the retry loop is this class's)."""

    @abstractmethod
    async def _listed_models(self, client: Any) -> list[str]:
        """The model ids the endpoint lists (the pre-flight, models/listing.py)."""

    @abstractmethod
    async def _messages(self, request: Request) -> list[dict[str, Any]]:
        """The request in the provider's message format (images prepared through `self.images`;
        an image that cannot be prepared raises ImageError)."""

    @abstractmethod
    async def _attempt(self, client: Any, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> Attempt:
        """One attempt under one deadline (`self.timeout`): the answer, or why not (`_failed`)."""

    @abstractmethod
    def _failed(self, exc: Exception) -> Attempt:
        """The Attempt for an exception of the client; anything else re-raised."""

    @property
    def _log(self) -> logging.Logger:
        """The provider's logger: medrcube.models.<provider>."""
        return logging.getLogger(f"medrcube.models.{self.provider}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(spec={self.spec!r}, fingerprint={self.fingerprint!r})"

    @property
    def rate_limiter(self) -> TokenBucket | None:
        """The requests-per-minute bucket (None without `rpm`): its own schedule of sends."""
        return self._bucket

    def _fingerprint(self) -> str:
        """provider + model + endpoint + what changes answers; never the key.

        The endpoint is in it so that the same model name on two base URLs (a candidate
        and a baseline both served as `candidate` on localhost) never share stored
        answers; the default OpenAI endpoint keeps the fingerprint it always had."""
        answer_params = {k: v for k, v in self.params.items() if k not in _NON_ANSWER_PARAMS}
        payload: dict[str, Any] = {"provider": self.provider, "model": self.model, "params": answer_params,
                                   "image_max_side": self.image_max_side, "image_format": self.image_format}
        if self.endpoint_identity:
            payload["endpoint"] = self.endpoint_identity
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
        return f"{self.provider}:{self.model}:{digest[:16]}"

    # -- the client, per event loop ---------------------------------------------------

    def _loop_state(self) -> LoopState:
        """The client and semaphore of the running loop (made anew if the loop changed,
        e.g. a caller using asyncio.run per batch: httpx connections belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self._state = LoopState(loop, self._new_client(), AdaptiveLimit(self.concurrency, where=self._where()),
                                     asyncio.Semaphore(2 * self.concurrency))
        return self._state

    # -- the contract's endpoint and pre-flight ---------------------------------------

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Where requests go, credentials cut (shown in messages and the build's privacy plan)."""
        return (redact_urls(self.base_url) if self.base_url else self.default_endpoint,)

    async def preflight(self) -> Preflight:
        """The endpoint's model list, through this adapter's client (models/listing.py); a name
        it lists in another spelling is asked as listed (the fingerprint stays the spec's)."""
        from medrcube.models.listing import preflight_by_listing

        said = await preflight_by_listing(self.spec, self.endpoints[0], self.model, self.base_url_env,
                                          lambda: self._listed_models(self._loop_state().client), self._failed)
        self.model = said.served if said.resolved and said.served else self.model
        return said

    async def aclose(self) -> None:
        """Close the HTTP client (a later `generate` opens a new one)."""
        state, self._state = self._state, None
        # A client of another (finished) loop cannot be closed from here: its sockets go with that loop.
        if state is not None and state.loop is asyncio.get_running_loop():
            await state.client.close()

    # -- generation -------------------------------------------------------------------

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        """One response per request, in order; all requests proceed concurrently (up to
        `concurrency` on the wire). Never raises for a failed request."""
        if len(requests) == 1:  # the runner's batches of one: no task and gather per request
            return [await self._generate_one(requests[0])]
        return list(await asyncio.gather(*(self._generate_one(r) for r in requests)))

    async def request_written(self) -> None:
        """Return once a request has been written on the running loop's connection (run/pump.py,
        the first wave); a client that cannot tell (the SDK's) returns at once."""
        written = getattr(self._loop_state().client, "written", None)
        if written is not None:
            await written.wait()

    def prefetch(self, requests: Sequence[Request]) -> None:
        """Prepare the images of requests that come next, in one job (run/pump.py `Lookahead`)."""
        self.images.prefetch([im for r in requests for im in r.images], max_side=self.image_max_side, fmt=self.image_format)

    async def _generate_one(self, request: Request) -> Response:
        self.stats.requests += 1
        try:
            return await self._run(request)
        except Exception as exc:  # a bug of ours must not take the other requests down
            self._log.exception("internal error for item %s", request.item_id)
            return self._fail(ErrorKind.INTERNAL, f"internal error in the {type(self).__name__}: "
                              f"{type(exc).__name__}: {self._redact(str(exc))}", 0.0, 0)

    async def _run(self, request: Request) -> Response:
        state = self._loop_state()
        async with state.admission:
            return await self._admitted(state, request)

    async def _admitted(self, state: LoopState, request: Request) -> Response:
        try:
            messages = await self._messages(request)
        except ImageError as exc:
            return self._fail(ErrorKind.INTERNAL, f"item {request.item_id}: {exc}", 0.0, 0)
        merged = {**self.params, **request.params}
        params = {k: v for k, v in merged.items() if v is not None}  # None removes a default
        stats = self.stats
        started: float | None = None
        history: list[str] = []
        attempt, waited, breaker = 0, 0.0, self.breaker
        while True:
            attempt += 1
            async with state.semaphore.slot():
                if self._bucket is not None:
                    await self._bucket.acquire()
                if started is None:  # latency counts from the first send, not the queue before it
                    started = time.monotonic()
                stats.in_flight += 1
                stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
                sent = time.monotonic()
                try:
                    raced = await breaker.race(self._attempt(state.client, messages, params))
                finally:
                    stats.in_flight -= 1
            elapsed = time.monotonic() - started if started is not None else 0.0
            if raced is None:  # the breaker opened: this request is not asked
                return self._fail(ErrorKind.CIRCUIT_OPEN, f"not asked: {breaker.message}", elapsed, attempt - 1)
            result = raced
            stats.attempts += 1
            state.semaphore.observe_sent(sent, timed_out=result.kind is ErrorKind.TIMEOUT)
            if result.retryable or result.breaker_failure:
                breaker.failed(result.label, result.message)
            else:  # an answer, or a 4xx: the server is up
                breaker.answered()
            if result.response is not None:
                # Confidence hook (models/confidence.py): per-option probabilities when logprobs came back.
                conf = from_logprobs(result.logprobs, len(request.options)) if result.logprobs else None
                return replace(result.response, latency_s=elapsed, attempts=attempt, confidence=conf)
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
            assert result.kind is not None
            if result.retry_after is not None and result.retry_after > self.retry.retry_after_cap:
                breaker.trip(f"{result.message} (the server asked to wait {result.retry_after:g}s, more than "
                             f"retry_after_max {self.retry.retry_after_cap:g}s)")
            wait = self.retry.delay(attempt, result.retry_after, self._rng)
            if waited + wait > self.retry_wait_max:
                stats.errors[result.kind.value] += 1
                return self._fail(result.kind, f"{result.message} (gave up after {attempt} attempts: waiting "
                                  f"{wait:.0f}s more would pass retry_wait_max {self.retry_wait_max:g}s)",
                                  elapsed, attempt)
            stats.retries += 1
            self._log.debug("item %s: attempt %d failed (%s); retrying in %.2fs", request.item_id, attempt,
                      result.label, wait)
            waited += wait
            if await breaker.sleep(wait):
                return self._fail(ErrorKind.CIRCUIT_OPEN, f"not asked again: {breaker.message}", elapsed, attempt)

    @staticmethod
    def _fail(kind: ErrorKind, message: str, latency: float, attempts: int) -> Response:
        return Response(text=None, error=message, error_kind=kind, latency_s=latency, attempts=attempts)

    def _timed_out(self) -> Attempt:
        return Attempt(kind=ErrorKind.TIMEOUT, label="timeout", retryable=True,
                       message=f"no complete answer within {self.timeout:g}s (timeout) from {self._where()}; "
                               f"raise timeout in models.yaml if the model is slow")

    def _unreachable(self, exc: Exception) -> Attempt:
        cause = exc.__cause__ or exc
        if isinstance(cause, BodyTooLargeError):
            return self._too_large(cause)
        return Attempt(kind=ErrorKind.CONNECTION, label="connection", retryable=True,
                       message=f"connection to {self._where()} failed ({type(cause).__name__}: "
                               f"{self._redact(str(cause)) or 'no detail'}); check the base URL and that "
                               f"the server is up")

    def _malformed(self, why: str, what: str = "chat completion") -> Attempt:
        return Attempt(kind=ErrorKind.MALFORMED, label="malformed", retryable=True,
                       message=f"the response from {self._where()} is not a {what}: {why}")

    def _too_large(self, exc: BodyTooLargeError) -> Attempt:
        """A body refused at its cap: not retried (a bomb stays a bomb), and a failure of the
        endpoint for its circuit breaker. Below max_response_mib the cap was the request's
        token limit's (openai_wire.reply_cap): an oversized reply."""
        where = self._where()
        if exc.limit < self.max_response_bytes:
            return Attempt(kind=ErrorKind.MALFORMED, label="oversized", breaker_failure=True, message=(
                f"oversized reply from {where}: its body went past the cap of {exc.limit:,} bytes, more than a reply "
                f"within the request's token limit can be; recorded as an error, not stored in full, not graded (check "
                f"the server: it ignores the limit; a larger limit in models.yaml params raises the cap)"))
        return Attempt(kind=ErrorKind.MALFORMED, label="too_large", breaker_failure=True, message=(
            f"the response from {where} was refused unread: {exc}; raise max_response_mib in models.yaml if the "
            f"endpoint's answers are really this large"))

    def _where(self) -> str:
        # Messages built with it are stored (results.jsonl, the store's errors table).
        return self.endpoints[0]

    def _redact(self, text: str) -> str:
        """Provider messages can quote the key (masked or whole), or a URL with its credentials."""
        return self._redactor(text)

    def _status_error(self, exc: Any) -> Attempt:
        said, code = provider_says(exc, self._redactor)
        headers = exc.response.headers if exc.response is not None else {}
        location = headers.get("location")
        return status_attempt(int(exc.status_code), said, code, where=self._where(), model=self.model,
                              key_env=self.api_key_env, retry_after=parse_retry_after(headers) if headers else None,
                              location=self._redact(location) if location else None, base_hint=self.base_url_hint)

    def _foreign(self, served: str | None) -> Attempt | None:
        """Count the served model; under `strict_model`, an answer from another model is an error.
        A dated snapshot of the requested name ("gpt-4o" -> "gpt-4o-2024-08-06") is the same model."""
        if served is None:
            return None
        self.served_models[served] += 1
        if not self.strict_model or same_model(self.model, served):
            return None
        return Attempt(kind=ErrorKind.MODEL_MISMATCH, label="model_mismatch", message=(
            f"{self._where()} answered as model {served!r}, not the requested {self.model!r}; refused under "
            f"strict_model (drop strict_model in models.yaml to record it and grade the answer)"))
