"""Reading an OpenAI chat completion body into an Attempt: the wire format of
`/chat/completions`, apart from the adapter's transport (openai_adapter.py).

The body is read strictly (a key given twice, such as `message.content`, is no answer to
pick from), the first choice's text, refusal, finish reason and log-probabilities kept,
the served model checked by the adapter (`foreign`), the token counts kept as given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from medrcube.models.base import Response
from medrcube.models.provider_errors import Attempt, Redactor
from medrcube.models.strict_json import DuplicateKeyError, NonStandardNumberError, loads_wire

__all__ = ["chat_usage", "read_chat_completion"]


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
