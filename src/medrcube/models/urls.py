"""Credentials in URLs: found, refused, cut. The one rule for every place a URL is shown.

A base URL is written into error messages, run.json, results and the store; a key must
never be. Two places in a URL can carry one: the userinfo (`https://user:pw@host`) and
the query string (`...?api-key=KEY`, the form gateways such as Azure API Management
often document). `credential_parts` names them so that specs and models.yaml refuse
such a URL; `redact_urls` cuts them from any text (a provider's error message may quote
the URL it was called with); `endpoint_identity` is the URL as the response store keys
it: scheme, host, port and path, without credentials, query or trailing slash.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

__all__ = ["CREDENTIAL_PARAMS", "credential_parts", "endpoint_identity", "redact_urls", "refusal_hint"]

# Query parameter names that carry a credential. Matched on the name lower-cased with
# '-' as '_'; any name ending in one of the suffixes counts too (x_api_key, access_token).
CREDENTIAL_PARAMS = frozenset({
    "api_key", "apikey", "key", "token", "access_token", "auth", "authorization", "sig", "signature",
    "secret", "client_secret", "password", "passwd", "pwd", "code", "subscription_key", "bearer", "jwt",
    "session", "sessionid", "x_api_key", "ocp_apim_subscription_key", "sv", "se", "sp",
})
_SUFFIXES = ("_key", "_token", "_secret", "_sig", "_signature", "_password")

_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@?#]*@")
_QUERY_PARAM = re.compile(r"([?&;])([^=&#\s;]+)=([^&#\s;]*)")

REDACTED = "[redacted]"


def _is_credential_name(name: str) -> bool:
    n = name.strip().lower().replace("-", "_")
    return n in CREDENTIAL_PARAMS or n.endswith(_SUFFIXES)


def credential_parts(url: str) -> list[str]:
    """What in `url` looks like a credential: "user:password@" and the names of
    credential-shaped query parameters. Empty for a clean URL."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return ["an unparsable URL"]
    if "@" in parts.netloc:
        found.append("the 'user:password@' part")
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if _is_credential_name(name):
            found.append(f"the query parameter {name!r}")
    return found


def refusal_hint(where: str, url: str, parts: list[str]) -> str:
    """The message refusing a URL with credentials (the credentials themselves cut)."""
    return (
        f"{where} holds credentials ({', '.join(parts)}: {redact_urls(url)!r}); a URL is written into error "
        "messages, run.json, results and the response store, a key never is. Remove them from the URL and "
        "give the key through an environment variable (api_key_env in models.yaml, OPENAI_API_KEY by default), "
        "or, for a gateway that wants its own header, through extra_headers in models.yaml's params naming an "
        "environment variable"
    )


def redact_urls(text: str) -> str:
    """`text` with userinfo cut from every URL in it and every credential-shaped query
    parameter's value replaced by [redacted]."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(rf"\1{REDACTED}@", text)

    def param(m: re.Match[str]) -> str:
        sep, name, value = m.groups()
        return f"{sep}{name}={REDACTED}" if value and _is_credential_name(name) else m.group(0)

    return _QUERY_PARAM.sub(param, text)


def endpoint_identity(url: str | None) -> str:
    """The endpoint a URL names, as the response store keys answers: lower-case scheme
    and host, the port, the path without a trailing slash; no credentials, no query."""
    if not url:
        return "https://api.openai.com/v1"
    try:
        p = urlsplit(url.strip())
        host = (p.hostname or "").lower()
        port = f":{p.port}" if p.port else ""
    except ValueError:
        return redact_urls(url)
    return f"{p.scheme.lower()}://{host}{port}{p.path.rstrip('/')}"
