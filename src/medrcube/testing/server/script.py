"""The script grammar of the scripted server: what a script may say, parsed and checked,
and how a chat request is read (its question, images and hashes).

See the package docstring (medrcube/testing/server/__init__.py) for the script's keys and
the fault rules; `FAULTS` lists the fault names this module accepts, and
`faults.py` says what each one does on the wire.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

ReplyFn = Callable[[str, Mapping[str, Any]], "str | None"]

FAULTS = (
    "status", "hang", "malformed", "truncated", "empty_choices", "content_filter", "refusal", "drop", "reset",
    "redirect", "drip", "gzip_bomb", "served_model", "length", "key_echo", "endless", "die", "duplicate_key",
    "non_finite",
)
# Faults whose body carries the scripted reply (the others answer without one).
REPLYING_FAULTS = frozenset({"truncated", "drop", "empty_choices", "drip", "gzip_bomb", "served_model",
                             "length", "key_echo", "endless", "duplicate_key", "non_finite"})
_SCRIPT_KEYS = {
    "default", "answers", "answer_key", "reply_format", "latency", "latency_by_question", "faults",
    "models", "model", "require_auth", "hang_s", "seed", "inspect_images", "log_limit", "logprobs",
    "models_status", "pinned",
}
_RULE_KEYS = {
    "fault", "status", "retry_after", "retry_after_ms", "message", "code", "match", "first", "after",
    "per_prompt", "fraction", "delay", "seconds", "text", "seed", "location", "interval", "inflated_mib",
    "model", "style", "token_s", "max_tokens",
}
_QUESTION = re.compile(r"Question:\s*(.*?)\s*\n\s*Options:", re.S)
_OPTION = re.compile(r"^\s*\(?([A-Z])[.):]\s+(.*?)\s*$")


class ScriptError(ValueError):
    """A script that cannot be run; the message names the key and what is accepted."""


def question_of(prompt: str) -> str:
    """The question text of a prompt in the reference wording, else the stripped prompt."""
    m = _QUESTION.search(prompt)
    return m.group(1) if m else prompt.strip()


def _options_of(prompt: str) -> list[tuple[str, str]]:
    """(letter, text) pairs listed after "Options:" (empty when there is no such list)."""
    at = prompt.find("Options:")
    if at < 0:
        return []
    found: list[tuple[str, str]] = []
    for line in prompt[at + len("Options:"):].splitlines():
        m = _OPTION.match(line)
        if m:
            found.append((m.group(1), m.group(2)))
        elif found and line.strip():
            break  # the instruction line after the options
    return found



# ---------------------------------------------------------------------------- the script


@dataclass
class _Latency:
    low: float
    high: float

    @classmethod
    def parse(cls, value: Any, where: str) -> _Latency:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return cls(float(value), float(value))
        if isinstance(value, Mapping) and set(value) == {"fixed"}:
            return cls.parse(value["fixed"], where)
        if isinstance(value, Mapping) and set(value) == {"uniform"}:
            pair = value["uniform"]
            if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
                isinstance(x, (int, float)) and x >= 0 for x in pair
            ) and pair[0] <= pair[1]:
                return cls(float(pair[0]), float(pair[1]))
        raise ScriptError(
            f"script: {where} = {value!r} is not a latency; use seconds >= 0, "
            '{"fixed": s} or {"uniform": [low, high]}'
        )

    def sample(self, rng: random.Random) -> float:
        return self.low if self.low == self.high else rng.uniform(self.low, self.high)


@dataclass
class _Rule:
    spec: dict[str, Any]
    fault: str
    match: str | None
    first: int | None
    after: int
    per_prompt: bool
    fraction: float | None
    rng: random.Random
    seen: Counter[str] = field(default_factory=Counter)

    @classmethod
    def parse(cls, spec: Any, i: int, seed: int) -> _Rule:
        where = f"faults[{i}]"
        if not isinstance(spec, Mapping):
            raise ScriptError(f"script: {where} must be an object such as {{\"fault\": \"status\", \"status\": 429}}")
        unknown = set(spec) - _RULE_KEYS
        if unknown:
            raise ScriptError(f"script: {where} has unknown keys {sorted(unknown)}; accepted: {sorted(_RULE_KEYS)}")
        fault = spec.get("fault")
        if fault not in FAULTS:
            raise ScriptError(f"script: {where}.fault = {fault!r}; accepted: {', '.join(FAULTS)}")
        if fault == "status" and not (isinstance(spec.get("status"), int) and 100 <= spec["status"] <= 599):
            raise ScriptError(f"script: {where} is a status fault without a valid \"status\" (100..599)")
        if spec.get("style", "openai") not in ("openai", "fastapi", "text"):
            raise ScriptError(f"script: {where}.style = {spec['style']!r}; accepted: openai, fastapi, text")
        fraction = spec.get("fraction")
        if fraction is not None and not (isinstance(fraction, (int, float)) and 0 <= fraction <= 1):
            raise ScriptError(f"script: {where}.fraction = {fraction!r}; use a number in [0, 1]")
        for k in ("first", "after"):
            v = spec.get(k)
            if v is not None and not (isinstance(v, int) and v >= 0):
                raise ScriptError(f"script: {where}.{k} = {v!r}; use an integer >= 0")
        return cls(
            spec=dict(spec), fault=fault, match=spec.get("match"), first=spec.get("first"),
            after=spec.get("after", 0) or 0, per_prompt=bool(spec.get("per_prompt", False)),
            fraction=fraction, rng=random.Random(spec.get("seed", seed * 1000 + i)),
        )

    def fires(self, question: str, prompt: str, request_hash: str) -> bool:
        """Count this request if it matches, and say whether the fault applies to it."""
        if self.match is not None and not _matches(self.match, question, prompt):
            return False
        counter = request_hash if self.per_prompt else ""
        self.seen[counter] += 1
        n = self.seen[counter]  # 1-based position among matching requests
        if n <= self.after:
            return False
        if self.first is not None and n > self.after + self.first:
            return False
        return self.fraction is None or self.rng.random() < self.fraction


def _matches(key: str, question: str, prompt: str) -> bool:
    return key == question or key in prompt


V = TypeVar("V")


def _lookup(table: Mapping[str, V], question: str, prompt: str) -> tuple[bool, V | None]:
    """Find a question's entry: an exact hit on the question first (cheap), then substrings."""
    if question in table:
        return True, table[question]
    for key, value in table.items():
        if key in prompt:
            return True, value
    return False, None


