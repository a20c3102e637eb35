"""Google's Gemini API, natively (`gemini:NAME[@BASE_URL]`; pip install 'medrcube[gemini]').

The transport is the API base's, whole (api_base.py: limits, rpm, retries with
Retry-After, bounded bodies, no redirects, the key cut from every text, the endpoint in
the fingerprint, served-model checks); this module is only the wire:

- requests go through the official `google-genai` client (`client.aio.models.
  generate_content`), pointed at the base URL (`HttpOptions.base_url`, the SDK's own;
  GOOGLE_GEMINI_BASE_URL as the SDK reads it), on our bounded HTTP client
  (`httpx_async_client`) and with the SDK's retries off (one attempt: ours count);
- the key goes as `x-goog-api-key` (the SDK's header), read from GEMINI_API_KEY unless
  models.yaml names another variable;
- `params` are the SDK's GenerateContentConfig fields (`temperature`,
  `max_output_tokens`, ...), checked when the adapter is built: a misspelt one is a
  model-spec error, not a run of failed requests; `max_output_tokens` defaults to
  `DEFAULT_MAX_OUTPUT_TOKENS` (a value of null in models.yaml drops it);
- images go as inline data parts after the text (the reference evaluator's order);
- `finishReason` is read as the contract says: MAX_TOKENS is truncated; SAFETY,
  PROHIBITED_CONTENT, BLOCKLIST, SPII, RECITATION and the image-safety reasons, or a
  prompt blocked by `promptFeedback`, are refusals; `usageMetadata.promptTokenCount`
  and `candidatesTokenCount` are the prompt and completion tokens; `modelVersion` is
  the served model;
- an error body (`{"error": {"code", "message", "status"}}`) gives the message, its
  `status` (RESOURCE_EXHAUSTED, PERMISSION_DENIED ...) the code;
- asked with `response_logprobs: true, logprobs: K`, the answer's `logprobsResult` gives
  the per-option confidence, as OpenAI's `logprobs` do (models/confidence.py).

The SDK is imported when the adapter is built, never at import time of this module.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx  # the HTTP library of google-genai (and of openai)

from medrcube.models.api_base import ApiAdapter
from medrcube.models.base import Request, Response, token_usage
from medrcube.models.http import BodyTooLargeError, bounded_client
from medrcube.models.images import ImageError
from medrcube.models.provider_errors import Attempt, status_attempt
from medrcube.models.retry import parse_retry_after

__all__ = ["API_VERSION", "DEFAULT_MAX_OUTPUT_TOKENS", "GeminiAdapter", "REFUSAL_REASONS"]

API_VERSION = "v1beta"  # the Gemini API's current surface (the SDK's default for it, said outright)
# A letter answer takes a few tokens, but a thinking model spends its thoughts from the same
# budget; an answer cut short is recorded as truncated, never graded (params override it).
DEFAULT_MAX_OUTPUT_TOKENS = 4096

REFUSAL_REASONS = frozenset({
    "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION",
})


@dataclass(frozen=True)
class _Client:
    """The SDK's async client and the HTTP client we gave it (the SDK does not close a given one)."""

    aio: Any
    http: httpx.AsyncClient


