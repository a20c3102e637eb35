"""Quality review of items by a model, on the paper's principles, with strict JSON verdicts.

The reviewer is any model adapter (`models.registry.load_adapter`). It sees the image and
the item (question, options, intended answer, how the answer was derived) and returns
one JSON object with a verdict per sub-principle:

    1.1 clinical and anatomical accuracy   1.2 logical coherence
    1.3 unambiguous phrasing               1.4 VQA suitability
    2.1 homogeneity of the options         2.2 mutual exclusivity
    2.3 plausibility of the distractors

A reply that is not exactly such an object is malformed: the item is asked again (with
a reminder of the format) up to `retries` times, then the malformed verdict is recorded.
An item with any "fail" is held out with the reviewer's reasons. A transport error
(the adapter's Response.error) is retried the same way and then recorded as an error:
never counted as a verdict. Responses go through the response store when one is given,
so a rebuild asks the reviewer nothing it has already answered.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlparse

from medrcube.construction.stages.production import Draft, OutImage
from medrcube.cube.item import LETTERS
from medrcube.models.base import ImageInput, ModelAdapter, Request, Response


@dataclass(frozen=True, slots=True)
class Principle:
    code: str
    name: str
    group: str  # "question" (1.x) or "options" (2.x)
    rule: str  # what the reviewer checks


PRINCIPLES: tuple[Principle, ...] = (
    Principle("1.1", "Clinical and anatomical accuracy", "question",
              "the question, the intended answer and its derivation are clinically and anatomically correct for this image"),
    Principle("1.2", "Logical coherence", "question",
              "the stem, the options and the intended answer fit together; the answer follows from what the stem asks"),
    Principle("1.3", "Unambiguous phrasing", "question",
              "the stem is clear and specific, uses standard terminology, and admits exactly one best answer"),
    Principle("1.4", "VQA suitability", "question",
              "answering requires looking at the image, the image shows what is needed to answer, and the stem does not "
              "give the answer away"),
    Principle("2.1", "Homogeneity", "options",
              "all options are of the same kind and granularity (e.g. all diagnoses, all planes) and similar in form"),
    Principle("2.2", "Mutual exclusivity", "options",
              "no two options can both be correct for this image (no option contains, implies or overlaps another)"),
    Principle("2.3", "Plausibility of distractors", "options",
              "every distractor is a plausible answer to someone who has not read the image correctly, yet wrong here"),
)  # fmt: skip
CODES: tuple[str, ...] = tuple(p.code for p in PRINCIPLES)
PRINCIPLE_BY_CODE: dict[str, Principle] = {p.code: p for p in PRINCIPLES}
RAW_KEEP = 500  # characters of a malformed reply kept as evidence


class VerdictError(ValueError):
    """A reply that is not a well-formed verdict; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One verdict per sub-principle: pass (True) or fail (False), with the reviewer's reason."""

    judgments: Mapping[str, bool]
    reasons: Mapping[str, str]

    @property
    def passed(self) -> bool:
        return all(self.judgments.values())

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(c for c in CODES if not self.judgments[c])


@dataclass
class ReviewOutcome:
    """What the review of one item came to."""

    item_id: str
    status: str  # "pass", "fail", "malformed", "error"
    verdict: Verdict | None = None
    attempts: int = 0
    problems: list[str] = field(default_factory=list)  # why each malformed attempt was rejected, or the errors
    raw: list[str] = field(default_factory=list)  # malformed replies (truncated), as evidence

    def reasons(self) -> list[str]:
        """Why the item is held out (empty when it passed)."""
        if self.status == "fail" and self.verdict is not None:
            return [f"{c} {PRINCIPLE_BY_CODE[c].name}: {self.verdict.reasons.get(c) or 'no reason given'}" for c in self.verdict.failed]
        if self.status == "malformed":
            return [f"review: malformed verdict after {self.attempts} attempt(s) ({self.problems[-1] if self.problems else ''})"]
        if self.status == "error":
            return [f"review: reviewer error after {self.attempts} attempt(s) ({self.problems[-1] if self.problems else ''})"]
        return []

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.item_id,
            "status": self.status,
            "attempts": self.attempts,
            "verdicts": {c: ("pass" if self.verdict.judgments[c] else "fail") for c in CODES} if self.verdict else None,
            "reasons": dict(self.verdict.reasons) if self.verdict else None,
            "problems": self.problems,
            "raw": self.raw,
        }


