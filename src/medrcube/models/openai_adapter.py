"""The OpenAI-compatible chat adapter (OpenAI, Azure-style gateways, vLLM, SGLang, TGI ...).

It sends each request to `/chat/completions` through the light HTTP/1.1 client
(models/light_http.py: a base URL without a proxy) or the official `openai.AsyncOpenAI`
client (`transport: sdk`; api.openai.com, proxies) with `max_retries=0`, with the same
error mapping: the retry loop is ours so that every attempt is counted and `Retry-After`
is honoured exactly.

- Images go as base64 data URLs, downscaled to `image_max_side` (models/images.py), each prepared
  once per process on a worker thread (those of the requests next in line together).
- At most `concurrency` HTTP requests are in flight, fewer while the server slows down
  (models/concurrency.py); with `rpm`, a token bucket spaces them to that many requests
  per minute (every attempt counts, as providers count them).
- A circuit breaker (models/breaker.py) stops asking an endpoint that has stopped
  answering; a request then ends as CIRCUIT_OPEN, unsent, and the runner stops the run.
- Unless models.yaml sets a token limit (or null), `max_tokens` is `DEFAULT_MAX_TOKENS`
  (`max_completion_tokens` 4,096 at api.openai.com, room for its reasoning models): a local
  server would otherwise generate up to its own limit whenever its model emits no stop token.
- 429, 5xx, 408/409, timeouts, connection errors and malformed bodies are retried with
  exponential backoff and full jitter, or after exactly the `Retry-After` /
  `retry-after-ms` the server asked for. A Retry-After beyond `retry_after_max` opens
  the breaker at once, and no request waits more than `retry_wait_max` in all. 400,
  401, 403, 404, 422 fail at once, with a message that says what to check.
- A `content_filter` finish or a provider refusal is `Response(refused=True)`; a
  `length` finish is `Response(truncated=True)`: cut off, never graded as an answer.
- Bounded answers (models/http.py): a total deadline per attempt (`timeout`, which a body
  dripped a byte at a time cannot extend), a cap on the decoded body, redirects never
  followed (an error naming the Location).
- The endpoint is part of the fingerprint (`endpoint_identity`: the base URL without
  credentials, unless models.yaml declares two endpoints the same model), so two
  endpoints serving the same model name never share stored answers. The `model` a
  response names is kept (`served_model`); one that differs from the requested model
  is logged and shown in the run's summary, or fails the request under `strict_model`.
- `generate` never raises for a failed request: the failure is a Response with `error`. Each
  Response carries `attempts`, `usage` (the provider's token counts) and `latency_s`: from the
  first send to the final answer with retries and waits, not the queue before the first send.

The API key is read from its environment variable when the adapter is built and handed
to the client only (as `Authorization: Bearer`, or in the header `api_key_header`
names); it is never logged, never part of the fingerprint, and cut from every text the
adapter returns: error messages, provider error bodies and model answers alike (a
gateway may echo it). A base URL with credentials in it (userinfo, `?api-key=`) is
refused (models/urls.py).

This module is the wire: the transport above (limits, rpm, the breaker, retries, bounded
bodies, served-model checks, the key cut from every text) is the API base's
(models/api_base.py), which the native adapters (anthropic_adapter.py, gemini_adapter.py)
stand on too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from medrcube.models.api_base import PLACEHOLDER_KEY, ApiAdapter, APIKeyMissingError
from medrcube.models.base import Request
from medrcube.models.bounded_body import BodyTooLargeError
from medrcube.models.images import ImageError
from medrcube.models.light_http import LightClient, LightConnectionError, StatusError, light_headers
from medrcube.models.openai_wire import read_chat_completion, reply_cap
from medrcube.models.provider_errors import Attempt
from medrcube.models.retry import RetryPolicy, TokenBucket, parse_retry_after

__all__ = ["APIKeyMissingError", "OpenAIAdapter", "PLACEHOLDER_KEY", "RetryPolicy", "TokenBucket",
           "parse_retry_after"]

# The completion-token limit sent when models.yaml sets none. A letter answer ("B", "B. MRI",
# "The answer is B.") takes a few tokens; 32 leaves room for a sentence around it, and a
# local server whose model never stops then spends 32 tokens per item, not its own 1,024.
# At api.openai.com the flagship models reason before they answer, so they get room for it.
# A reasoning model behind another URL needs max_tokens set in models.yaml (README).
DEFAULT_MAX_TOKENS = 32
DEFAULT_MAX_COMPLETION_TOKENS_OPENAI = 4096
_TOKEN_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


class OpenAIAdapter(ApiAdapter):
    """An OpenAI-compatible chat model on the API base (models/api_base.py)."""

    provider = "openai"
    default_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    default_endpoint = "https://api.openai.com/v1"
    base_url_hint = "an OpenAI-compatible base URL usually ends in /v1"
    light_wire = True  # its wire is plain chat completions, which the light client speaks

    def _default_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        if any(k in given for k in _TOKEN_LIMITS):  # null in models.yaml: no limit sent
            return {}
        # OpenAI's reasoning models take only max_completion_tokens; local servers all read max_tokens.
        if self.base_url is None:
            return {"max_completion_tokens": DEFAULT_MAX_COMPLETION_TOKENS_OPENAI}
        return {"max_tokens": DEFAULT_MAX_TOKENS}

    def _new_client(self) -> Any:
        """The provider's client (a wire hook): the light client, or the SDK on our bounded HTTP client, never retrying."""
        if self.transport == "light":
            assert self.base_url is not None
            return LightClient(self.base_url, headers=light_headers(self._api_key, self.api_key_header),
                               connect_timeout=min(self.timeout, 10.0), max_body_bytes=self.max_response_bytes)
        from openai import AsyncOpenAI

        from medrcube.models.http import bounded_client

        headers = {self.api_key_header: self._api_key} if self.api_key_header else None
        return AsyncOpenAI(api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
                           max_retries=0, default_headers=headers,
                           http_client=bounded_client(self.timeout, self.max_response_bytes))

    async def _listed_models(self, client: Any) -> list[str]:
        """The model ids the endpoint lists (a wire hook): GET /models."""
        if isinstance(client, LightClient):
            return await client.model_ids()
        listing = await client.models.list()
        return [str(m.id) for m in listing.data]

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

    async def _attempt(self, client: Any, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> Attempt:
        try:
            # The documented route for raw calls (`client.post`): the same auth, timeouts and
            # typed errors as `chat.completions.create`, without the per-request transform of
            # the message TypedDicts (about 1 ms of CPU for an image message) and without
            # model validation, since we read the body ourselves (`_completion`). Every
            # parameter goes in the body as given, so a provider-specific one needs no code.
            # The whole attempt runs under one deadline: httpx's timeout bounds each read,
            # and a body dripped a byte per second would otherwise never time out.
            body, cap = {**params, "model": self.model, "messages": messages}, reply_cap(params, self.max_response_bytes)
            async with asyncio.timeout(self.timeout):
                if isinstance(client, LightClient):  # stops reading at the cap, the rest unread
                    content = await client.post_json("chat/completions", body, max_body=cap)
                else:
                    content = await client.post("/chat/completions", cast_to=bytes, body=body)
        except Exception as exc:
            return self._failed(exc)
        if len(content) > cap:  # the SDK's transport reads up to max_response_mib
            return self._too_large(BodyTooLargeError(cap, "identity", inflated=False))
        return self._completion(content)

    def _failed(self, exc: Exception) -> Attempt:
        """The Attempt for an exception of the client (a wire hook); anything else re-raised."""
        if isinstance(exc, BodyTooLargeError):  # a bomb stays a bomb: not retried
            return self._too_large(exc)
        if isinstance(exc, TimeoutError):
            return self._timed_out()
        if isinstance(exc, LightConnectionError):
            return self._unreachable(exc)
        if isinstance(exc, StatusError):
            return self._status_error(exc)
        import openai

        if isinstance(exc, openai.APITimeoutError):  # before its base class below
            return self._timed_out()
        if isinstance(exc, openai.APIConnectionError):
            return self._unreachable(exc)
        if isinstance(exc, openai.APIStatusError):
            return self._status_error(exc)
        raise exc

    def _completion(self, content: bytes) -> Attempt:
        """Read a chat completion body (models/openai_wire.py); anything else is MALFORMED (retried)."""
        return read_chat_completion(content, malformed=self._malformed, redactor=self._redactor, foreign=self._foreign)