class GeminiAdapter(ApiAdapter):
    """A Gemini model behind the ModelAdapter contract, over generateContent."""

    provider = "gemini"
    default_key_env = "GEMINI_API_KEY"
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    default_endpoint = "https://generativelanguage.googleapis.com"
    base_url_hint = "Gemini's base URL is the host, without /v1beta: the client adds /v1beta/models/NAME"
    light_wire = False  # generateContent through its own SDK

    def __init__(self, model: str, *, params: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(model, params={"max_output_tokens": DEFAULT_MAX_OUTPUT_TOKENS, **dict(params or {})}, **kwargs)
        from google.genai import types

        try:  # the generation parameters, checked now (see the module docstring)
            types.GenerateContentConfig(**self.params)
        except ValueError as exc:
            raise ValueError(f"params are not Gemini GenerateContentConfig fields: {exc}") from None

    def _new_client(self) -> Any:
        from google import genai
        from google.genai import types

        headers = {self.api_key_header: self._api_key} if self.api_key_header else None
        http = bounded_client(self.timeout, self.max_response_bytes, strict_json=True)  # its SDK reads leniently
        options = types.HttpOptions(base_url=self.base_url, api_version=API_VERSION, timeout=int(self.timeout * 1000),
                                    headers=headers,
                                    httpx_async_client=http, retry_options=types.HttpRetryOptions(attempts=1))
        return _Client(genai.Client(api_key=self._api_key, http_options=options).aio, http)

    async def aclose(self) -> None:
        state, self._state = self._state, None
        if state is not None and state.loop is asyncio.get_running_loop():
            await state.client.aio.aclose()
            await state.client.http.aclose()

    async def _listed_models(self, client: Any) -> list[str]:
        from medrcube.models.listing import LISTED_MAX

        ids: list[str] = []
        async for m in await client.aio.models.list(config={"page_size": 1000}):  # every page
            ids.append(str(m.name).removeprefix("models/"))
            if len(ids) >= LISTED_MAX:
                break
        return ids

    async def _messages(self, request: Request) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = [{"text": request.prompt}]
        for image in request.images:
            try:
                prepared = await self.images.get(image, max_side=self.image_max_side, fmt=self.image_format)
            except (ImageError, OSError) as exc:
                raise ImageError(f"image {image.digest[:12]} could not be prepared: {exc}") from exc
            data = base64.b64decode(prepared.data_url.split(",", 1)[1])
            parts.append({"inline_data": {"mime_type": prepared.mime, "data": data}})
        return [{"role": "user", "parts": parts}]

    async def _attempt(self, client: Any, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> Attempt:
        try:
            async with asyncio.timeout(self.timeout):  # one deadline for the whole attempt
                answer = await client.aio.models.generate_content(model=self.model, contents=messages,
                                                              config=dict(params))
        except Exception as exc:
            return self._failed(exc)
        return self._answer(answer)

    def _failed(self, exc: Exception) -> Attempt:
        from google.genai import errors

        if isinstance(exc, BodyTooLargeError):
            return self._too_large(exc)
        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            return self._timed_out()
        if isinstance(exc, httpx.TransportError):
            return self._unreachable(exc)
        if isinstance(exc, errors.APIError):
            said = " ".join(self._redact(str(exc.message or exc.details or "")).split())[:300] or "(no message)"
            headers = exc.response.headers if isinstance(exc.response, httpx.Response) else {}
            location = headers.get("location")
            return status_attempt(int(exc.code), said, str(exc.status) if exc.status else None, where=self._where(),
                                  model=self.model, key_env=self.api_key_env,
                                  retry_after=parse_retry_after(headers) if headers else None,
                                  location=self._redact(location) if location else None, base_hint=self.base_url_hint)
        if isinstance(exc, ValueError):  # a body the SDK could not read (not JSON, not a response)
            return self._malformed(f"{type(exc).__name__}: {self._redact(str(exc))[:200]}", "Gemini response")
        raise exc

    def _answer(self, answer: Any) -> Attempt:
        """Read a GenerateContentResponse (the contract's terms: see the module docstring)."""
        served = answer.model_version
        foreign = self._foreign(served)
        if foreign is not None:
            return foreign
        meta = answer.usage_metadata
        raw = meta.model_dump(exclude_none=True) if meta is not None else {}
        usage = token_usage(raw.get("prompt_token_count"), raw.get("candidates_token_count"), raw)
        blocked = answer.prompt_feedback.block_reason if answer.prompt_feedback is not None else None
        if not answer.candidates:
            if blocked is not None:
                return Attempt(response=Response(text=f"prompt blocked: {blocked.value}", refused=True, usage=usage,
                                                 served_model=served))
            return self._malformed("no candidates", "Gemini response")
        first = answer.candidates[0]
        parts = first.content.parts if first.content is not None and first.content.parts else []
        text = self._redactor.key_only("".join(p.text or "" for p in parts if not p.thought))
        reason = first.finish_reason.value if first.finish_reason is not None else None
        if reason in REFUSAL_REASONS:
            return Attempt(response=Response(text=text, refused=True, usage=usage, served_model=served))
        return Attempt(response=Response(text=text, usage=usage, served_model=served, truncated=reason == "MAX_TOKENS"),
                       logprobs=_as_openai_logprobs(first.logprobs_result))


def _as_openai_logprobs(result: Any) -> dict[str, Any] | None:
    """Gemini's `logprobsResult` (asked with `response_logprobs: true, logprobs: K`) in the
    shape the option confidence reads (models/confidence.py `from_logprobs`): per position
    the chosen token with its log-probability and the top K alternatives."""
    if result is None or not result.chosen_candidates:
        return None
    tops = list(result.top_candidates or [])
    content = []
    for i, chosen in enumerate(result.chosen_candidates):
        alternatives = tops[i].candidates or [] if i < len(tops) else []
        content.append({"token": chosen.token or "", "logprob": chosen.log_probability,
                        "top_logprobs": [{"token": c.token or "", "logprob": c.log_probability} for c in alternatives]})
    return {"content": content}
