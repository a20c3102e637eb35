"""What one HTTP attempt of an API adapter gave, and what a failed one says to the user.

`Attempt` is the result of one attempt: a final Response, or an error (retryable or
not). `status_attempt` turns an HTTP error status into the message a user acts on: it
names the cause (a 404 for a model name says "model not found", naming the model and
the URL; 401 the key's variable; 403 the permission; 400 the parameter), and quotes the
provider's own words verbatim (JSON `error.message`, FastAPI `detail`, or the plain text),
truncated and with the key cut (`Redactor`); a hint is given only when the words match it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from medrcube.models.base import ErrorKind, Response
from medrcube.models.urls import redact_urls

__all__ = ["Attempt", "Redactor", "provider_says", "status_attempt"]

SAID_MAX = 300  # characters of the provider's own message kept in ours
_KEY_LIKE = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-\*\.]{3,}")
# How providers word "no such model" in a 404 (OpenAI, vLLM, SGLang, TGI, Ollama, gateways).
# A 400 that names a refused parameter (the hint to drop it fits), or the model (the hint
# to check the name fits); a hint that matches neither is left out.
_PARAM_REFUSED = re.compile(r"\b(temperature|top_p|max_tokens|max_completion_tokens|logprobs|seed|parameter|"
                            r"unsupported|not supported|unrecognized|unknown field|extra inputs)\b", re.I)
_MODEL_NAMED = re.compile(r"\bmodel\b|pinned", re.I)
_MODEL_MISSING = re.compile(r"model.*(does not exist|not found|not exist|unknown|no such|not available|not served)"
                            r"|(unknown|invalid|no such) model|model_not_found", re.I | re.S)


@dataclass
class Attempt:
    """What one HTTP attempt gave: a final response, or an error (retryable or not)."""

    response: Response | None = None
    kind: ErrorKind | None = None
    label: str = ""  # short, for the attempt history: "429", "timeout", "malformed"
    message: str = ""
    retry_after: float | None = None
    retryable: bool = False
    logprobs: Any = None  # the choice's `logprobs` object, read against the request's options (models/confidence.py)
    # not retried, yet a failure of the endpoint for its circuit breaker (a reply far past
    # the token limit: a server that sends them keeps sending them)
    breaker_failure: bool = False


class Redactor:
    """Cuts a configured key, key-shaped tokens and URL credentials from a text.

    The key is cut as given and without a provider prefix ("sk-..."), since an echo may
    quote either; answers get the key cut only (`key_only`), so that a model's own text
    is otherwise left as it was."""

    MARK = "[redacted]"

    def __init__(self, key: str | None) -> None:
        forms = []
        if key and len(key) >= 8:
            forms.append(key)
            bare = re.sub(r"^[A-Za-z]{2,4}[-_]", "", key)
            if bare != key and len(bare) >= 12:
                forms.append(bare)
        self._forms = tuple(forms)

    def key_only(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, self.MARK)
        return text

    def __call__(self, text: str) -> str:
        return _KEY_LIKE.sub(self.MARK, redact_urls(self.key_only(text)))


def provider_says(exc: Any, redact: Redactor) -> tuple[str, str | None]:
    """(the provider's message, truncated and redacted; its error code) from an SDK error."""
    body = getattr(exc, "body", None)
    message, code = None, None
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            message, code = err.get("message"), err.get("code")
        elif isinstance(err, str):
            message = err
        if not message and isinstance(body.get("message"), str):
            message = body["message"]
        if not message and body.get("detail"):  # FastAPI servers (transformers serve): a text or a list
            detail = body["detail"]
            message = detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)
    elif isinstance(body, str):
        message = body
    if not message:
        message = str(getattr(exc, "message", "") or exc)
    said = " ".join(redact(str(message)).split())
    if len(said) > SAID_MAX:
        said = said[: SAID_MAX - 3] + "..."
    return said or "(no message)", (str(code) if code is not None else None)


def status_attempt(status: int, said: str, code: str | None, *, where: str, model: str, key_env: str,
                   retry_after: float | None, location: str | None = None,
                   base_hint: str = "an OpenAI-compatible base URL usually ends in /v1") -> Attempt:
    """The Attempt for an HTTP error status (see the module docstring)."""
    label = str(status)
    quote = f"Provider said: {said}"
    if 300 <= status < 400:
        return Attempt(kind=ErrorKind.REDIRECT, label=label, message=(
            f"HTTP {status} from {where}: redirected to {location or '(no Location header)'}, not followed (an "
            f"answer from another address would be graded under this endpoint's name); set the base URL to the "
            f"address that answers"))
    if status == 429:
        if code == "insufficient_quota":  # billing, not pace: waiting will not help
            return Attempt(kind=ErrorKind.RATE_LIMIT, label=label, message=(
                f"HTTP 429 insufficient_quota from {where}: the account behind ${key_env} has no quota left; "
                f"check its billing. {quote}"))
        return Attempt(kind=ErrorKind.RATE_LIMIT, label=label, retryable=True, retry_after=retry_after,
                       message=f"rate limited (HTTP 429) by {where}; lower concurrency or set rpm in models.yaml. "
                               f"{quote}")
    if status >= 500 or status in (408, 409):
        kind = ErrorKind.TIMEOUT if status == 408 else ErrorKind.SERVER
        return Attempt(kind=kind, label=label, retryable=True, retry_after=retry_after,
                       message=f"server error (HTTP {status}) from {where}. {quote}")
    if status == 400 and code in ("content_filter", "content_policy_violation"):
        # The provider's filter refused the prompt: an outcome of its own, not an error.
        return Attempt(response=Response(text=said, refused=True))
    if status == 401:
        return Attempt(kind=ErrorKind.AUTH, label=label, message=(
            f"HTTP 401 from {where}: authentication failed: the key in ${key_env} (or the variable models.yaml "
            f"names) was rejected; check that it is set to a valid key for this endpoint. {quote}"))
    if status == 403:
        return Attempt(kind=ErrorKind.AUTH, label=label, message=(
            f"HTTP 403 from {where}: permission denied: the key in ${key_env} may not use model {model!r} "
            f"(organisation, project, region or IP allow-list); check its permissions. {quote}"))
    if status == 404:
        if code == "model_not_found" or _MODEL_MISSING.search(said):
            return Attempt(kind=ErrorKind.BAD_REQUEST, label=label, message=(
                f"HTTP 404 from {where}: model not found: {model!r} is not served at {where}; check the model "
                f"name (GET {where.rstrip('/')}/models lists what is served). {quote}"))
        return Attempt(kind=ErrorKind.BAD_REQUEST, label=label, message=(
            f"HTTP 404 from {where}: no such route for model {model!r}; check the base URL {where!r} "
            f"({base_hint}). {quote}"))
    if status == 413:
        return Attempt(kind=ErrorKind.BAD_REQUEST, label=label, message=(
            f"HTTP 413 from {where}: the request is too large for the endpoint; lower image_max_side in "
            f"models.yaml. {quote}"))
    cause = "bad request" if status == 400 else ("unprocessable request" if status == 422 else "request rejected")
    if _PARAM_REFUSED.search(said):
        hint = "; if a parameter is refused (e.g. temperature for a reasoning model), set it to null in models.yaml"
    elif _MODEL_NAMED.search(said):
        hint = f"; the endpoint refuses the model name {model!r}: check it (GET {where.rstrip('/')}/models)"
    else:
        hint = ""
    return Attempt(kind=ErrorKind.BAD_REQUEST, label=label, message=f"HTTP {status} from {where} for model "
                   f"{model!r}: {cause}{hint}. {quote}")