# -- the prompt -------------------------------------------------------------------------------


def review_prompt(draft: Draft, attempt: int = 0, problem: str = "") -> str:
    """The reviewer's prompt for one item (the image is attached to the request)."""
    options = draft.options
    lines = [
        "You are a radiologist reviewing one multiple-choice question of a medical imaging benchmark before it is used "
        "to evaluate AI models. The image is attached. Judge the item against each principle below.",
        "",
        "Principles for the question:",
    ]
    lines += [f"{p.code} {p.name}: {p.rule}." for p in PRINCIPLES if p.group == "question"]
    lines += ["", "Principles for the options:"]
    lines += [f"{p.code} {p.name}: {p.rule}." for p in PRINCIPLES if p.group == "options"]
    lines += [
        "",
        f"Task: {draft.fact.task} (body region: {draft.part}; modality: {draft.modality})",
        f"Question: {draft.fact.question}",
        "Options:",
    ]
    lines += [f"{LETTERS[i]}. {o}" for i, o in enumerate(options)]
    lines += [
        f"Intended answer: {LETTERS[0]}. {options[0]}",
        f"How the intended answer was derived: {draft.fact.derivation}",
        "",
        "Reply with one JSON object and nothing else, with exactly these keys, each verdict \"pass\" or \"fail\" and a "
        "short reason (required for a fail):",
        "{" + ", ".join(f'"{c}": {{"verdict": "pass", "reason": ""}}' for c in CODES) + "}",
    ]
    if attempt:
        lines += ["", f"Your previous reply could not be used ({problem}). Reply with the JSON object only."]
    return "\n".join(lines)


_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL | re.IGNORECASE)


