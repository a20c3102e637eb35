"""The adapter contract (models/base.py), one suite for every API adapter.

The OpenAI adapter (through its light client and through the real `openai` SDK), the
Anthropic and the Gemini adapters (their real SDKs) run against the scripted
server on 127.0.0.1, which speaks each wire format (medrcube/testing/server/wires.py):
the same scripted faults must come back as the same Responses in the contract's terms
(text, usage keys, served model, truncated, refused, error kinds, attempts), and the
numbers asserted (requests, images, auth headers) are counted by the server.
"""

from __future__ import annotations

import asyncio
import io
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from PIL import Image, PngImagePlugin

from medrcube.models import providers
from medrcube.models.anthropic_adapter import AnthropicAdapter
from medrcube.models.base import ErrorKind, ImageInput, ModelAdapter, Preflight, Request, Response
from medrcube.models.gemini_adapter import GeminiAdapter
from medrcube.models.models_file import ModelSpecError
from medrcube.models.openai_adapter import OpenAIAdapter
from medrcube.models.registry import load_adapter
from medrcube.service import EndpointError, preflight
from medrcube.testing.server import ScriptedServer
from medrcube.testing.server.faults import OPENAI as OPENAI_WIRE
from medrcube.testing.server.wires import ANTHROPIC, GEMINI

KEY_ENV = "MEDRCUBE_TEST_CONTRACT_KEY"
KEY = "sk-ant-MARKER-2b7e9d04c1f35a68"
QUESTION = "Which organ is shown?"
PROMPT = f"Question: {QUESTION}\nOptions:\nA. lung\nB. heart\nC. brain\nAnswer with the option's letter."
# Every HTTP API provider the registry holds runs this suite (a new one adds its wire to
# the scripted server: test_every_api_provider_speaks_a_wire_of_the_scripted_server).
API = tuple(p for p in providers.registered() if p.api is not None)
PROVIDERS = tuple(p.name for p in API)
CLASSES: dict[str, type[OpenAIAdapter]] = {p.name: p.api.adapter_class() for p in API if p.api is not None}
TRANSPORTS = tuple(f"{p.name}/sdk" for p in API if p.api is not None and p.api.transport)


def test_every_api_provider_speaks_a_wire_of_the_scripted_server() -> None:
    spoken = {wire.name for wire in (OPENAI_WIRE, ANTHROPIC, GEMINI)}
    assert set(PROVIDERS) <= spoken, f"no wire in testing/server for {sorted(set(PROVIDERS) - spoken)}"
    assert {CLASSES["openai"], CLASSES["anthropic"], CLASSES["gemini"]} == {OpenAIAdapter, AnthropicAdapter,
                                                                            GeminiAdapter}


def base_url(server: ScriptedServer, provider: str) -> str:
    """Where each SDK is pointed: OpenAI's base URL ends in /v1, the native ones are the host."""
    return server.base_url if provider == "openai" else server.base_url.removesuffix("/v1")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer({"default": "B"}) as srv:
        yield srv


@pytest.fixture(params=sorted((*PROVIDERS, *TRANSPORTS)))
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each provider; "openai" through both of its transports (the light client, its default
    for a base URL, and the `openai` SDK, `transport: sdk`)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    name, _, transport = str(request.param).partition("/")
    if transport:
        monkeypatch.setattr(OpenAIAdapter, "default_transport", transport)
    return name


@pytest.fixture
def make(server: ScriptedServer, provider: str) -> Callable[..., OpenAIAdapter]:
    def build(model: str = "m1", url: str | None = None, **kw: Any) -> OpenAIAdapter:
        kw = {"api_key_env": KEY_ENV, "backoff_base": 0.01, "max_retries": 3, "timeout": 10.0, **kw}
        return CLASSES[provider](model, base_url=url or base_url(server, provider), **kw)

    return build


def ask(adapter: ModelAdapter, *images: bytes, prompt: str = PROMPT) -> Response:
    inputs = tuple(ImageInput(f"{i:064d}", (lambda b=b: b)) for i, b in enumerate(images))

    async def go() -> list[Response]:
        try:
            return await adapter.generate([Request(key="k", item_id="item-1", prompt=prompt, images=inputs)])
        finally:
            await adapter.aclose()

    [response] = asyncio.run(go())
    return response


def pre(adapter: ModelAdapter) -> Preflight:
    async def go() -> Preflight:
        try:
            return await adapter.preflight()
        finally:
            await adapter.aclose()

    return asyncio.run(go())


