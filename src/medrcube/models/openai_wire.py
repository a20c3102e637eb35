"""Reading an OpenAI chat completion body into an Attempt: the wire format of
`/chat/completions`, apart from the adapter's transport (openai_adapter.py).

The body is read strictly (a key given twice, such as `message.content`, is no answer to
pick from), the first choice's text, refusal, finish reason and log-probabilities kept,
the served model checked by the adapter (`foreign`), the token counts kept as given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from medrcube.models.base import ErrorKind, Response
from medrcube.models.bounded_body import BodyTooLargeError
from medrcube.models.provider_errors import Attempt, Redactor
from medrcube.models.strict_json import DuplicateKeyError, NonStandardNumberError, loads_wire

__all__ = ["chat_usage", "read_chat_completion", "reply_cap", "too_large"]


# A reply's body within a token limit: the JSON around the text, and per token at most
# REPLY_BYTES_PER_TOKEN (a long token, each character escaped as \\uXXXX), and with
# log-probabilities its alternatives. A body past this cannot be a reply within the limit.
REPLY_OVERHEAD_BYTES = 256 * 1024
REPLY_BYTES_PER_TOKEN = 1024
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


def too_large(where: str, exc: BodyTooLargeError, ceiling: int) -> Attempt:
    """The Attempt of a body refused at its cap: not retried (a bomb stays a bomb), and a
    failure of the endpoint for its circuit breaker. Below `ceiling` (max_response_mib) the
    cap was the request's token limit's (`reply_cap`): an oversized reply."""
    if exc.limit < ceiling:
        return Attempt(kind=ErrorKind.MALFORMED, label="oversized", breaker_failure=True, message=(
            f"oversized reply from {where}: its body went past the cap of {exc.limit:,} bytes, more than a reply "
            f"within the request's token limit can be; recorded as an error, not stored in full, not graded (check the "
            f"server: it ignores the limit; a larger limit in models.yaml params raises the cap)"))
    return Attempt(kind=ErrorKind.MALFORMED, label="too_large", breaker_failure=True, message=(
        f"the response from {where} was refused unread: {exc}; raise max_response_mib in models.yaml if the "
        f"endpoint's answers are really this large"))
