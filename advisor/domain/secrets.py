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