def png(width: int, height: int) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("PatientName", "DOE^JANE")  # must never reach the model
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (40, 80, 120)).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------- answers


def test_every_adapter_meets_the_protocol(make: Callable[..., OpenAIAdapter], provider: str) -> None:
    adapter = make()
    assert isinstance(adapter, ModelAdapter)
    assert adapter.model == "m1" and adapter.keyed_by_item is False and adapter.price is None
    assert adapter.fingerprint.startswith(f"{provider}:m1:")
    assert len(adapter.endpoints) == 1 and adapter.endpoints[0].startswith("http://127.0.0.1:")


def test_an_answer_comes_back_in_the_contracts_terms(server: ScriptedServer, make: Callable[..., OpenAIAdapter],
                                                      provider: str) -> None:
    r = ask(make())
    assert r.ok and r.text == "B" and r.attempts == 1
    assert not r.truncated and not r.refused and not r.auth_failed
    assert r.served_model == "m1"
    # The server counts the prompt's words as its tokens and the reply's as the completion's.
    assert r.usage is not None
    assert r.usage["prompt_tokens"] == len(PROMPT.split()) and r.usage["completion_tokens"] == 1
    stats = server.stats()
    assert stats["total"] == 1 and stats["models"] == {"m1": 1}
    assert stats["auth"] == {"present": 1, "absent": 0}  # the key went in the provider's own header


def test_images_go_downscaled_and_with_pixels_only(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    r = ask(make(image_max_side=512), png(2000, 1000))
    assert r.ok
    [entry] = server.stats()["requests"]
    [image] = entry["images"]
    assert (image["mime"], image["format"], image["width"], image["height"]) == ("image/png", "PNG", 512, 256)
    assert "error" not in image
    assert server.stats()["images"]["total"] == 1


def test_an_answer_cut_at_the_token_limit_is_truncated(server: ScriptedServer,
                                                        make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "length", "text": "The answer is"}]})
    r = ask(make())
    assert r.ok and r.truncated and r.text == "The answer is" and not r.refused


def test_a_filtered_answer_is_a_refusal(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "refusal", "text": "I cannot read medical images."}]})
    r = ask(make())
    assert r.ok and r.refused and r.text == "I cannot read medical images." and not r.truncated


def test_an_answer_from_another_model_is_counted_or_refused(server: ScriptedServer,
                                                             make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "served_model", "model": "cheaper-model"}]})
    lenient = make()
    r = ask(lenient)
    assert r.ok and r.served_model == "cheaper-model" and lenient.served_models == {"cheaper-model": 1}
    r = ask(make(strict_model=True))
    assert r.error_kind is ErrorKind.MODEL_MISMATCH and "cheaper-model" in (r.error or "")


def test_an_echoed_key_is_cut_from_the_answer(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "key_echo"}]})
    r = ask(make())
    assert r.ok and KEY not in (r.text or "") and "[redacted]" in (r.text or "")


# ---------------------------------------------------------------------------- errors


def test_a_refused_key_is_an_auth_failure_never_retried(server: ScriptedServer,
                                                         make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "status", "status": 401, "message": f"invalid key {KEY}"}]})
    r = ask(make())
    assert r.error_kind is ErrorKind.AUTH and r.auth_failed and r.attempts == 1
    assert KEY_ENV in (r.error or "") and KEY not in (r.error or "")
    assert server.stats()["total"] == 1


def test_a_bad_request_fails_at_once_quoting_the_provider(server: ScriptedServer,
                                                           make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "status", "status": 400, "message": "temperature is not supported"}]})
    r = ask(make())
    assert r.error_kind is ErrorKind.BAD_REQUEST and r.attempts == 1
    assert "temperature is not supported" in (r.error or "")
    assert server.stats()["total"] == 1


def test_an_unknown_model_is_named(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "models": ["m2"]})
    r = ask(make("m1"))
    assert r.error_kind is ErrorKind.BAD_REQUEST and "model not found" in (r.error or "") and "'m1'" in (r.error or "")


def test_rate_limits_and_outages_are_retried_as_the_server_asks(server: ScriptedServer,
                                                                 make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "status", "status": 429, "retry_after": 0, "first": 2},
                                  {"fault": "status", "status": 503, "first": 1}]})
    r = ask(make())
    assert r.ok and r.text == "B" and r.attempts == 4
    assert server.stats()["by_outcome"] == {"429": 2, "503": 1, "200": 1}


