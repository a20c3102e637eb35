"""models.yaml: named model definitions, validated strictly.

The file has one top-level key, `models`, mapping a name (what `--model NAME` says) to
an entry::

    models:
      gpt-5.1:
        provider: openai
        model: gpt-5.1
        params: {max_completion_tokens: 2048, temperature: null}

Every error names the file, the model entry, the key and what would be accepted, because
a typo in a config file should cost seconds, not a silently different run. Keys are
never written here: an entry names the environment variable that holds its key
(`api_key_env`), and anything that looks like a literal secret is refused.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from medrcube.models import providers
from medrcube.models.ceilings import PARAM_CEILINGS, beyond
from medrcube.models.light_http import TRANSPORTS
from medrcube.models.urls import credential_parts, redact_urls, refusal_hint
from medrcube.models.vllm_args import ENGINE_KEYS, EngineArgs, engine_args
from medrcube.taxonomy import did_you_mean

# The providers an entry may name, and the spec words a name may not shadow, are the
# provider registry's (models/providers.py): the HTTP API providers share the keys of
# _OPENAI_KEYS (their adapters share the transport).
DTYPES: tuple[str, ...] = ("auto", "float32", "float16", "bfloat16")

_COMMON_KEYS = ("provider", "model", "params", "concurrency", "batch_size", "image_max_side", "price")
_OPENAI_KEYS = ("base_url", "base_urls", "api_key_env", "api_key_header", "rpm", "timeout", "max_retries",
                "endpoint_identity", "strict_model", "max_response_mib", "breaker_failures", "breaker_seconds",
                "retry_after_max", "retry_wait_max", "transport")
_HF_KEYS = ("dtype", "device")
# A managed vLLM engine (models/vllm_engine.py): where vLLM is installed, how long it may
# take to start, and its engine arguments (`dtype` is shared with hf).
_VLLM_KEYS = ("executable", "start_timeout", *(k for k in ENGINE_KEYS if k != "dtype"))
ENTRY_KEYS: tuple[str, ...] = _COMMON_KEYS + _OPENAI_KEYS + _HF_KEYS + _VLLM_KEYS
# The OpenAI adapter's keys a vLLM entry takes too (its adapter is that adapter on the engine).
_VLLM_OPENAI = ("base_url", "timeout", "max_retries", "strict_model", "max_response_mib", "breaker_failures",
                "breaker_seconds", "transport")


def _only_for(key: str) -> tuple[str, ...]:
    """The providers a key applies to (empty: every provider)."""
    apis = providers.registered()
    if key == "transport":  # the native adapters speak through their SDKs only
        return (*(p.name for p in apis if p.api is not None and p.api.transport), "vllm")
    if key == "dtype":
        return ("hf", "vllm")
    if key in _OPENAI_KEYS:
        return (*providers.api_names(), *(("vllm",) if key in _VLLM_OPENAI else ()))
    if key in _HF_KEYS:
        return ("hf",)
    if key in _VLLM_KEYS:
        return ("vllm",)
    return ()

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/]*$")
# Key names under which a string value is suspected of being a credential.
_SECRET_KEY = re.compile(r"(^|[_\-])(api[_\-]?key|apikey|key|token|secret|password|passwd|auth|authorization|bearer)s?($|[_\-])", re.I)
# Values that are credentials whatever key they sit under: well-known key prefixes and
# bearer headers.
_SECRET_VALUE = re.compile(
    r"^((sk-|sk_|hf_|ghp_|gho_|github_pat_|xox[abp]-|AKIA|AIza)(?=[^\s/]*\d)[A-Za-z0-9_\-]{16,}|Bearer\s+\S{8,})$", re.I
)
# A long run of key-like characters with no spaces: how a token looks.
_TOKEN_LIKE = re.compile(r"^[A-Za-z0-9_\-\.=+/:]{16,}$")


class ModelSpecError(ValueError):
    """A model spec or a models.yaml entry that cannot be turned into an adapter."""


class ModelsFileError(ModelSpecError):
    """models.yaml is unreadable or breaks the schema; the message says where and how."""


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One validated models.yaml entry. Fields left out of the file are None, so that
    the adapter's own defaults apply; `params` values of None remove a default."""

    name: str
    provider: str
    model: str
    source: str  # the models.yaml path, for messages
    base_urls: tuple[str, ...] = ()
    api_key_env: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    rpm: float | None = None
    timeout: float | None = None
    max_retries: int | None = None
    image_max_side: int | None = None
    batch_size: int | None = None
    dtype: str | None = None
    device: str | None = None
    # Price per million tokens: {"prompt": 1.25, "completion": 10.0, "currency": "USD"}.
    # Read by the reports to state a run's cost; never sent anywhere.
    price: Mapping[str, Any] | None = None
    # The endpoint part of the response store's key. Left out, it is the base URL (or the
    # base URLs of the entry): two endpoints share stored answers only when the file
    # gives them the same endpoint_identity, i.e. says they serve the same model.
    endpoint_identity: str | None = None
    strict_model: bool | None = None  # an answer naming another model is an error
    max_response_mib: float | None = None  # cap on a decoded response body
    api_key_header: str | None = None  # send the key in this header (a gateway's own), not as Bearer
    # When to stop asking a failing endpoint, and how long throttling may hold a request
    # (models/breaker.py, openai_adapter.py); None: the adapter's defaults.
    breaker_failures: int | None = None
    breaker_seconds: float | None = None
    retry_after_max: float | None = None
    retry_wait_max: float | None = None
    # The OpenAI adapter's HTTP transport: "auto" (the light client for a base URL without a
    # proxy), "light", or "sdk" (the openai client); models/light_http.py.
    transport: str | None = None
    # provider vllm: the engine's arguments, where vLLM is installed, its start-up bound.
    engine: EngineArgs | None = None
    executable: str | None = None
    start_timeout: float | None = None


