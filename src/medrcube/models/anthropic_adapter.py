"""Anthropic's Messages API, natively (`anthropic:NAME[@BASE_URL]`; pip install 'medrcube[anthropic]').

The transport is the API base's, whole (api_base.py: limits, rpm, retries with
Retry-After, bounded bodies, no redirects, the key cut from every text, the endpoint in
the fingerprint, served-model checks); this module is only the wire:

- requests go to `POST /v1/messages` through the official `anthropic.AsyncAnthropic`
  client, created with `max_retries=0` on our bounded HTTP client (the SDK's documented
  `http_client`), raw (`client.post`) so that the body is read here;
- the key is sent as the SDK sends it (`x-api-key`, or a bearer token in its current
  releases), read from ANTHROPIC_API_KEY unless models.yaml names another variable;
  ANTHROPIC_BASE_URL as the SDK reads it;
- images go as base64 `image` blocks after the text (the reference evaluator's order);
- `max_tokens`, which the API requires, defaults to 1024 (a params value overrides it);
- `stop_reason` is read as the contract says: `max_tokens` is truncated, `refusal` is a
  refusal; `usage.input_tokens`/`output_tokens` are the prompt and completion tokens;
- an error body (`{"type": "error", "error": {"type", "message"}}`) gives the message,
  its `type` the code; 529 (overloaded) is a server error, retried.

The SDK is imported when the first client is made, never at import time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medrcube.models.api_base import ApiAdapter
from medrcube.models.base import Request, Response, token_usage
from medrcube.models.http import BodyTooLargeError, bounded_client
from medrcube.models.images import ImageError
from medrcube.models.provider_errors import Attempt
from medrcube.models.strict_json import DuplicateKeyError, NonStandardNumberError, loads_wire

__all__ = ["AnthropicAdapter", "DEFAULT_MAX_TOKENS"]

DEFAULT_MAX_TOKENS = 1024


class AnthropicAdapter(ApiAdapter):
    """A Claude model behind the ModelAdapter contract, over the Messages API."""

    provider = "anthropic"
    default_key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_endpoint = "https://api.anthropic.com"
    base_url_hint = "Anthropic's base URL is the host, without /v1: the client adds /v1/messages"
    light_wire = False  # the Messages API through its own SDK

    def __init__(self, model: str, *, params: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(model, params={"max_tokens": DEFAULT_MAX_TOKENS, **dict(params or {})}, **kwargs)

    def _new_client(self) -> Any:
        import anthropic

        headers = {self.api_key_header: self._api_key} if self.api_key_header else None
        return anthropic.AsyncAnthropic(api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
                                        max_retries=0, default_headers=headers,
                                        http_client=bounded_client(self.timeout, self.max_response_bytes))

    async def _listed_models(self, client: Any) -> list[str]:
        from medrcube.models.listing import LISTED_MAX

        ids: list[str] = []
        async for m in client.models.list(limit=1000):  # every page: the API's default page is 20 models
            ids.append(str(m.id))
            if len(ids) >= LISTED_MAX:
                break
        return ids

    async def _messages(self, request: Request) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = [{"type": "text", "text": request.prompt}]
        for image in request.images:
            try:
                prepared = await self.images.get(image, max_side=self.image_max_side, fmt=self.image_format)
            except (ImageError, OSError) as exc:
                raise ImageError(f"image {image.digest[:12]} could not be prepared: {exc}") from exc
            data = prepared.data_url.split(",", 1)[1]
            content.append({"type": "image", "source": {"type": "base64", "media_type": prepared.mime, "data": data}})
        return [{"role": "user", "content": content}]

    async def _attempt(self, client: Any, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> Attempt:
        import asyncio

        try:
            async with asyncio.timeout(self.timeout):  # one deadline for the whole attempt
                content = await client.post("/v1/messages", cast_to=bytes,
                                            body={**params, "model": self.model, "messages": messages})
        except Exception as exc:
            return self._failed(exc)
        return self._message(content)

    def _failed(self, exc: Exception) -> Attempt:
        import anthropic

        # The SDK's errors have the openai SDK's shape (both are generated from one
        # template), but are their own classes: read them as those, same words.
        if isinstance(exc, BodyTooLargeError):
            return self._too_large(exc)
        if isinstance(exc, (anthropic.APITimeoutError, TimeoutError)):
            return self._timed_out()
        if isinstance(exc, anthropic.APIConnectionError):
            return self._unreachable(exc)
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_error(exc)
        raise exc

    def _message(self, content: bytes) -> Attempt:
        """Read a Messages API body; anything else is MALFORMED (retried)."""
        try:
            obj = loads_wire(content)
        except (DuplicateKeyError, NonStandardNumberError) as exc:
            return self._malformed(str(exc), "message")
        except ValueError as exc:
            return self._malformed(f"invalid JSON ({exc}; {len(content)} bytes)", "message")
        if not isinstance(obj, Mapping) or not isinstance(obj.get("content"), list):
            return self._malformed("no content list", "message")
        blocks = obj["content"]
        if not all(isinstance(b, Mapping) for b in blocks):
            return self._malformed("a content block is not an object", "message")
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        served = obj.get("model") if isinstance(obj.get("model"), str) else None
        foreign = self._foreign(served)
        if foreign is not None:
            return foreign
        raw: Mapping[str, Any] = obj["usage"] if isinstance(obj.get("usage"), Mapping) else {}
        usage = token_usage(raw.get("input_tokens"), raw.get("output_tokens"), raw)
        text = self._redactor.key_only(text)
        stop = obj.get("stop_reason")
        if stop == "refusal":
            return Attempt(response=Response(text=text, refused=True, usage=usage, served_model=served))
        return Attempt(response=Response(text=text, usage=usage, served_model=served, truncated=stop == "max_tokens"))