def test_retries_end_with_the_history_of_attempts(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "status", "status": 503}]})
    r = ask(make(max_retries=2))
    assert r.error_kind is ErrorKind.SERVER and r.attempts == 3
    assert "gave up after 3 attempts: 503 x3" in (r.error or "")
    assert server.stats()["total"] == 3


def test_a_body_that_is_not_an_answer_is_malformed_and_retried(server: ScriptedServer,
                                                                make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "malformed", "first": 1}, {"fault": "empty_choices", "first": 1}]})
    r = ask(make())
    assert r.ok and r.text == "B" and r.attempts == 3
    r = ask(make(max_retries=0))
    assert r.ok  # the rules above have fired: the third request is answered
    server.set_script({"default": "B", "faults": [{"fault": "malformed"}]})
    r = ask(make(max_retries=1))
    assert r.error_kind is ErrorKind.MALFORMED and r.attempts == 2


@pytest.mark.parametrize(("fault", "said"), [("duplicate_key", "'content' appears twice"),
                                           ("non_finite", "NaN is not a JSON number")])
def test_a_body_json_does_not_allow_is_malformed_never_read(server: ScriptedServer, make: Callable[..., OpenAIAdapter],
                                                            fault: str, said: str) -> None:
    # A lenient reader would take the last "content" or skip the NaN and grade the reply;
    # every adapter refuses the body (retried as any malformed one) and records why.
    server.set_script({"default": "B", "faults": [{"fault": fault, "text": "A"}]})
    r = ask(make(max_retries=1))
    assert not r.ok and r.text is None and r.error_kind is ErrorKind.MALFORMED
    assert said in (r.error or "") and r.attempts == 2 and server.stats()["total"] == 2


def test_a_silent_server_times_out(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "hang", "seconds": 60}]})  # released when the server stops
    r = ask(make(timeout=0.5, max_retries=0))
    assert r.error_kind is ErrorKind.TIMEOUT and "0.5s" in (r.error or "")


def test_nothing_listening_is_a_connection_error_and_a_preflight_problem(
        make: Callable[..., OpenAIAdapter], provider: str) -> None:
    url = f"http://127.0.0.1:{closed_port()}" + ("/v1" if provider == "openai" else "")
    r = ask(make(url=url, max_retries=0))
    assert r.error_kind is ErrorKind.CONNECTION and "127.0.0.1" in (r.error or "")
    p = pre(make(url=url))
    assert p.problem is not None and "cannot be reached" in p.problem and url in p.problem


# ---------------------------------------------------------------------------- pre-flight


def test_the_preflight_names_the_served_model(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "models": ["m1", "m2", "m4-2025-01-01"]})
    assert pre(make("m1")) == Preflight(served="m1")
    assert pre(make("m4")) == Preflight(served="m4-2025-01-01", resolved=True)  # a dated snapshot of the name
    problem = pre(make("m3")).problem
    assert problem is not None and "does not serve the model 'm3'" in problem and "'m1', 'm2'" in problem
    server.set_script({"default": "B"})  # a server that lists nothing: nothing to compare
    assert pre(make("m3")) == Preflight()
    assert server.stats()["total"] == 0  # never a generation request


@pytest.mark.parametrize(("listed", "asked"), [("./my-vlm", "my-vlm"), ("My-VLM", "my-vlm"),
                                              ("llava:latest", "llava"), ("/models/qwen-vl", "qwen-vl")])
def test_a_name_listed_in_another_spelling_is_asked_as_listed(server: ScriptedServer, make: Callable[..., OpenAIAdapter],
                                                              provider: str, listed: str, asked: str) -> None:
    # A server pinned to its one model refuses every other spelling (transformers serve:
    # 400 "Server is pinned to './my-vlm'"): the adapter asks under the listed name.
    if provider == "gemini" and "/" in listed:
        pytest.skip("a Gemini model name is never a path (it goes in the URL's path)")
    server.set_script({"default": "B", "models": [listed, "other-model"], "pinned": 400})
    adapter = make(asked)
    fingerprint = adapter.fingerprint
    assert pre(adapter) == Preflight(served=listed, resolved=True)
    r = ask(adapter)
    assert r.ok and r.text == "B" and adapter.model == listed
    assert adapter.fingerprint == fingerprint  # the store's keys stay the spec's
    assert dict(server.stats()["models"]) == {listed: 1}  # one request, under the listed name