def default_models_file() -> Path | None:
    """`./models.yaml` when it exists (relative to the working directory), else None."""
    p = Path("models.yaml")
    return p if p.is_file() else None


def load_models_file(path: str | os.PathLike[str]) -> dict[str, ModelEntry]:
    """Read and validate a models.yaml; returns name -> entry.

    Raises ModelsFileError naming the file, the entry and the key on any problem.
    """
    from medrcube.yamlconf import YamlFileError, read_yaml_file  # safe loading, duplicate keys refused

    src = str(path)
    try:
        data = read_yaml_file(path, missing_fix="pass an existing file, or drop --models-file")
    except YamlFileError as e:
        raise ModelsFileError(f"{src}: {e.problem} ({e.fix})") from None
    return parse_models(data, src)


def parse_models(data: Any, source: str) -> dict[str, ModelEntry]:
    """Validate already-parsed YAML (`source` names it in messages)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ModelsFileError(f"{source}: the top level must be a mapping with a 'models' key, got {type(data).__name__}")
    for key in data:
        if key not in ("models", "version"):
            raise ModelsFileError(
                f"{source}: unknown top-level key {key!r}{did_you_mean(str(key), ['models', 'version'])}; "
                "the file has the form `models: {NAME: {provider: ..., model: ...}}`"
            )
    if data.get("version", 1) != 1:
        raise ModelsFileError(f"{source}: key 'version' is {data['version']!r}; this medrcube reads version 1")
    models = data.get("models") or {}
    if not isinstance(models, Mapping):
        raise ModelsFileError(f"{source}: key 'models' must map model names to entries, got {type(models).__name__}")
    out: dict[str, ModelEntry] = {}
    for name, raw in models.items():
        out[str(name)] = _parse_entry(str(name), raw, source)
    return out


def _parse_entry(name: str, raw: Any, source: str) -> ModelEntry:
    where = f"{source}: model {name!r}"
    if not _NAME.match(name):
        raise ModelsFileError(
            f"{where}: invalid name; use letters, digits and . _ - / (no ':' or '@', which spec strings use)"
        )
    if name in providers.names():
        raise ModelsFileError(f"{where}: the name is reserved for a built-in spec; choose another name")
    if not isinstance(raw, Mapping):
        raise ModelsFileError(f"{where}: the entry must be a mapping of keys ({', '.join(ENTRY_KEYS)})")
    _refuse_secrets(raw, where)
    for key in raw:
        if key not in ENTRY_KEYS:
            raise ModelsFileError(
                f"{where}: unknown key {key!r}{did_you_mean(str(key), ENTRY_KEYS)}; valid keys: {', '.join(ENTRY_KEYS)}"
            )

    provider = raw.get("provider")
    in_file = providers.file_names()
    if provider not in in_file:
        raise ModelsFileError(
            f"{where}: key 'provider' is {provider!r}{did_you_mean(str(provider), in_file)}; "
            f"choices: {', '.join(in_file)}"
        )
    for key in raw:
        needed = _only_for(str(key))
        if needed and provider not in needed:
            raise ModelsFileError(f"{where}: key {key!r} applies to provider {' or '.join(map(repr, needed))} only, "
                                  f"this entry is {provider!r}")

    model = raw.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ModelsFileError(f"{where}: key 'model' is required: the provider's model id (or, for hf, a local path)")

    if "base_url" in raw and "base_urls" in raw:
        raise ModelsFileError(f"{where}: give 'base_url' or 'base_urls', not both")
    base_urls: tuple[str, ...] = ()
    if "base_url" in raw:
        base_urls = (_url(raw["base_url"], f"{where}: key 'base_url'"),)
    elif "base_urls" in raw:
        urls = raw["base_urls"]
        if not isinstance(urls, list) or not urls:
            raise ModelsFileError(f"{where}: key 'base_urls' must be a non-empty list of URLs")
        base_urls = tuple(_url(u, f"{where}: key 'base_urls' item {i}") for i, u in enumerate(urls))
        if len(set(base_urls)) != len(base_urls):
            raise ModelsFileError(f"{where}: key 'base_urls' lists a URL twice")

    api_key_env = raw.get("api_key_env")
    if api_key_env is not None and (not isinstance(api_key_env, str) or not _ENV_NAME.match(api_key_env)):
        raise ModelsFileError(
            f"{where}: key 'api_key_env' must be the NAME of an environment variable (such as OPENAI_API_KEY), "
            "not the key itself"
        )

    params = raw.get("params") or {}
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise ModelsFileError(f"{where}: key 'params' must be a mapping of generation parameter names to values")
    check_params(params, where)

    identity = raw.get("endpoint_identity")
    if identity is not None and (not isinstance(identity, str) or not identity.strip() or credential_parts(identity)):
        raise ModelsFileError(
            f"{where}: key 'endpoint_identity' must be a label (such as 'site-llm-v3') naming the model the "
            "endpoints serve; entries with the same label share stored answers"
        )
    strict = raw.get("strict_model")
    if strict is not None and not isinstance(strict, bool):
        raise ModelsFileError(f"{where}: key 'strict_model' is {strict!r}; expected true or false")
    header = raw.get("api_key_header")
    if header is not None and (not isinstance(header, str) or not re.match(r"^[A-Za-z0-9\-]{1,64}$", header)):
        raise ModelsFileError(
            f"{where}: key 'api_key_header' must be an HTTP header name such as 'api-key' (the key itself comes "
            "from the variable api_key_env names)"
        )

    transport = raw.get("transport")
    if transport is not None and transport not in TRANSPORTS:
        raise ModelsFileError(f"{where}: key 'transport' is {transport!r}; choices: {', '.join(TRANSPORTS)}")

    dtype = raw.get("dtype")
    if dtype is not None and dtype not in DTYPES:
        raise ModelsFileError(f"{where}: key 'dtype' is {dtype!r}{did_you_mean(str(dtype), DTYPES)}; choices: {', '.join(DTYPES)}")
    device = raw.get("device")
    if device is not None and (not isinstance(device, str) or not re.match(r"^(auto|cpu|mps|cuda(:\d+)?)$", device)):
        raise ModelsFileError(f"{where}: key 'device' is {device!r}; choices: auto, cpu, mps, cuda, cuda:N")

    price = _price(raw.get("price"), where)
    engine, executable = None, raw.get("executable")
    if provider == "vllm":
        try:
            engine = engine_args(model.strip(), raw, where)
        except ValueError as e:
            raise ModelsFileError(str(e)) from None
        if executable is not None and (not isinstance(executable, str) or not executable.strip()):
            raise ModelsFileError(f"{where}: key 'executable' is {executable!r}; expected the path of the python of "
                                  "the environment vLLM is installed in (or of that environment)")

    return ModelEntry(
        name=name,
        provider=provider,
        model=model.strip(),
        source=source,
        base_urls=base_urls,
        api_key_env=api_key_env,
        params=MappingProxyType(dict(params)),
        concurrency=_number(raw, "concurrency", where, int, minimum=1),
        rpm=_number(raw, "rpm", where, float, minimum=0, exclusive=True),
        timeout=_number(raw, "timeout", where, float, minimum=0, exclusive=True),
        max_retries=_number(raw, "max_retries", where, int, minimum=0),
        image_max_side=_number(raw, "image_max_side", where, int, minimum=0),  # 0: no downscaling
        batch_size=_number(raw, "batch_size", where, int, minimum=1),
        dtype=dtype,
        device=device,
        price=price,
        endpoint_identity=identity.strip() if isinstance(identity, str) else None,
        strict_model=strict,
        max_response_mib=_number(raw, "max_response_mib", where, float, minimum=0, exclusive=True),
        api_key_header=header,
        breaker_failures=_number(raw, "breaker_failures", where, int, minimum=1),
        breaker_seconds=_number(raw, "breaker_seconds", where, float, minimum=0),
        retry_after_max=_number(raw, "retry_after_max", where, float, minimum=0),
        retry_wait_max=_number(raw, "retry_wait_max", where, float, minimum=0),
        transport=transport,
        engine=engine,
        executable=executable,
        start_timeout=_number(raw, "start_timeout", where, float, minimum=0, exclusive=True),
    )


def _price(value: Any, where: str) -> Mapping[str, Any] | None:
    """`price: {prompt: X, completion: Y, currency: USD}`, X and Y per million tokens."""
    if value is None:
        return None
    fix = "e.g. price: {prompt: 1.25, completion: 10.0, currency: USD} (per million tokens)"
    if not isinstance(value, Mapping) or set(value) - {"prompt", "completion", "currency"}:
        raise ModelsFileError(f"{where}: key 'price' must map prompt, completion (and currency) to numbers; {fix}")
    out: dict[str, Any] = {"currency": str(value.get("currency", "USD"))}
    for key in ("prompt", "completion"):
        v = value.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ModelsFileError(f"{where}: key 'price.{key}' is {v!r}; expected a number >= 0; {fix}")
        out[key] = float(v)
    return MappingProxyType(out)


def usage_cost(price: Mapping[str, Any], prompt_tokens: int, completion_tokens: int) -> float:
    """What tokens cost at a models.yaml `price` (per million tokens, in its currency)."""
    return (prompt_tokens * float(price["prompt"]) + completion_tokens * float(price["completion"])) / 1e6


def _url(value: Any, where: str) -> str:
    if not isinstance(value, str) or not re.match(r"^https?://\S+$", value):
        shown = redacted_url(value) if isinstance(value, str) else value
        raise ModelsFileError(f"{where} is {shown!r}; expected an http:// or https:// URL such as http://127.0.0.1:8000/v1")
    parts = credential_parts(value)
    if parts:
        raise ModelsFileError(refusal_hint(where, value, parts))
    return value.rstrip("/")


def redacted_url(url: str) -> str:
    """`url` with any credentials (`user:password@`, `?api-key=...`) cut (models/urls.py)."""
    return redact_urls(url)


Num = TypeVar("Num", int, float)  # what a numeric key is read as

_EXAMPLES = {"concurrency": "16", "rpm": "600", "timeout": "60", "max_retries": "6", "image_max_side": "1024",
             "batch_size": "8", "max_response_mib": "8"}


def _number(raw: Mapping[str, Any], key: str, where: str, kind: type[Num], *, minimum: float, exclusive: bool = False) -> Num | None:
    if raw.get(key) is None:
        return None
    value = raw[key]
    # bool is an int in Python; `concurrency: yes` is a mistake, not 1. NaN (`.nan`)
    # compares false with every bound, and `.inf` is no bound: both are refused here
    # rather than failing deep in a run.
    ok = isinstance(value, int) if kind is int else isinstance(value, (int, float))
    if (isinstance(value, bool) or not ok or not math.isfinite(value)
            or (value <= minimum if exclusive else value < minimum)):
        bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
        what = "an integer" if kind is int else "a finite number"
        raise ModelsFileError(f"{where}: key {key!r} is {value!r}; expected {what} {bound}, "
                              f"e.g. `{key}: {_EXAMPLES.get(key, '1')}` (or leave it out for the default)")
    past = beyond(key, value)
    if past is not None:
        raise ModelsFileError(f"{where}: key {key!r}: {past}; write a value within it, e.g. "
                              f"`{key}: {_EXAMPLES.get(key, '1')}` (or leave it out for the default)")
    return kind(value)


# Generation parameters that make no sense below zero (a penalty or a seed may be negative).
_NON_NEGATIVE_PARAMS = frozenset({
    "max_tokens", "max_completion_tokens", "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "n",
    "top_logprobs", "repetition_penalty", "num_beams",
})


def check_params(params: Mapping[str, Any], where: str, path: str = "params", *, top: bool = True) -> None:
    """No NaN or infinity anywhere in params (JSON cannot carry them: the request body
    would not be JSON), and no negative value where a parameter cannot be negative.
    Raises ModelsFileError naming `where`, the key under `path` and the fix; also used for
    the generation parameters a construction recipe gives its reviewer."""
    for k, v in params.items():
        here = f"{path}.{k}"
        if isinstance(v, Mapping):
            check_params(v, where, here, top=False)
            continue
        for i, x in enumerate(v if isinstance(v, list) else [v]):
            at = f"{here}[{i}]" if isinstance(v, list) else here
            if isinstance(x, Mapping):
                check_params(x, where, at, top=False)
            elif isinstance(x, float) and not math.isfinite(x):
                raise ModelsFileError(f"{where}: key {at!r} is {x!r}; expected a finite number (JSON has no NaN or "
                                      "infinity), or null to drop the parameter")
            elif (top and k in _NON_NEGATIVE_PARAMS and not isinstance(x, bool)
                  and isinstance(x, (int, float)) and x < 0):
                raise ModelsFileError(f"{where}: key {at!r} is {x!r}; expected a number >= 0, or null to drop it")
            elif top and not isinstance(x, bool) and isinstance(x, (int, float)) and (
                    past := beyond(k, x, PARAM_CEILINGS)) is not None:
                raise ModelsFileError(f"{where}: key {at!r}: {past}; write a value within it, or null to drop it")


def looks_like_secret(key: str, value: Any) -> bool:
    """True when `value` under `key` looks like a literal credential."""
    if not isinstance(value, str):
        return False
    v = value.strip()
    if _SECRET_VALUE.match(v):
        return True
    return bool(_SECRET_KEY.search(key)) and bool(_TOKEN_LIKE.match(v))


def _refuse_secrets(node: Any, where: str, path: str = "") -> None:
    """Refuse `api_key` and anything that looks like a credential, anywhere in an entry.

    The message never echoes the value: it may be a real key.
    """
    if isinstance(node, Mapping):
        for k, v in node.items():
            key = str(k)
            here = f"{path}.{key}" if path else key
            if re.sub(r"[^a-z]", "", key.lower()) == "apikey" or (key != "api_key_env" and looks_like_secret(key, v)):
                raise ModelsFileError(
                    f"{where}: key {here!r} holds a literal secret; keys come from environment variables, "
                    "never from models.yaml: remove it, export the key (e.g. `export MY_KEY=...`) and set "
                    "`api_key_env: MY_KEY` on the entry"
                )
            if key == "api_key_env" and looks_like_secret("key", v) and not _ENV_NAME.match(str(v)):
                raise ModelsFileError(
                    f"{where}: key 'api_key_env' must be the NAME of an environment variable, not the key itself"
                )
            _refuse_secrets(v, where, here)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if isinstance(v, str) and _SECRET_VALUE.match(v.strip()):
                raise ModelsFileError(
                    f"{where}: {path}[{i}] looks like a literal secret; keys come from environment variables: "
                    "set `api_key_env: VARIABLE_NAME` instead"
                )
            _refuse_secrets(v, where, f"{path}[{i}]")
