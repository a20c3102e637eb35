"""What a run asked each model: `Usage` (requests sent, tokens, errors by cause) and the
`Metered` adapter that counts it around any model adapter, for run.json, gate.json, the
summary's usage lines and a budget on cost (plugin/costs.py).

A stored answer costs nothing and a request the run stopped before sending is none; the
workers' usages are summed by the controller (plugin/handover.py). Once the first answer is
in (the requests are out), `Metered` starts on a thread the imports that grading, deciding
and writing the run need (`warm_after_answers`), so that neither start-up nor the end of
the run waits for them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.models.base import ModelAdapter, Preflight, Request, Response


@dataclass
class Usage:
    """What one model was asked this run (requests sent, tokens, errors by cause)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    error_causes: Counter[str] = field(default_factory=Counter)

    def add(self, other: Mapping[str, Any] | Usage) -> None:
        d = other.to_dict() if isinstance(other, Usage) else other
        self.requests += int(d.get("requests", 0))
        self.prompt_tokens += int(d.get("prompt_tokens", 0))
        self.completion_tokens += int(d.get("completion_tokens", 0))
        self.errors += int(d.get("errors", 0))
        self.error_causes.update(dict(d.get("error_causes") or {}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "errors": self.errors,
            "error_causes": dict(self.error_causes.most_common()),
        }


def error_cause(response: Response) -> str:
    """A response's error, shortened to its cause (the first sentence) and the provider's
    own words when it quoted them (a hint in between is dropped), for counting."""
    text = " ".join((response.error or "").split())
    head = text.split("; ", 1)[0]
    said = text.find("Provider said: ")
    if said > len(head):
        head = f"{head.rstrip('.')}. {text[said:]}"
    return head[:400] or str(response.error_kind or "error")


# What grading, deciding and writing a run need after its last answer: the answers'
# extraction (run/grade.py, not imported before the first request) and the evaluation. The
# intervals' t, normal and binomial functions are metrics/special.py's, pure Python (importing
# scipy.special cost 0.34 s of CPU more; a --sequential run's looks import it where they are
# taken), and numpy is needed only by the metrics of answers that carry a confidence
# (calibration, selective prediction: WITH_CONFIDENCE, warmed once such an answer is in).
# Imported on a thread once the first answer is in (the requests are out), so that neither
# start-up nor the end of the run waits for them (an event loop waiting on its endpoint
# leaves the interpreter free). The main thread imports them where it uses them, as before:
# one that failed here fails there, with its own traceback, and one still loading there is
# waited for by the import lock.
AFTER_ANSWERS = ("medrcube.run.grade", "medrcube.gate.evaluate")
WITH_CONFIDENCE = ("numpy",)
_warming = threading.Lock()
_warm_started: set[tuple[str, ...]] = set()


def warm_after_answers(names: tuple[str, ...] | None = None) -> None:
    """Start importing `names` (default AFTER_ANSWERS) on a daemon thread, once per process and tuple."""
    names = AFTER_ANSWERS if names is None else names
    with _warming:
        if names in _warm_started:
            return
        _warm_started.add(names)

    def load() -> None:
        from importlib import import_module

        for name in names:
            try:
                import_module(name)
            except Exception:  # noqa: BLE001, S112 - the main thread's own import reports it
                continue

    threading.Thread(target=load, name="medrcube-warm-imports", daemon=True).start()


class Metered:
    """A model adapter that counts what it was asked: the requests really sent (a stored
    response costs nothing, a request the run stopped before sending is none), their
    tokens and their errors. Everything else is the
    wrapped adapter's (spec, fingerprint, concurrency, ...), so the store keys and the
    run are exactly those of the adapter itself."""

    def __init__(self, adapter: ModelAdapter) -> None:
        self.inner = adapter
        self.usage = Usage()
        self.spec, self.fingerprint = adapter.spec, adapter.fingerprint
        self.batch_size, self.concurrency = adapter.batch_size, adapter.concurrency
        self.keyed_by_item, self.model = adapter.keyed_by_item, adapter.model
        self.image_max_side, self.endpoints, self.price = adapter.image_max_side, adapter.endpoints, adapter.price
        self.engine = adapter.engine

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        responses = await self.inner.generate(requests)
        warm_after_answers()  # an answer is in: the requests are out
        if any(r.confidence for r in responses):
            warm_after_answers(WITH_CONFIDENCE)
        for r in responses:
            if r.not_sent:  # the run stopped before sending it: no request, no failure (tally.py)
                continue
            self.usage.requests += 1
            u = r.usage or {}
            self.usage.prompt_tokens += int(u.get("prompt_tokens") or 0)
            self.usage.completion_tokens += int(u.get("completion_tokens") or 0)
            if not r.ok:
                self.usage.errors += 1
                self.usage.error_causes[error_cause(r)] += 1
        return responses

    async def preflight(self) -> Preflight:
        return await self.inner.preflight()

    async def request_written(self) -> None:
        written = getattr(self.inner, "request_written", None)  # optional (run/pump.py, the first wave)
        if written is not None:
            await written()

    def prefetch(self, requests: Sequence[Request]) -> None:
        hook = getattr(self.inner, "prefetch", None)  # optional (run/pump.py `Lookahead`)
        if hook is not None:
            hook(requests)

    async def aclose(self) -> None:
        await self.inner.aclose()