def test_a_name_two_listed_models_could_be_is_refused_before_any_request(
        server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "models": ["./my-vlm", "/srv/my-vlm", "m1"], "pinned": 400})
    problem = pre(make("my-vlm")).problem
    assert problem is not None and "several models that could be 'my-vlm'" in problem
    assert "'./my-vlm', '/srv/my-vlm'" in problem
    server.set_script({"default": "B", "models": ["./my-vlm"], "pinned": 400})
    problem = pre(make("my-vln")).problem  # a typo: refused, with the near name
    assert problem is not None and "did you mean './my-vlm'?" in problem
    assert server.stats()["total"] == 0


def test_the_preflight_stops_a_run_whose_key_is_refused(server: ScriptedServer,
                                                         make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "models_status": 401})
    p = pre(make())
    assert p.problem is not None and "refused the key" in p.problem and KEY_ENV in p.problem
    with pytest.raises(EndpointError, match="refused the key"):
        preflight([make()])
    server.set_script({"default": "B", "models_status": 404})  # no listing route: the run goes on, nothing said
    assert preflight([make()]) == {}
    server.set_script({"default": "B", "models": ["m1"]})
    assert preflight([make(spec="candidate")]) == {"candidate": "m1"}


# ---------------------------------------------------------------------------- specs and identity


def test_specs_name_the_native_adapters(server: ScriptedServer, provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url = base_url(server, provider)
    adapter = load_adapter(f"{provider}:m1@{url}")
    assert type(adapter) is CLASSES[provider] and adapter.spec == f"{provider}:m1@{url}"
    assert ask(adapter).text == "B"
    declared = providers.provider_of(provider)
    assert declared is not None and declared.api is not None
    missing = replace(declared, api=replace(declared.api, sdk="medrcube_no_such_sdk", package=f"medrcube[{provider}]"))
    monkeypatch.setitem(providers._REGISTRY._filled(), provider, missing)
    with pytest.raises(ModelSpecError, match=rf"pip install 'medrcube\[{provider}\]'"):
        load_adapter(f"{provider}:m1@{url}")


def test_the_endpoint_and_the_provider_are_in_the_fingerprint(make: Callable[..., OpenAIAdapter],
                                                               provider: str) -> None:
    here, there = make(), make(url="http://127.0.0.1:9/v1")
    assert here.fingerprint != there.fingerprint
    others = {CLASSES[p]("m1", base_url=here.base_url, api_key_env=KEY_ENV).fingerprint for p in PROVIDERS}
    assert len(others) == len(PROVIDERS)


def test_a_models_yaml_entry_builds_a_native_adapter_with_its_price(tmp_path: Any, server: ScriptedServer,
                                                                    provider: str) -> None:
    f = tmp_path / "models.yaml"
    f.write_text(f"models:\n  site-model:\n    provider: {provider}\n    model: m1\n"
                 f"    base_url: {base_url(server, provider)}\n    api_key_env: {KEY_ENV}\n"
                 "    price: {prompt: 3.0, completion: 15.0, currency: USD}\n", encoding="utf-8")
    adapter = load_adapter("site-model", models_file=f)
    assert type(adapter) is CLASSES[provider] and adapter.spec == "site-model"
    assert adapter.price == {"prompt": 3.0, "completion": 15.0, "currency": "USD"}


def test_a_missing_key_variable_is_a_spec_error(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CLASSES[provider].default_key_env, raising=False)
    monkeypatch.delenv(CLASSES[provider].base_url_env, raising=False)
    with pytest.raises(ModelSpecError, match=CLASSES[provider].default_key_env):
        load_adapter(f"{provider}:m1")


def test_gemini_refuses_parameters_it_does_not_know(server: ScriptedServer) -> None:
    url = base_url(server, "gemini")
    with pytest.raises(ValueError, match="GenerateContentConfig"):
        GeminiAdapter("m1", base_url=url, params={"max_completion_tokens": 10})
    assert GeminiAdapter("m1", base_url=url, params={"max_output_tokens": 10, "temperature": 0}).params


# ---------------------------------------------------------------------------- hostile endpoints


def test_a_redirect_is_never_followed(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "redirect", "location": "http://127.0.0.1:9/elsewhere"}]})
    r = ask(make())
    assert r.error_kind is ErrorKind.REDIRECT and "http://127.0.0.1:9/elsewhere" in (r.error or "")
    assert r.attempts == 1 and server.stats()["total"] == 1


def test_a_body_that_inflates_past_the_cap_is_refused_unread(server: ScriptedServer,
                                                              make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "gzip_bomb", "inflated_mib": 4}]})
    r = ask(make(max_response_bytes=1024 * 1024))
    assert r.error_kind is ErrorKind.MALFORMED and "past the cap" in (r.error or "") and r.attempts == 1


