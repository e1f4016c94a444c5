"""Which environment variable names hold secrets (pure; one rule for every place that records, renders or refuses them).

Case-insensitive: ``vllm_api_key`` is as secret as ``VLLM_API_KEY``. A name is secret when it contains a credential
word (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH, COOKIE, SESSION) or names a connection string that
usually embeds one (``*_URL``, ``*_URI``, ``*_DSN``: ``VLLM_DB_URL=postgres://user:pass@…``). Over-redacting a
recorded address costs nothing (addresses do not change throughput: advisor.hardware.fingerprint NON_PERF_ENV).
"""

from __future__ import annotations

import re

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|_URL$|_URI$|_DSN$)", re.IGNORECASE)
"""Issue 43 item 9: VLLM_PASSWD, VLLM_AUTH_HEADER and VLLM_DB_URL were shown; lower-case names were too."""


def looks_secret(name: str) -> bool:
    """True when the variable ``name`` should never be printed, stored or rendered outside a 0600 file."""
    return bool(SECRET_NAME.search(name))


REDACTED = "<redacted>"
_NOT_A_SECRET_VALUE = re.compile(r"(_FILE|_PATH|_DIR|KEYFILE|_TOKENS)$", re.IGNORECASE)
"""A flag that names where a secret lives (vLLM's --ssl-keyfile) holds a path, not the secret; one that ends in
TOKENS (vLLM's --max-num-batched-tokens) holds a count of tokens, not a token."""


def redacted_argv(argv: list[str]) -> list[str]:
    """``argv`` as it may be stored or printed: the values of secret-looking flags (``--api-key KEY [KEY ...]``,
    ``--api-key=KEY``, ``--hf-token=…``: :func:`looks_secret` of the flag's name) become ``<redacted>``.
    A key given to a probed server on its command was kept in the probe store, ``--json`` and the log (issue 43)."""
    out: list[str] = []
    secret = False
    for arg in argv:
        if arg.startswith("-"):
            name, eq, _ = arg.lstrip("-").partition("=")
            key = name.replace("-", "_")
            secret = looks_secret(key) and not _NOT_A_SECRET_VALUE.search(key)
            out.append(f"{arg.split('=', 1)[0]}={REDACTED}" if secret and eq else arg)
            secret = secret and not eq
        else:
            out.append(REDACTED if secret else arg)  # every value of a flag that takes several (vLLM's --api-key)
    return out
