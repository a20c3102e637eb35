"""The scripted OpenAI-compatible server: answers, faults, counters, and its separate process.

Successes go through the real `openai` client; fault shapes are checked on the wire with
`http.client`, because the point is what bytes a client receives.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import socket
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest
from PIL import Image

from medrcube.testing.server import ScriptedServer, ScriptError, ServerProcess, question_of

KEY = "sk-test-MARKER-4b1d9e0f2a7c"


def prompt(question: str, options: tuple[str, ...] = ("lung", "heart", "brain")) -> str:
    letters = "ABCDEFGH"
    lines = "\n".join(f"{letters[i]}. {o}" for i, o in enumerate(options))
    return f"Question: {question}\nOptions:\n{lines}\nAnswer with the option's letter from the given choices directly."


def chat_body(text: str, model: str = "scripted", image: bytes | None = None, **params: Any) -> dict[str, Any]:
    content: Any = text
    if image is not None:
        url = "data:image/png;base64," + base64.b64encode(image).decode()
        content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    return {"model": model, "messages": [{"role": "user", "content": content}], **params}


def post(server: ScriptedServer, body: Mapping[str, Any] | bytes, *, auth: bool = True,
         timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """One POST on a fresh connection; returns status, headers (lower-case) and body."""
    u = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = f"Bearer {KEY}"
    try:
        conn.request("POST", "/v1/chat/completions", body=raw, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def png(w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (w, h), 128).save(buf, format="PNG")
    return buf.getvalue()


def client(server: ScriptedServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10)


# ---------------------------------------------------------------------------- answers


def test_answers_by_question_substring_default_and_callable(scripted_server_factory):
    srv = scripted_server_factory(
        {"answers": {"Which organ is shown?": "B", "lesion": "The answer is C."}, "default": "D"},
        reply=lambda p, body: "E" if "callable" in p else None,
    )
    c = client(srv)

    def ask(text: str) -> str | None:
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
        return r.choices[0].message.content

    assert ask(prompt("Which organ is shown?")) == "B"  # exact question
    assert ask(prompt("Is there a lesion in the left lobe?")) == "The answer is C."  # substring
    assert ask(prompt("Something else")) == "D"  # default
    assert ask(prompt("Ask the callable")) == "E"  # in-process callable wins
    c.close()


def test_answer_key_follows_rotated_options(scripted_server):
    scripted_server.set_script({"answer_key": {"Which organ?": "heart", "Index one": 1},
                                "reply_format": "Answer: {letter}"})
    c = client(scripted_server)
    for options, want in ((("lung", "heart", "brain"), "B"), (("brain", "lung", "heart"), "C")):
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt("Which organ?", options)}])
        assert r.choices[0].message.content == f"Answer: {want}"
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt("Index one")}])
    assert r.choices[0].message.content == "Answer: B"
    c.close()


def test_models_endpoint_and_unknown_model(scripted_server):
    scripted_server.set_script({"models": ["vision-1", "vision-2"]})
    c = client(scripted_server)
    assert [m.id for m in c.models.list().data] == ["vision-1", "vision-2"]
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    ok = c.chat.completions.create(model="vision-2", messages=[{"role": "user", "content": "hi"}])
    assert ok.choices[0].message.content == "A" and ok.usage.total_tokens > 0
    c.close()
    assert scripted_server.stats()["other"] == {"GET /v1/models": 1}


def test_question_of_reads_the_reference_wording():
    assert question_of(prompt("What view?")) == "What view?"
    assert question_of("  free text  ") == "free text"


# ---------------------------------------------------------------------------- recording


def test_stats_record_model_image_auth_params_and_never_the_key(scripted_server):
    status, _, _ = post(scripted_server, chat_body(prompt("q1"), model="m1", image=png(300, 200), temperature=0.0))
    assert status == 200
    status, _, _ = post(scripted_server, chat_body(prompt("q2"), model="m2"), auth=False)
    assert status == 200
    s = scripted_server.stats()
    assert s["total"] == 2 and s["by_status"] == {"200": 2}
    assert s["models"] == {"m1": 1, "m2": 1}
    assert s["auth"] == {"present": 1, "absent": 1}
    assert s["images"] == {"with": 1, "without": 1, "total": 1}
    first = s["requests"][0]
    assert first["images"][0]["mime"] == "image/png"
    assert (first["images"][0]["width"], first["images"][0]["height"]) == (300, 200)
    assert first["params"] == {"model": "m1", "temperature": 0.0}
    assert first["question"] == "q1" and first["outcome"] == "200"
    assert first["t_end"] >= first["t_start"]
    assert KEY not in json.dumps(s)
    assert "Bearer" not in json.dumps(s)


def test_require_auth_rejects_a_missing_header(scripted_server):
    scripted_server.set_script({"require_auth": True})
    assert post(scripted_server, chat_body("hi"), auth=False)[0] == 401
    assert post(scripted_server, chat_body("hi"), auth=True)[0] == 200


def test_duplicates_and_by_request_counts(scripted_server):
    for _ in range(3):
        post(scripted_server, chat_body(prompt("same")))
    post(scripted_server, chat_body(prompt("other")))
    post(scripted_server, chat_body(prompt("same"), image=png(8, 8)))  # another request: it has an image
    s = scripted_server.stats()
    assert s["duplicates"] == 2
    assert sorted(s["by_request"].values()) == [1, 1, 3]
    assert s["by_question"] == {"same": 4, "other": 1}
    scripted_server.reset_stats()
    assert scripted_server.stats()["total"] == 0 and scripted_server.stats()["duplicates"] == 0


def test_bad_bodies_are_400(scripted_server):
    assert post(scripted_server, b"{not json")[0] == 400
    assert post(scripted_server, {"model": "m"})[0] == 400  # no messages
    assert post(scripted_server, chat_body("hi", stream=True))[0] == 400
    assert scripted_server.stats()["by_status"] == {"400": 3}


# ---------------------------------------------------------------------------- faults


def test_status_faults_with_retry_after_and_first_n(scripted_server):
    scripted_server.set_script({"faults": [
        {"fault": "status", "status": 429, "retry_after": 2, "match": "q-limited", "first": 2},
        {"fault": "status", "status": 429, "retry_after_ms": 150, "match": "q-ms", "first": 1},
        {"fault": "status", "status": 503, "match": "q-down", "after": 1, "first": 1,
         "message": "overloaded", "code": "busy"},
    ]})
    got = [post(scripted_server, chat_body(prompt("q-limited"))) for _ in range(3)]
    assert [g[0] for g in got] == [429, 429, 200]
    assert got[0][1]["retry-after"] == "2"
    assert json.loads(got[0][2])["error"]["type"] == "rate_limit_error"
    status, headers, _ = post(scripted_server, chat_body(prompt("q-ms")))
    assert status == 429 and headers["retry-after-ms"] == "150" and "retry-after" not in headers
    down = [post(scripted_server, chat_body(prompt("q-down"))) for _ in range(3)]
    assert [d[0] for d in down] == [200, 503, 200]
    assert json.loads(down[1][2])["error"] == {"message": "overloaded", "type": "server_error", "param": None, "code": "busy"}
    s = scripted_server.stats()
    assert s["by_fault"] == {"status:429": 3, "status:503": 1}
    assert s["by_status"] == {"429": 3, "200": 3, "503": 1}


def test_per_prompt_counts_each_request_separately(scripted_server):
    scripted_server.set_script({"faults": [{"fault": "status", "status": 500, "first": 1, "per_prompt": True}]})
    statuses = [post(scripted_server, chat_body(prompt(q)))[0] for q in ("a", "b", "a", "b", "c")]
    assert statuses == [500, 500, 200, 200, 500]


def test_fraction_is_seeded_and_reproducible(scripted_server_factory):
    script = {"seed": 7, "faults": [{"fault": "status", "status": 502, "fraction": 0.5}]}
    runs = []
    for _ in range(2):
        srv = scripted_server_factory(script)
        runs.append([post(srv, chat_body(prompt(str(i))))[0] for i in range(40)])
    assert runs[0] == runs[1]
    assert 5 < runs[0].count(502) < 35  # a fraction, neither none nor all


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        ("malformed", lambda obj: obj is None),
        ("truncated", lambda obj: obj is None),
        ("empty_choices", lambda obj: obj["choices"] == []),
        ("content_filter", lambda obj: obj["choices"][0]["finish_reason"] == "content_filter"),
        ("refusal", lambda obj: obj["choices"][0]["message"]["refusal"] and obj["choices"][0]["message"]["content"] is None),
    ],
)
def test_body_faults(scripted_server, fault, check):
    scripted_server.set_script({"faults": [{"fault": fault}]})
    status, headers, body = post(scripted_server, chat_body("hi"))
    assert status == 200
    assert int(headers["content-length"]) == len(body)  # consistent framing: the body itself is bad
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    assert check(obj)
    assert scripted_server.stats()["by_outcome"] == {fault: 1}


@pytest.mark.parametrize("fault", ["drop", "reset"])
def test_connection_faults(scripted_server, fault):
    scripted_server.set_script({"faults": [{"fault": fault, "first": 1}]})
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        post(scripted_server, chat_body("hi"))
    assert post(scripted_server, chat_body("hi"))[0] == 200  # the next connection is served
    assert scripted_server.stats()["by_outcome"] == {fault: 1, "200": 1}


def test_hang_outlasts_the_client_timeout(scripted_server):
    # a hang far beyond the client's 0.3 s (released when the server stops): a loaded
    # machine cannot let the answer arrive first
    scripted_server.set_script({"faults": [{"fault": "hang", "seconds": 60, "first": 1}]})
    with pytest.raises(socket.timeout):
        post(scripted_server, chat_body("hi"), timeout=0.3)
    assert post(scripted_server, chat_body("hi"))[0] == 200
    assert scripted_server.stats()["by_fault"] == {"hang": 1}


def test_stop_releases_hung_requests():
    srv = ScriptedServer({"faults": [{"fault": "hang"}]}).start()  # default hang: an hour
    errors: list[BaseException] = []

    def call() -> None:
        try:
            post(srv, chat_body("hi"), timeout=30)
        except BaseException as exc:  # noqa: BLE001 (recorded for the assertion)
            errors.append(exc)

    t = threading.Thread(target=call)
    t.start()
    while srv.stats()["in_flight"] == 0:
        threading.Event().wait(0.01)
    srv.stop()
    t.join(timeout=60)  # a bound on a hang: the stop ends the connection at once
    assert not t.is_alive() and errors  # the client saw its connection end


def test_in_process_restart_keeps_the_port_and_the_counts(scripted_server):
    url = scripted_server.base_url
    assert post(scripted_server, chat_body("hi"))[0] == 200
    scripted_server.restart()
    assert scripted_server.base_url == url
    assert post(scripted_server, chat_body("hi"))[0] == 200
    assert scripted_server.stats()["total"] == 2


# ---------------------------------------------------------------------------- concurrency


def test_sixty_four_requests_are_served_at_once(scripted_server):
    """64 clients each hold a request open: all are in flight together. The latency is long
    enough (1.5 s) for 64 threads to connect on a loaded 2-core machine; at 200 ms the
    last connections sometimes came after the first answers, and the test measured the
    machine's load rather than the server."""
    scripted_server.set_script({"latency": 1.5})
    barrier = threading.Barrier(64)
    statuses: list[int] = []

    def call() -> None:
        barrier.wait()
        statuses.append(post(scripted_server, chat_body("hi"))[0])

    threads = [threading.Thread(target=call) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 64
    s = scripted_server.stats()
    assert s["max_in_flight"] == 64
    assert s["in_flight"] == 0


def test_keep_alive_reuses_one_connection(scripted_server):
    u = urlsplit(scripted_server.base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    for _ in range(3):
        conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body("hi")))
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["choices"][0]["message"]["content"] == "A"
    local = conn.sock.getsockname()
    conn.close()
    assert local is not None and scripted_server.stats()["total"] == 3