def test_a_dripped_body_ends_at_the_total_deadline(server: ScriptedServer, make: Callable[..., OpenAIAdapter]) -> None:
    server.set_script({"default": "B", "faults": [{"fault": "drip", "interval": 0.2}]})
    r = ask(make(timeout=1.0, max_retries=0))
    assert r.error_kind is ErrorKind.TIMEOUT


def test_the_native_adapters_send_a_token_limit(server: ScriptedServer) -> None:
    # Anthropic requires max_tokens; Gemini's thinking models spend from max_output_tokens.
    for adapter in (AnthropicAdapter("m1", base_url=base_url(server, "anthropic")),
                    GeminiAdapter("m1", base_url=base_url(server, "gemini"), params={"temperature": 0})):
        assert ask(adapter).ok
    anthropic, gemini = (r["params"] for r in server.stats()["requests"])
    assert anthropic["max_tokens"] == 1024
    assert gemini["generationConfig"] == {"maxOutputTokens": 4096, "temperature": 0}
    dropped = GeminiAdapter("m1", base_url=base_url(server, "gemini"), params={"max_output_tokens": None})
    assert "max_output_tokens" not in dropped.params


def test_replicas_are_one_adapter_whose_preflight_checks_every_server(tmp_path: Any, server: ScriptedServer,
                                                                      provider: str) -> None:
    from medrcube.models.registry import RoundRobinAdapter
    from medrcube.service import endpoint_of

    server.set_script({"default": "B", "models": ["m1"]})
    live = base_url(server, provider)
    dead = f"http://127.0.0.1:{closed_port()}" + ("/v1" if provider == "openai" else "")
    f = tmp_path / "models.yaml"
    f.write_text(f"models:\n  replicas:\n    provider: {provider}\n    model: m1\n    api_key_env: {KEY_ENV}\n"
                 f"    base_urls: ['{live}', '{dead}']\n", encoding="utf-8")
    adapter = load_adapter("replicas", models_file=f)
    assert isinstance(adapter, RoundRobinAdapter) and adapter.endpoints == (live, dead)
    assert endpoint_of(adapter) == f"{live} | {dead}" and adapter.model == "m1"
    p = pre(adapter)
    assert p.served == "m1" and p.problem is not None and dead in p.problem
    assert p.problem.count("cannot be reached") == 1  # the live server is not among the problems


@pytest.mark.parametrize("provider_logprobs", [
    ("openai", {"logprobs": True, "top_logprobs": 3}),
    ("gemini", {"response_logprobs": True, "logprobs": 3}),
])
def test_per_option_confidence_comes_from_the_providers_logprobs(
        server: ScriptedServer, provider_logprobs: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    # Anthropic's API gives no log-probabilities: its responses carry no confidence (None).
    provider, params = provider_logprobs
    monkeypatch.setenv(KEY_ENV, KEY)
    server.set_script({"default": "B", "logprobs": {QUESTION: {"A": 0.2, "B": 0.7, "C": 0.1}}})
    adapter = CLASSES[provider]("m1", base_url=base_url(server, provider), api_key_env=KEY_ENV, params=params)

    async def go() -> Response:
        try:
            [r] = await adapter.generate([Request(key="k", item_id="i", prompt=PROMPT,
                                                  options=("lung", "heart", "brain"))])
            return r
        finally:
            await adapter.aclose()

    r = asyncio.run(go())
    assert r.ok and r.confidence is not None and r.confidence.source == "logprobs"
    assert r.confidence.for_choice(1)["value"] == pytest.approx(0.7)
    assert r.confidence.for_choice(1)["probs"] == pytest.approx([0.2, 0.7, 0.1])
    assert ask(AnthropicAdapter("m1", base_url=base_url(server, "anthropic"), api_key_env=KEY_ENV)).confidence is None


def test_a_list_cut_at_its_bound_never_calls_a_model_missing() -> None:
    from medrcube.models.listing import LISTED_MAX, preflight_by_listing

    async def listing(n: int) -> Preflight:
        async def ids() -> list[str]:
            return [f"other-{i}" for i in range(n)]

        return await preflight_by_listing("spec", "http://127.0.0.1:9", "m1", "BASE_URL_ENV", ids,
                                          lambda exc: (_ for _ in ()).throw(exc))

    assert asyncio.run(listing(LISTED_MAX)) == Preflight()  # maybe on a page not read
    problem = asyncio.run(listing(3)).problem
    assert problem is not None and "does not serve the model 'm1'" in problem
