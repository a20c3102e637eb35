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

This module is the provider: its environment (OPENAI_API_KEY, OPENAI_BASE_URL), its default
endpoint and token limit. The wire (`/chat/completions`, either client, the message, the
body) is openai_wire.py's `ChatCompletionsAdapter`, which vllm_adapter.py stands on beside
this one; the transport above it (limits, rpm, the breaker, retries, bounded bodies,
served-model checks, the key cut from every text) is the API base's (models/api_base.py),
which the native adapters (anthropic_adapter.py, gemini_adapter.py) stand on too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medrcube.models.api_base import PLACEHOLDER_KEY, APIKeyMissingError
from medrcube.models.openai_wire import TOKEN_LIMIT_PARAMS, ChatCompletionsAdapter
from medrcube.models.retry import RetryPolicy, TokenBucket, parse_retry_after

__all__ = ["APIKeyMissingError", "OpenAIAdapter", "PLACEHOLDER_KEY", "RetryPolicy", "TokenBucket",
           "parse_retry_after"]

# At api.openai.com the flagship models reason before they answer, so they get room for it
# (elsewhere the wire's DEFAULT_MAX_TOKENS: a letter and a sentence around it).
DEFAULT_MAX_COMPLETION_TOKENS_OPENAI = 4096


class OpenAIAdapter(ChatCompletionsAdapter):
    """OpenAI, or any OpenAI-compatible server, on the chat-completions wire (models/openai_wire.py)."""

    provider = "openai"
    default_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    default_endpoint = "https://api.openai.com/v1"
    base_url_hint = "an OpenAI-compatible base URL usually ends in /v1"

    def _default_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        # OpenAI's reasoning models take only max_completion_tokens; local servers all read max_tokens.
        if self.base_url is None and not any(k in given for k in TOKEN_LIMIT_PARAMS):
            return {"max_completion_tokens": DEFAULT_MAX_COMPLETION_TOKENS_OPENAI}
        return super()._default_params(given)