@dataclass
class Script:
    """A parsed script (see the module docstring); `raw` is its JSON form."""

    raw: dict[str, Any]
    default: str
    answers: dict[str, str]
    answer_key: dict[str, Any]
    reply_format: str
    latency: _Latency
    latency_by_question: dict[str, _Latency]
    rules: list[_Rule]
    models: list[str] | None
    model: str | None
    require_auth: bool
    hang_s: float
    inspect_images: bool
    log_limit: int
    rng: random.Random
    reply_fn: ReplyFn | None = None
    logprobs: dict[str, dict[str, float]] = field(default_factory=dict)
    models_status: int | None = None  # the status the model-list routes answer with (None: 200)
    pinned: int | None = None  # the status a model not in `models` gets, as a pinned server answers (None: 404)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, reply_fn: ReplyFn | None = None) -> Script:
        raw = dict(raw or {})
        unknown = set(raw) - _SCRIPT_KEYS
        if unknown:
            raise ScriptError(f"script: unknown keys {sorted(unknown)}; accepted: {sorted(_SCRIPT_KEYS)}")
        seed = raw.get("seed", 0)
        for k in ("answers", "answer_key", "latency_by_question", "logprobs"):
            if not isinstance(raw.get(k, {}), Mapping):
                raise ScriptError(f"script: {k} must be an object mapping question text to a value")
        faults = raw.get("faults", [])
        if not isinstance(faults, list):
            raise ScriptError("script: faults must be a list of rules")
        models = raw.get("models")
        if models is not None and not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
            raise ScriptError("script: models must be a list of model names")
        default = raw.get("default", "A")
        if not isinstance(default, str):
            raise ScriptError(f"script: default = {default!r}; use a reply string such as \"A\"")
        return cls(
            raw=json.loads(json.dumps(raw)),  # proves it is JSON-serialisable, and detaches it
            default=default,
            answers={str(k): str(v) for k, v in raw.get("answers", {}).items()},
            answer_key=dict(raw.get("answer_key", {})),
            reply_format=str(raw.get("reply_format", "{letter}")),
            latency=_Latency.parse(raw.get("latency", 0.0), "latency"),
            latency_by_question={
                str(k): _Latency.parse(v, f"latency_by_question[{k!r}]")
                for k, v in raw.get("latency_by_question", {}).items()
            },
            rules=[_Rule.parse(r, i, seed) for i, r in enumerate(faults)],
            models=models,
            model=raw.get("model"),
            require_auth=bool(raw.get("require_auth", False)),
            hang_s=float(raw.get("hang_s", 3600.0)),
            inspect_images=bool(raw.get("inspect_images", True)),
            log_limit=int(raw.get("log_limit", 100_000)),
            rng=random.Random(seed),
            reply_fn=reply_fn,
            logprobs=_parse_logprobs(raw.get("logprobs", {})),
            models_status=_status(raw.get("models_status"), "models_status"),
            pinned=_status(raw.get("pinned"), "pinned"),
        )

    def reply(self, question: str, prompt: str, body: Mapping[str, Any]) -> str:
        if self.reply_fn is not None:
            text = self.reply_fn(prompt, body)
            if text is not None:
                return text
        _, text = _lookup(self.answers, question, prompt)
        if text is not None:
            return text
        hit, correct = _lookup(self.answer_key, question, prompt)
        if hit:
            options = _options_of(prompt)
            for i, (letter, option) in enumerate(options):
                if (isinstance(correct, int) and correct == i) or (
                    isinstance(correct, str) and option.strip().casefold() == correct.strip().casefold()
                ):
                    return self.reply_format.format(letter=letter, option=option)
        return self.default

    def latency_for(self, question: str, prompt: str) -> float:
        hit, lat = _lookup(self.latency_by_question, question, prompt) if self.latency_by_question else (False, None)
        chosen = lat if hit and isinstance(lat, _Latency) else self.latency
        return chosen.sample(self.rng)


