"""The OpenAI-compatible chat-completions wire, for every provider that speaks it: the
adapter base `ChatCompletionsAdapter` and the reading of a `/chat/completions` body.

`ChatCompletionsAdapter` is the API base (models/api_base.py: limits, rpm, the breaker,
retries, bounded bodies, served-model checks, the key cut from every text) with the wire
hooks of `/chat/completions`: the light HTTP/1.1 client (models/light_http.py, for a base
URL without a proxy) or the official `openai.AsyncOpenAI` client (`transport: sdk`) with
`max_retries=0`, the same error mapping for both; the message (the text, then the images
as base64 data URLs, downscaled to `image_max_side`); one attempt under one deadline; the
default token limit. It names no provider: the providers that speak this wire stand on it
side by side (openai_adapter.py for OpenAI and any OpenAI-compatible server,
vllm_adapter.py for a vLLM engine), each adding its environment, defaults and identity.

The body is read strictly (a key given twice, such as `message.content`, is no answer to
pick from), the first choice's text, refusal, finish reason and log-probabilities kept,
the served model checked by the adapter (`foreign`), the token counts kept as given. A
`content_filter` finish or a refusal is `Response(refused=True)`; a `length` finish is
`Response(truncated=True)`. A reply's body is capped at what its token limit allows
(`reply_cap`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from medrcube.models.api_base import ApiAdapter
from medrcube.models.base import Request, Response
from medrcube.models.bounded_body import BodyTooLargeError
from medrcube.models.images import ImageError
from medrcube.models.light_http import LightClient, LightConnectionError, StatusError, light_headers
from medrcube.models.provider_errors import Attempt, Redactor
from medrcube.models.strict_json import DuplicateKeyError, NonStandardNumberError, loads_wire

__all__ = ["DEFAULT_MAX_TOKENS", "TOKEN_LIMIT_PARAMS", "ChatCompletionsAdapter", "chat_usage", "read_chat_completion", "reply_cap"]

# The completion-token limit sent when models.yaml sets none. A letter answer ("B", "B. MRI",
# "The answer is B.") takes a few tokens; 32 leaves room for a sentence around it, and a
# local server whose model never stops then spends 32 tokens per item, not its own 1,024.
# A reasoning model behind a base URL needs max_tokens set in models.yaml (README).
DEFAULT_MAX_TOKENS = 32
# The token limits a models.yaml `params` may set in place of the default (null: none sent).
TOKEN_LIMIT_PARAMS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


class ChatCompletionsAdapter(ApiAdapter):
    """The `/chat/completions` wire on the API base; a provider subclass names itself (module docstring)."""

    light_wire = True  # plain chat completions, which the light client speaks

    def _default_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        if any(k in given for k in TOKEN_LIMIT_PARAMS):  # null in models.yaml: no limit sent
            return {}
        return {"max_tokens": DEFAULT_MAX_TOKENS}  # what every OpenAI-compatible server reads

    def _new_client(self) -> Any:
        """The light client, or the SDK on our bounded HTTP client, never retrying."""
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
        """The model ids the endpoint lists: GET /models."""
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
        """The Attempt for an exception of either client; anything else re-raised."""
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
        """Read a chat completion body (`read_chat_completion`); anything else is MALFORMED (retried)."""
        return read_chat_completion(content, malformed=self._malformed, redactor=self._redactor, foreign=self._foreign)


# A reply's body within a token limit: the JSON around the text, and per token at most
# REPLY_BYTES_PER_TOKEN (a long token, each character escaped as \\uXXXX), and with
# log-probabilities its alternatives. A body past this cannot be a reply within the limit.
REPLY_OVERHEAD_BYTES = 256 * 1024
REPLY_BYTES_PER_TOKEN = 1024
# Every token limit a request may carry (models.yaml's params as sent, a local model's max_new_tokens).
_TOKEN_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens")


def reply_cap(params: Mapping[str, Any], ceiling: int) -> int:
    """The largest body a reply to a request with these generation parameters can have
    (at most `ceiling`, the adapter's max_response_mib): none when no token limit is sent."""
    limit = next((params[k] for k in _TOKEN_LIMITS if isinstance(params.get(k), int) and not isinstance(params.get(k), bool)), None)
    if limit is None or limit < 0:
        return ceiling
    per = REPLY_BYTES_PER_TOKEN
    if params.get("logprobs"):
        top = params.get("top_logprobs")
        per += 256 * (1 + (top if isinstance(top, int) and not isinstance(top, bool) and top > 0 else 0))
    return min(ceiling, REPLY_OVERHEAD_BYTES + int(limit) * per)


def read_chat_completion(content: bytes, *, malformed: Callable[[str], Attempt], redactor: Redactor,
                         foreign: Callable[[str | None], Attempt | None]) -> Attempt:
    """The Attempt a chat completion body makes; anything else is `malformed(why)`."""
    try:
        obj = loads_wire(content)  # a duplicate key ("content" twice) is no answer to pick from
    except DuplicateKeyError as exc:
        return malformed(f"{exc} (JSON allows no choice between them)")
    except NonStandardNumberError as exc:
        return malformed(str(exc))
    except ValueError as exc:
        return malformed(f"invalid JSON ({exc}; {len(content)} bytes)")
    if not isinstance(obj, Mapping):
        return malformed(f"a JSON {type(obj).__name__}, not an object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        err = obj.get("error")
        if isinstance(err, Mapping):
            return malformed(f"an error body with status 200: {redactor(str(err.get('message')))[:300]}")
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
    served = obj.get("model") if isinstance(obj.get("model"), str) else None
    refused_by_model = foreign(served)
    if refused_by_model is not None:
        return refused_by_model
    usage = chat_usage(obj.get("usage"))
    text = redactor.key_only(text) if text else text  # a gateway may echo the key
    refusal = message.get("refusal")
    if choice.get("finish_reason") == "content_filter" or refusal:
        evidence = redactor.key_only(str(refusal)) if refusal else (text or "")
        return Attempt(response=Response(text=evidence, refused=True, usage=usage, served_model=served))
    truncated = choice.get("finish_reason") == "length"
    return Attempt(response=Response(text=text or "", usage=usage, served_model=served, truncated=truncated),
                   logprobs=choice.get("logprobs"))


def chat_usage(raw: Any) -> dict[str, int] | None:
    """The token counts of a chat completion, as given, with the reasoning tokens lifted out."""
    if not isinstance(raw, Mapping):
        return None
    usage = {k: int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}
    details = raw.get("completion_tokens_details")
    if isinstance(details, Mapping) and isinstance(details.get("reasoning_tokens"), int):
        usage["reasoning_tokens"] = int(details["reasoning_tokens"])
    return usage or None

