"""The wire formats the scripted server speaks besides OpenAI's: Anthropic's Messages API
and Google's Gemini generateContent, each with its own request shape, answer, error body,
key header and model list.

One script and one set of fault rules serve every wire (faults.py picks the wire by the
route), so that one adapter test suite can drive the OpenAI, Anthropic and Gemini
adapters through the same scripted faults. A wire turns the server's OpenAI-style plan
(a reply, a finish of "stop", "length" or "content_filter", a refusal) into its own
terms: Anthropic's `stop_reason` (end_turn, max_tokens, refusal), Gemini's
`finishReason` (STOP, MAX_TOKENS, SAFETY).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from medrcube.testing.server.script import Parsed, inspect_image, parsed_request

__all__ = ["ANTHROPIC", "GEMINI", "GEMINI_ROUTE", "Wire"]

GEMINI_ROUTE = ":generateContent"  # POST /v1beta/models/NAME:generateContent


@dataclass(frozen=True)
class Wire:
    """How one provider's requests are read and its answers written."""

    name: str
    auth_headers: tuple[str, ...]  # the headers a key may come in (only their presence is counted)
    parse: Callable[[Mapping[str, Any], bool, str], Parsed]  # body, decode images, path
    completion: Callable[..., dict[str, Any]]  # (model, text, finish, refusal, prompt_tokens, seq)
    error_body: Callable[[int, str, str | None], bytes]
    model_key: str  # where an answer names its model
    empty: Callable[[dict[str, Any]], dict[str, Any]]  # the answer with nothing to read in it
    # Log-probabilities: how many alternatives a request asks for (None: it asks none), and
    # how the server's OpenAI-style `choice.logprobs` goes into this wire's answer.
    logprobs_asked: Callable[[Mapping[str, Any]], int | None] = lambda params: None
    attach_logprobs: Callable[[dict[str, Any], dict[str, Any]], None] = lambda obj, logprobs: None


def _usage_words(text: str | None) -> int:
    return len(text.split()) if text else 0


# ---------------------------------------------------------------------------- Anthropic


def _anthropic_parse(body: Mapping[str, Any], decode: bool, path: str) -> Parsed:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("'messages' must be a list")
    if not isinstance(body.get("max_tokens"), int):
        raise ValueError("'max_tokens' is required (an integer)")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content if isinstance(content, list) else []:
            if isinstance(block, Mapping) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif isinstance(block, Mapping) and block.get("type") == "image":
                src = block.get("source") or {}
                images.append(inspect_image(f"data:{src.get('media_type')};base64,{src.get('data', '')}", decode))
    return parsed_request(str(body.get("model", "")), texts, images, {k: v for k, v in body.items() if k != "messages"})


def _anthropic_completion(model: str, text: str | None, finish: str = "stop", refusal: str | None = None,
                          prompt_tokens: int = 0, seq: int = 0) -> dict[str, Any]:
    stop = {"stop": "end_turn", "length": "max_tokens"}.get(finish, "refusal")
    if refusal is not None:
        stop, text = "refusal", refusal
    return {"id": f"msg_scripted_{seq}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}] if text else [], "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": _usage_words(text)}}


def _anthropic_error(status: int, message: str, code: str | None = None) -> bytes:
    kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
            529: "overloaded_error"}.get(status, "api_error")
    return json.dumps({"type": "error", "error": {"type": code or kind, "message": message}}).encode()


# The Messages API takes the key as x-api-key; the SDK's current releases send it as a bearer token.
ANTHROPIC = Wire("anthropic", ("x-api-key", "Authorization"), _anthropic_parse, _anthropic_completion, _anthropic_error, "model",
                 lambda obj: {k: v for k, v in obj.items() if k != "content"})


# ---------------------------------------------------------------------------- Gemini


def _gemini_parse(body: Mapping[str, Any], decode: bool, path: str) -> Parsed:
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise ValueError("'contents' must be a list")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for c in contents:
        for part in (c.get("parts") or []) if isinstance(c, Mapping) else []:
            if not isinstance(part, Mapping):
                continue
            if "text" in part:
                texts.append(str(part["text"]))
            blob = part.get("inlineData") or part.get("inline_data")
            if isinstance(blob, Mapping):
                mime = blob.get("mimeType") or blob.get("mime_type")
                # JSON bytes as protobuf writes them may use the URL-safe alphabet: read both.
                data = str(blob.get("data", "")).replace("-", "+").replace("_", "/")
                images.append(inspect_image(f"data:{mime};base64,{data}", decode))
    model = path.rsplit("/", 1)[-1].removesuffix(GEMINI_ROUTE)
    return parsed_request(model, texts, images, {k: v for k, v in body.items() if k != "contents"})


def _gemini_completion(model: str, text: str | None, finish: str = "stop", refusal: str | None = None,
                       prompt_tokens: int = 0, seq: int = 0) -> dict[str, Any]:
    reason = {"stop": "STOP", "length": "MAX_TOKENS"}.get(finish, "SAFETY")
    if refusal is not None:
        reason, text = "SAFETY", refusal
    content = {"role": "model", "parts": [{"text": text}] if text else []}
    return {"candidates": [{"content": content, "finishReason": reason, "index": 0}],
            "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": _usage_words(text),
                              "totalTokenCount": prompt_tokens + _usage_words(text)},
            "modelVersion": model, "responseId": f"scripted-{seq}-{int(time.time())}"}


_GRPC_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 503: "UNAVAILABLE",
                504: "DEADLINE_EXCEEDED"}


def _gemini_error(status: int, message: str, code: str | None = None) -> bytes:
    grpc = code or _GRPC_STATUS.get(status, "UNKNOWN")
    return json.dumps({"error": {"code": status, "message": message, "status": grpc}}).encode()


def _gemini_logprobs_asked(params: Mapping[str, Any]) -> int | None:
    config = params.get("generationConfig") or {}
    return int(config.get("logprobs") or 0) if config.get("responseLogprobs") else None


def _gemini_attach_logprobs(obj: dict[str, Any], logprobs: dict[str, Any]) -> None:
    """Gemini's `logprobsResult`: per position the chosen token and the top candidates."""
    content = logprobs["content"]
    obj["candidates"][0]["logprobsResult"] = {
        "chosenCandidates": [{"token": e["token"], "logProbability": e["logprob"]} for e in content],
        "topCandidates": [{"candidates": [{"token": t["token"], "logProbability": t["logprob"]}
                                          for t in e.get("top_logprobs", [])]} for e in content],
    }


GEMINI = Wire("gemini", ("x-goog-api-key",), _gemini_parse, _gemini_completion, _gemini_error, "modelVersion",
              lambda obj: {**obj, "candidates": []}, _gemini_logprobs_asked, _gemini_attach_logprobs)


def models_listing(wire: str, names: list[str]) -> dict[str, Any]:
    """The model list a wire's GET route answers: OpenAI's and Anthropic's share one path
    (/v1/models), so their list is one body both SDKs read; Gemini's is its own."""
    if wire == "gemini":
        return {"models": [{"name": f"models/{n}", "displayName": n, "supportedGenerationMethods": ["generateContent"]}
                           for n in names]}
    return {"object": "list", "has_more": False, "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None,
            "data": [{"id": n, "object": "model", "type": "model", "display_name": n, "created": 0,
                      "created_at": "2025-01-01T00:00:00Z", "owned_by": "medrcube"} for n in names]}
