"""A local OpenAI-compatible chat server whose answers, latency and faults are scripted.

It serves `POST /v1/chat/completions` and `GET /v1/models` on 127.0.0.1 so that tests
and benchmarks drive the real `openai` client end to end, plus three control endpoints:
`GET /_stats` (the counters below, as JSON; `?log=0` leaves out the per-request log),
`POST /_reset` (zero the counters and the fault rules' counts) and `POST /_script`
(replace the script with the JSON body).

It speaks two more wire formats with the same script and fault rules (wires.py):
Anthropic's Messages API (`POST /v1/messages`, key in `x-api-key` or a bearer token,
`GET /v1/models`) and Gemini's (`POST /v1beta/models/NAME:generateContent`, key in
`x-goog-api-key`, `GET /v1beta/models`); point those SDKs at the URL without `/v1`.
A finish of "length" is their max_tokens / MAX_TOKENS, "content_filter" and "refusal"
their refusal / SAFETY.

In-process::

    with ScriptedServer({"answers": {"Which organ?": "B"}, "latency": 0.2}) as srv:
        client = AsyncOpenAI(base_url=srv.base_url, api_key="x")   # base_url ends in /v1
        ...
        srv.stats()["total"]

As a separate process (for SIGKILL and restart tests; the first stdout line is the base
URL, then it serves until killed)::

    python -m medrcube.testing.server --script script.json [--port 0] [--host 127.0.0.1]

The script (a JSON object; every key optional)::

    {
      "default": "A",                  # the reply when nothing below decides
      "answers": {"<question>": "<reply>"},
          # <question> matches the text between "Question:" and "Options:" of the prompt
          # exactly, or else is a substring of the prompt text
      "answer_key": {"<question>": "<correct option text>" | <option index>},
          # reply with the letter under which that option appears in THIS prompt's
          # option list ("A. ...", "B) ..."), so it stays right when options are rotated
      "reply_format": "{letter}",      # how an answer_key reply is written
      "latency": 0.2 | {"fixed": 0.2} | {"uniform": [0.1, 0.3]},   # seconds, per request
      "latency_by_question": {"<question>": <latency as above>},
      "faults": [<rule>, ...],         # the first rule that fires decides the request
      "models": ["m1"],                # if given: other model names get 404 model_not_found
                                       # (GET /v1/models lists these, else `model`, else none)
      "model": "name",                 # the model name reported back (default: the request's)
      "require_auth": false,           # true: a request without Authorization gets 401
      "hang_s": 3600,                  # default duration of a "hang" fault
      "seed": 0,                       # random latency and fault fractions are reproducible
      "inspect_images": true,          # decode image headers to record size and digest
      "log_limit": 100000,             # at most this many entries in the request log
      "models_status": 401,            # the model-list routes answer this status (pre-flight tests)
      "pinned": 400,                   # a name not in `models` gets this status with FastAPI's body
                                       # {"detail": "Server is pinned to '<models[0]>'"}, as
                                       # `transformers serve MODEL` answers (default: the 404 above)
      "logprobs": {"<question>": {"A": 0.7, "B": 0.2, "C": 0.1}}
          # served when a request asks `logprobs: true` (and `top_logprobs: K`): at the
          # first token of the reply that is an option letter, the top K letters with
          # these probabilities (the emitted letter's own logprob from the same table);
          # every other token, and every reply without an entry, has logprob 0
    }

A fault rule::

    {"fault": "status", "status": 429,   # any HTTP status, with an OpenAI-style error body
     "retry_after": 1 | "Wed, 21 Oct 2015 07:28:00 GMT",  # Retry-After header, verbatim
     "retry_after_ms": 150,              # retry-after-ms header
     "message": "...", "code": "...",    # the error body's message and code
     "match": "<question>",             # only requests matching it (as for answers)
     "first": 3,                         # only the first N matching requests ...
     "after": 0,                         # ... after skipping M of them
     "per_prompt": false,                # count first/after separately per distinct request
     "fraction": 0.5,                    # then fire with this probability (seeded)
     "delay": 0.0}                       # seconds to wait before answering (default 0)

and with "fault" one of: "status"; "hang" ("seconds", default hang_s: no answer, then
the connection is closed); "malformed" (200 with a body that is not JSON); "truncated"
(200 whose JSON body is cut in half, Content-Length consistent); "empty_choices";
"content_filter" (finish_reason "content_filter", content "text" or null); "refusal"
(message.refusal set, content null; "text" gives it); "drop" (headers and half the body
sent, then the connection is reset); "reset" (the connection is reset before any
response); "die" (the server stops serving, as if killed: this request's connection is
reset, every open one cut, the port closed); "endless" (a model that never emits a stop
token, on one inference thread: requests wait their turn, then take `token_s` seconds
(default 0.002) per token up to the request's max_tokens / max_completion_tokens, or
"max_tokens" (default 1024) when it sends none, and end with finish_reason "length"); "duplicate_key" (200
whose message names "content" twice, "text" first, then the reply); "non_finite" (200 whose body
carries `"score": NaN`, which is not JSON, beside the reply).
A status fault's "style" is "openai" (an error object), "fastapi" ({"detail": message},
as FastAPI servers such as `transformers serve` answer) or "text" (the message as plain
text). Apart from "status" and "reset", a fault waits the scripted latency first.

In process, `ScriptedServer(script, reply=fn)` also takes a callable
`fn(prompt: str, body: dict) -> str | None` consulted before `answers` (None: fall through).

Statistics (`.stats()` or `GET /_stats`): `total` chat requests; `by_fault` (counted
when a request arrives); `by_status` (HTTP status sent, as a string key) and `by_outcome`
("200", "429", ..., "hang", "drop", "reset"), both counted when the request ends, just
before its last bytes go out (so a hang still hanging is in `by_fault` and `in_flight`); `by_question`, `by_prompt` (sha256 of the prompt text, 16 hex digits) and
`by_request` (the same over model, prompt and image digests) request counts; `answered`
(successful answers per request hash) and `duplicates` (answers beyond the first for the
same request); `models`; `auth` ({"present": n, "absent": n}: the Authorization header's
value is never looked at or kept); `images` ({"with": n, "without": n, "total": n});
`in_flight`, `max_in_flight`; `connections` (TCP connections opened: a client that keeps
them alive opens as many as it has in flight); `other` (requests to other endpoints); and `requests`, the
per-request log: seq, t_start, t_end (seconds since the server started), model,
question, prompt_hash, request_hash, images ([{mime, bytes, width, height, sha256}]),
auth, params (every body key except messages), outcome, status.
"""

from __future__ import annotations

from medrcube.testing.server.process import ScriptedServer, ServerProcess, serve_main
from medrcube.testing.server.script import FAULTS, Script, ScriptError, question_of

__all__ = ["FAULTS", "ScriptedServer", "ServerProcess", "Script", "ScriptError", "question_of", "serve_main"]
