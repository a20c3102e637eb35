"""The model adapter contract: requests in, one response per request out.

An adapter never grades and never raises for a failed request: a failure is a Response
with `error` set, so that the runner records it and the gate can tell an outage from a
wrong answer.

`ModelAdapter` names everything a caller (the runner, the service, the pytest room, the
construction reviewer) may use of an adapter, and callers use nothing else: no probing
for provider attributes. What a provider says travels in the contract's own terms:

- endpoint identity: `endpoints` (where requests go, credentials cut; empty for an
  in-process model) and the endpoint part of `fingerprint`;
- pre-flight: `preflight()`, one cheap call before the run (`Preflight`);
- usage: `Response.usage` with the keys `prompt_tokens` and `completion_tokens`
  (`token_usage` maps a provider's own names onto them; its raw counts are kept too);
- auth failure: `Response.auth_failed` (`ErrorKind.AUTH`), which stops a run early;
- price: `price`, the models.yaml price per million tokens, or None (no guessed cost);
- confidence: `Response.confidence`, per-option probabilities where the provider gives
  them (models/confidence.py), else None;
- stop reason: `Response.truncated` (cut at the token limit) and `Response.refused`;
- engine: `engine`, what serves the model when the gate manages or knows it (a vLLM
  engine's name, version and arguments: models/vllm_adapter.py), recorded with the run;
  None otherwise.

`AdapterBase` holds the defaults of an adapter that has no endpoint, no price and no
model name (the baselines, the simulation, replay), so each adapter states only what
differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from medrcube.models.confidence import OptionConfidence


@dataclass(frozen=True, slots=True)
class ImageInput:
    """An image to show the model: its sha256 digest and a reader of its encoded bytes.

    Adapters cache their own encoding (resize, base64) by digest, so each distinct image
    is decoded once per process however many items share it.
    """

    digest: str
    read: Callable[[], bytes] = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Request:
    """One prompt for the model. `item_id`, `task` and `options` are for baselines and
    logs; a real model sees only `prompt`, `images` and `params`."""

    key: str  # the response-store key (run/store.py)
    item_id: str
    prompt: str
    images: tuple[ImageInput, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)  # generation parameters
    variant: str = "standard"
    task: str = ""
    options: tuple[str, ...] = ()


class ErrorKind(StrEnum):
    RATE_LIMIT = "rate_limit"  # 429 after all retries
    SERVER = "server"  # 5xx after all retries
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    AUTH = "auth"  # 401/403: the key
    BAD_REQUEST = "bad_request"  # 400/404/422: the request or the model name
    MALFORMED = "malformed"  # a body that is not a chat completion (or one past the size cap)
    REDIRECT = "redirect"  # a 3xx: never followed, the Location is named
    MODEL_MISMATCH = "model_mismatch"  # another model answered, under strict_model
    CIRCUIT_OPEN = "circuit_open"  # not sent: the endpoint stopped answering (models/breaker.py)
    INTERNAL = "internal"  # the adapter itself failed (a bug, an unreadable image)


@dataclass(frozen=True, slots=True)
class Response:
    """What came back for one request.

    Exactly one of `text` and `error` is set. `refused` marks a content-filter stop or an
    explicit refusal reported by the provider (the text, if any, is kept as evidence).
    `truncated` marks an answer cut off at the token limit (`finish_reason: length`): kept
    as evidence, never graded. `served_model` is the model the endpoint says answered
    (None when it names none).
    """

    text: str | None
    error: str | None = None
    error_kind: ErrorKind | None = None
    refused: bool = False
    latency_s: float = 0.0
    usage: Mapping[str, int] | None = None
    attempts: int = 1
    truncated: bool = False
    served_model: str | None = None
    # Per-option probabilities where the model gave them (logprobs, hf logits):
    # models/confidence.py. Stored with the response; None when not measured.
    confidence: OptionConfidence | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def not_sent(self) -> bool:
        """Never sent: the run, or its endpoint's circuit breaker, stopped before this
        request's first attempt (a rerun on the same store asks it)."""
        return self.attempts == 0 and self.error_kind in (ErrorKind.CIRCUIT_OPEN, ErrorKind.AUTH)

    @property
    def auth_failed(self) -> bool:
        """The endpoint refused the key: every further request would fail the same way."""
        return self.error_kind is ErrorKind.AUTH


