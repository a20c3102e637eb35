"""Ceilings of the numeric settings that size work or memory.

A setting far past what any endpoint or machine can use is a mistake (a typo, an extra
zero), and left unchecked it sizes work before anything is sent: `concurrency:
1000000000` once started a task per slot and took gigabytes of memory while no request
left. Every such setting has a ceiling here; a value beyond it is a usage error naming
the file, the key, the value, the ceiling and the fix (models/models_file.py, the
options of the gate and of `medrcube run`). The work a setting sizes is still created
lazily (run/pump.py starts no more workers than there are batches to ask).
"""

from __future__ import annotations

# key -> (ceiling, what it sizes)
CEILINGS: dict[str, tuple[float, str]] = {
    "concurrency": (1024, "requests in flight, each with its prompt, image and reply in memory"),
    "rpm": (1_000_000, "requests started per minute"),
    "timeout": (86_400, "seconds one attempt may take"),
    "max_retries": (100, "attempts per request"),
    "image_max_side": (16_384, "pixels per side of a sent image"),
    "batch_size": (4096, "requests per batch"),
    "max_response_mib": (1024, "MiB of one response body held in memory"),
    "breaker_failures": (1_000_000, "failed attempts before the circuit breaker opens"),
    "breaker_seconds": (86_400, "seconds without an answer before the circuit breaker opens"),
    "retry_after_max": (86_400, "seconds a server may ask to wait"),
    "retry_wait_max": (86_400, "seconds of waiting between the retries of one request"),
    "max_requests": (1_000_000_000, "requests a sequential run may schedule"),
    "max_cost": (1_000_000_000, "spend a sequential run may reach"),
}
# generation parameters that size the reply (tokens, alternatives) or the work per request
PARAM_CEILINGS: dict[str, tuple[float, str]] = {
    "max_tokens": (1_048_576, "tokens of one reply"),
    "max_completion_tokens": (1_048_576, "tokens of one reply"),
    "max_output_tokens": (1_048_576, "tokens of one reply"),
    "max_new_tokens": (1_048_576, "tokens of one reply"),
    "n": (16, "replies per request"),
    "best_of": (16, "replies generated per request"),
    "top_logprobs": (20, "alternatives per token"),
    "num_beams": (64, "beams per request"),
}


def beyond(key: str, value: float, table: dict[str, tuple[float, str]] = CEILINGS) -> str | None:
    """Why `value` is past the ceiling of `key` (for a usage error), else None."""
    entry = table.get(key)
    if entry is None or value <= entry[0]:
        return None
    ceiling, what = entry
    return f"{value:g} is beyond the ceiling of {ceiling:g} ({what})"