def parse_verdict(text: str | None) -> Verdict:
    """The verdict in a reply, or VerdictError saying why the reply is malformed.

    Strict: one JSON object (a ```json fence around it is tolerated), the seven
    sub-principle codes as keys and nothing else, each {"verdict": "pass"|"fail",
    "reason": str}, with a non-empty reason for every fail.
    """
    if text is None or not text.strip():
        raise VerdictError("empty reply")
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise VerdictError(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise VerdictError(f"a JSON {type(data).__name__}, not an object")
    missing = [c for c in CODES if c not in data]
    extra = [k for k in data if k not in CODES]
    if missing or extra:
        raise VerdictError(f"keys: missing {missing}, unexpected {extra}; expected exactly {list(CODES)}")
    judgments, reasons = {}, {}
    for c in CODES:
        v = data[c]
        if not isinstance(v, dict) or set(v) - {"verdict", "reason"} or "verdict" not in v:
            raise VerdictError(f"{c} is {json.dumps(v)[:80]}; expected {{\"verdict\": \"pass\"|\"fail\", \"reason\": \"...\"}}")
        verdict = v["verdict"]
        if verdict not in ("pass", "fail"):
            raise VerdictError(f"{c} verdict is {verdict!r}; expected \"pass\" or \"fail\"")
        reason = v.get("reason", "")
        if not isinstance(reason, str):
            raise VerdictError(f"{c} reason is {type(reason).__name__}; expected a string")
        if verdict == "fail" and not reason.strip():
            raise VerdictError(f"{c} fails without a reason")
        judgments[c], reasons[c] = verdict == "pass", reason.strip()
    return Verdict(judgments, reasons)


# -- where requests go ------------------------------------------------------------------------

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def destinations(adapter: ModelAdapter) -> list[str]:
    """The network endpoints an adapter sends requests to ([] for an in-process model),
    as the adapter names them (models/base.py `endpoints`, whatever the provider)."""
    return list(adapter.endpoints)


def is_remote(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return not (host in LOCAL_HOSTS or host.startswith("127."))


# -- running the review -------------------------------------------------------------------------


class ReviewCache(Protocol):
    """What the reviewer needs of a response store (the run's ResponseStore is one)."""

    def get_many(self, keys: Iterable[str]) -> dict[str, Response]: ...

    def put_many(self, items: Sequence[tuple[str, Response]], *, model: str = "") -> None: ...


class Reviewer:
    """Reviews drafts with a model adapter; `review` returns one ReviewOutcome per draft."""

    def __init__(self, adapter: ModelAdapter, *, retries: int = 2, store: ReviewCache | None = None,
                 params: Mapping[str, Any] | None = None):  # fmt: skip
        self.adapter = adapter
        self.retries = retries
        self.store = store
        self.params = dict(params or {})
        self.requests_sent = 0
        self.cache_hits = 0

    def _request(self, draft: Draft, image: OutImage, attempt: int, problem: str) -> Request:
        from medrcube.run.store import make_key

        prompt = review_prompt(draft, attempt, problem)
        key = make_key(self.adapter.fingerprint, prompt, [image.digest], self.params, variant="review", rotation=attempt)
        png = image.png
        return Request(
            key=key, item_id=draft.id, prompt=prompt, images=(ImageInput(image.digest, lambda: png),),
            params=self.params, variant="review", task=draft.fact.task, options=draft.options,
        )  # fmt: skip

    async def _ask(self, requests: list[Request]) -> list[Response]:
        found: dict[str, Response] = self.store.get_many([r.key for r in requests]) if self.store is not None else {}
        todo = [r for r in requests if r.key not in found]
        self.cache_hits += len(requests) - len(todo)
        size = max(1, int(self.adapter.batch_size or 1))
        sem = asyncio.Semaphore(max(1, int(self.adapter.concurrency or 1)))

        async def one(batch: list[Request]) -> list[Response]:
            async with sem:
                out = await self.adapter.generate(batch)
            if self.store is not None:
                self.store.put_many(list(zip([r.key for r in batch], out, strict=True)), model=self.adapter.fingerprint)
            return out

        batches = [todo[i : i + size] for i in range(0, len(todo), size)]
        results = await asyncio.gather(*(one(b) for b in batches))
        self.requests_sent += len(todo)
        for batch, out in zip(batches, results, strict=True):
            for r, resp in zip(batch, out, strict=True):
                found[r.key] = resp
        return [found[r.key] for r in requests]

    def review(self, drafts: Sequence[Draft], images: Mapping[tuple[str, str], OutImage],
               on_done: Callable[[int], None] | None = None) -> dict[str, ReviewOutcome]:  # fmt: skip
        """Review every draft; `images` maps (dataset, key) to the image it shows."""
        return asyncio.run(self._review(drafts, images, on_done))

    async def _review(self, drafts: Sequence[Draft], images: Mapping[tuple[str, str], OutImage],
                      on_done: Callable[[int], None] | None) -> dict[str, ReviewOutcome]:
        outcomes = {d.id: ReviewOutcome(d.id, "error") for d in drafts}
        pending = list(drafts)
        try:
            for attempt in range(self.retries + 1):
                if not pending:
                    break
                reqs = [
                    self._request(d, images[(d.dataset, d.image)], attempt, outcomes[d.id].problems[-1] if outcomes[d.id].problems else "")
                    for d in pending
                ]  # fmt: skip
                responses = await self._ask(reqs)
                still = []
                for d, resp in zip(pending, responses, strict=True):
                    o = outcomes[d.id]
                    o.attempts = attempt + 1
                    if not resp.ok:
                        o.status = "error"
                        o.problems.append(f"{resp.error_kind or 'error'}: {resp.error}")
                        still.append(d)
                        continue
                    try:
                        verdict = parse_verdict(resp.text)
                    except VerdictError as exc:
                        o.status = "malformed"
                        o.problems.append(str(exc))
                        o.raw.append((resp.text or "")[:RAW_KEEP])
                        still.append(d)
                        continue
                    o.verdict = verdict
                    o.status = "pass" if verdict.passed else "fail"
                    if on_done:
                        on_done(1)
                if on_done and attempt == self.retries:
                    on_done(len(still))
                pending = still
        finally:
            await self.adapter.aclose()
        return outcomes


def pass_rates(outcomes: Sequence[ReviewOutcome]) -> dict[str, Any]:
    """Pass rates per sub-principle (of the items with a verdict) and overall."""
    judged = [o.verdict for o in outcomes if o.verdict is not None]
    per: dict[str, dict[str, Any]] = {
        c: {"name": PRINCIPLE_BY_CODE[c].name, "passed": sum(v.judgments[c] for v in judged), "judged": len(judged)}
        for c in CODES
    }
    for v in per.values():
        v["rate"] = round(v["passed"] / v["judged"], 4) if v["judged"] else None
    status: dict[str, int] = {}
    for o in outcomes:
        status[o.status] = status.get(o.status, 0) + 1
    return {
        "reviewed": len(outcomes),
        "by_status": dict(sorted(status.items())),
        "overall_pass_rate": round(status.get("pass", 0) / len(outcomes), 4) if outcomes else None,
        "per_principle": per,
    }