# ---------------------------------------------------------------------------- script errors


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ({"answer": {}}, ["unknown keys", "answer"]),
        ({"faults": [{"fault": "explode"}]}, ["faults[0].fault", "status"]),
        ({"faults": [{"fault": "status"}]}, ["faults[0]", "status"]),
        ({"faults": [{"fault": "status", "status": 429, "fraction": 2}]}, ["fraction"]),
        ({"latency": {"uniform": [3, 1]}}, ["latency"]),
        ({"default": 3}, ["default"]),
    ],
)
def test_script_errors_name_the_key(script, words):
    with pytest.raises(ScriptError) as err:
        ScriptedServer(script)
    for w in words:
        assert w in str(err.value)


# ---------------------------------------------------------------------------- separate process


def test_separate_process_counts_over_http_and_restarts_on_the_same_port(scripted_server_process):
    proc = scripted_server_process({"answers": {"q": "C"}})
    assert proc.base_url.startswith("http://127.0.0.1:") and proc.base_url.endswith("/v1")
    c = openai.OpenAI(base_url=proc.base_url, api_key=KEY, max_retries=0, timeout=10)
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt("q")}])
    assert r.choices[0].message.content == "C"
    s = proc.stats()
    assert s["total"] == 1 and s["auth"]["present"] == 1 and KEY not in json.dumps(s)
    proc.reset_stats()
    assert proc.stats(log=False)["total"] == 0
    old_url, old_pid = proc.base_url, proc.pid
    proc.restart()
    assert proc.base_url == old_url and proc.pid != old_pid
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt("q")}])
    assert r.choices[0].message.content == "C"
    assert proc.stats()["total"] == 1
    c.close()


def test_separate_process_rejects_a_bad_script(tmp_path):
    with pytest.raises(ScriptError):
        ServerProcess({"faults": [{"fault": "nope"}]})
    bad = tmp_path / "s.json"
    bad.write_text('{"latency": "slow"}')
    from medrcube.testing.server import serve_main

    assert serve_main(["--script", str(bad)]) == 2