def _status(value: Any, key: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599):
        return value
    raise ScriptError(f"script: {key} = {value!r}; use an HTTP status (100..599)")


def _parse_logprobs(table: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The script's `logprobs` table: question -> {option letter: probability in (0, 1]}."""
    out: dict[str, dict[str, float]] = {}
    for question, dist in table.items():
        if not (isinstance(dist, Mapping) and dist and all(
                isinstance(k, str) and len(k) == 1 and isinstance(v, (int, float)) and 0 < v <= 1
                for k, v in dist.items())):
            raise ScriptError(f"script: logprobs[{question!r}] = {dist!r}; use an object of option letters to "
                              'probabilities in (0, 1], such as {"A": 0.7, "B": 0.3}')
        out[str(question)] = {k: float(v) for k, v in dist.items()}
    return out


@dataclass
class Parsed:
    model: str
    prompt: str
    question: str
    images: list[dict[str, Any]]
    params: dict[str, Any]
    prompt_hash: str
    request_hash: str


def inspect_image(url: str, decode: bool) -> dict[str, Any]:
    """What the server can say about an image_url: its type, size in pixels and digest."""
    if not url.startswith("data:"):
        return {"mime": None, "url_scheme": urlsplit(url).scheme}
    head, _, payload = url.partition(",")
    mime = head[5:].split(";")[0] or None
    info: dict[str, Any] = {"mime": mime, "base64": head.endswith(";base64")}
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        info["error"] = "invalid base64"
        return info
    info["bytes"] = len(raw)
    info["sha256"] = hashlib.sha256(raw).hexdigest()[:16]
    if decode:
        try:
            from PIL import Image  # lazy: the server itself needs only the standard library

            with Image.open(io.BytesIO(raw)) as im:  # reads the header only
                info["width"], info["height"], info["format"] = im.width, im.height, im.format
        except Exception as exc:  # an undecodable image is recorded, not fatal
            info["error"] = f"not an image: {type(exc).__name__}"
    return info


def _parse_chat(body: Mapping[str, Any], decode_images: bool) -> Parsed:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("'messages' must be a list")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "image_url":
                    iu = part.get("image_url")
                    url = iu.get("url", "") if isinstance(iu, Mapping) else str(iu or "")
                    images.append(inspect_image(url, decode_images))
    return parsed_request(str(body.get("model", "")), texts, images, {k: v for k, v in body.items() if k != "messages"})


def parsed_request(model: str, texts: list[str], images: list[dict[str, Any]], params: dict[str, Any]) -> Parsed:
    """A request as the server counts it, whatever its wire (wires.py): the same hashes."""
    prompt = "\n".join(texts)
    prompt_hash = hashlib.sha256(prompt.encode()).hexdigest()[:16]
    h = hashlib.sha256()
    for part in (model, prompt, *(str(i.get("sha256")) for i in images)):
        h.update(part.encode())
        h.update(b"\0")
    return Parsed(model, prompt, question_of(prompt), images, params, prompt_hash, h.hexdigest()[:16])