def token_usage(prompt: object, completion: object, raw: Mapping[str, object] | None = None) -> dict[str, int] | None:
    """`Response.usage` in the contract's keys (`prompt_tokens`, `completion_tokens`) from a
    provider's counts, with the provider's own integer counts in `raw` kept beside them
    (None when the provider reported nothing)."""
    usage = {k: int(v) for k, v in (raw or {}).items() if isinstance(v, int) and not isinstance(v, bool)}
    for key, value in (("prompt_tokens", prompt), ("completion_tokens", completion)):
        if isinstance(value, int) and not isinstance(value, bool):
            usage[key] = int(value)
    return usage or None


@dataclass(frozen=True, slots=True)
class Preflight:
    """What one cheap call to an endpoint said before the run (`ModelAdapter.preflight`).

    `problem` is fatal (nothing listens, the key is refused, the endpoint's list does not
    hold the model) and says what to check; `served` is the model as the endpoint lists
    it. Both None: nothing to say (an in-process model, a slow endpoint, no listing route).
    `resolved`: the list holds the requested name only in another spelling (`./name`,
    another case, a `:tag`), and the adapter now asks under `served` (models/listing.py).
    """

    problem: str | None = None
    served: str | None = None
    resolved: bool = False


@runtime_checkable
class ModelAdapter(Protocol):
    """A model behind a spec string (models/registry.py).

    `fingerprint` identifies the model's behaviour for caching: provider, model id and
    anything that changes answers (never a key). `batch_size` is how many requests one
    `generate` call takes best (1 for an API, more for in-process batching);
    `concurrency` how many calls may be in flight at once.

    An adapter whose answer depends on the item rather than on what it is shown (the
    baselines: replayed, leave-one-out or seeded per item) sets `keyed_by_item = True`, so
    that the response store keeps one answer per item even where two items render the
    same prompt (blind variants of templated questions). A model that sees only the
    prompt leaves it unset: identical requests then share one stored response.

    `model` is the model name asked of a provider (None for a baseline): an answer whose
    endpoint names another model is counted against it. `image_max_side` is the longest
    side images are sent at (None: as they are), so that perturbed images are made no
    larger. `endpoints` and `price` are described in the module docstring.
    """

    spec: str
    fingerprint: str
    batch_size: int
    concurrency: int

    # Read-only for callers: an adapter may hold them as plain attributes.
    @property
    def keyed_by_item(self) -> bool: ...

    @property
    def model(self) -> str | None: ...

    @property
    def image_max_side(self) -> int | None: ...

    @property
    def endpoints(self) -> tuple[str, ...]: ...

    @property
    def price(self) -> Mapping[str, Any] | None: ...

    @property
    def engine(self) -> Mapping[str, Any] | None: ...

    async def generate(self, requests: Sequence[Request]) -> list[Response]: ...

    async def preflight(self) -> Preflight: ...

    async def aclose(self) -> None: ...


class AdapterBase:
    """Defaults for the contract's members that most adapters do not need (see the
    module docstring): no model name, no endpoint, no price, nothing to pre-flight."""

    keyed_by_item: bool = False
    model: str | None = None
    image_max_side: int | None = None
    endpoints: tuple[str, ...] = ()
    price: Mapping[str, Any] | None = None
    engine: Mapping[str, Any] | None = None
    batch_size: int = 1

    async def preflight(self) -> Preflight:
        return Preflight()

    async def aclose(self) -> None:
        return None


def same_model(requested: str, served: str) -> bool:
    """True when `served` names the requested model: equal (case aside), or a dated or
    versioned snapshot of it, or the requested name as a path's last part (vLLM serves a
    local path under its full name)."""
    r, s = requested.strip().lower(), served.strip().lower()
    return s == r or s.startswith(r + "-") or s.startswith(r + "@") or s.rsplit("/", 1)[-1] == r.rsplit("/", 1)[-1]
