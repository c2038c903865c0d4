"""The one place that decides what must never be printed: every output (plan in every format, diff, policy
messages, `sidecar check`, error messages) passes its values through here.

A value is a secret by where it is (under a key named like a secret, inside a value the Pulumi engine marks
secret, at any depth) or by what it is, whatever its key: an env entry `{"name": "DB_PASSWORD", "value": ...}`,
an argument `--password=...` (or `--password VALUE`), the userinfo of a URL, a credential query parameter
(`?token=`), a `token:` line of a kubeconfig, a docker config, a Kubernetes Secret's data, a PEM private key, a
service-account key, or a string shaped like a well-known token (GitHub, AWS, Slack, GitLab, Google...).

Pure: values in, redacted copies out. Structured values lose the whole secret (`[secret]`); free text keeps its
shape and loses only the secret part (`https://***@host`, `--password=***`). It imports nothing of tpuplane,
so every layer (errors, plans, reports, the runtime's tools) uses it without reaching up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

# How the Pulumi engine marks a secret value: `{SIG: "1b47061264138c4ac30d75fd1eb44270", "value": ...}`.
PULUMI_SECRET_SIG = "4dabf18193072939515e22adb298388d"
REDACTED = "[secret]"
MASK = "***"

_SECRET_WORDS = r"password|passwd|passphrase|secret|token|api[_-]?key|apikey|private[_-]?key|credentials?|auth[_-]?key"
SECRET_KEY = re.compile(_SECRET_WORDS, re.IGNORECASE)
# Keys that name or point at a secret rather than hold one: secretName, secretRef, secret_uri, tokenFile...
_SECRET_REFERENCE_KEY = re.compile(
    r"(name|names|ref|refs|uri|url|path|file|id|version|ttl|seconds|expiration|audience|type|mode)$", re.IGNORECASE)
# Keys whose value is a secret whatever it looks like (docker configs, HTTP auth headers).
_SECRET_EXACT_KEYS = frozenset({".dockerconfigjson", ".dockercfg", "auth", "authorization", "x-api-key"})

_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"|.*\Z)", re.DOTALL)
_SA_KEY_JSON = re.compile(r'"type"\s*:\s*"service_account"')
# Well-known token formats; each is distinctive enough not to hit names, versions or hashes.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9-]{8,}|xapp-[A-Za-z0-9-]{8,}"
    r"|glpat-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{16,}"
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|sk_live_[A-Za-z0-9]{16,}|rk_live_[A-Za-z0-9]{16,}"
    r"|npm_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")")
# The userinfo of a URL: everything up to the LAST `@` of the authority (a password may hold `@`).
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")
_CREDENTIAL_PARAM = re.compile(
    r"(?P<name>[?&;](?:[A-Za-z0-9_.-]*(?:token|secret|password|passwd|signature|credential|api[_-]?key|apikey)"
    r"[A-Za-z0-9_.-]*|key|sig|auth|code)=)(?P<value>[^&#\s\"']+)", re.IGNORECASE)
# `--password=x`, `--password x`, `DB_PASSWORD=x`, `token: x`, `"password": "x"`: a secret-named key, then a value.
# The value is a lookahead, so scanning goes on inside it (`a=--password=x` still finds the password).
_ASSIGNMENT = re.compile(
    r"(?P<key>(?<![A-Za-z0-9_.-])-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>\"?[ \t]*[=:][ \t]*\"?|[ \t]+)"
    r"(?=(?P<value>[^\s\"',;&]+))")


def is_secret_key(key: str) -> bool:
    """A key (or env-var / flag name) that holds a secret value: `password`, `DB_PASSWORD`, `apiKey`, `auth`."""
    bare = key.lstrip("-")
    if bare.lower() in _SECRET_EXACT_KEYS:
        return True
    return bool(SECRET_KEY.search(bare)) and not _SECRET_REFERENCE_KEY.search(bare)


def _is_list(value: Any) -> bool:
    """Lists and list-likes (pulumi-policy hands props over as read-only Mapping/Sequence proxies)."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _is_engine_secret(value: Any) -> bool:
    return isinstance(value, Mapping) and PULUMI_SECRET_SIG in value


def _is_service_account_key(value: Mapping[str, Any]) -> bool:
    return value.get("type") == "service_account" and "private_key" in value


def is_secret_text(text: str) -> bool:
    """A string that is wholly a secret wherever it sits: a private key or a service-account key file."""
    return bool(_PEM_PRIVATE_KEY.search(text)) or (bool(_SA_KEY_JSON.search(text)) and "private_key" in text)


def _mask_userinfo(match: re.Match[str]) -> str:
    """`scheme://***@`; `ssh://git@host` keeps its well-known, secret-free user."""
    return match[0] if match["userinfo"] == "git" else f"{match['scheme']}{MASK}@"


def _mask_assignments(text: str) -> str:
    """The value after every secret-named key (`KEY=`, `KEY:`, or a `--flag` followed by a space) masked."""
    spans = [match.span("value") for match in _ASSIGNMENT.finditer(text)
             if is_secret_key(match["key"]) and (not match["sep"].isspace() or match["key"].startswith("-"))
             and match["value"] != MASK]
    out, last = [], 0
    for start, end in spans:
        if start >= last:
            out += [text[last:start], MASK]
            last = end
    return "".join([*out, text[last:]])


def redact_text(text: str) -> str:
    """Free text (a log line, an error message, a requirement line) with every secret part replaced by `***`."""
    if not text:
        return text
    text = _PEM_PRIVATE_KEY.sub(MASK, text)
    text = _USERINFO.sub(_mask_userinfo, text)
    text = _CREDENTIAL_PARAM.sub(lambda m: f"{m['name']}{MASK}", text)
    text = _TOKEN.sub(MASK, text)
    return _mask_assignments(text)


def _is_secret_entry(value: Mapping[str, Any]) -> bool:
    """`{"name": "DB_PASSWORD", "value": ...}` (container env), `{"key": "apiKey", "value": ...}` (metadata)."""
    label = value.get("name", value.get("key"))
    return isinstance(label, str) and is_secret_key(label) and "value" in value


def _redact_args(items: list[Any]) -> list[Any]:
    """`["--password", "x"]`: a secret-named flag without `=` hides the argument after it."""
    out = list(items)
    for i, item in enumerate(items[:-1]):
        if isinstance(item, str) and item.startswith("-") and "=" not in item and is_secret_key(item) \
                and isinstance(items[i + 1], str):
            out[i + 1] = REDACTED
    return out


def redact(value: Any, key: str = "") -> Any:
    """`value` with every secret (plaintext or engine-marked, at any depth) replaced, safe to print."""
    if isinstance(value, Mapping):
        if _is_engine_secret(value) or _is_service_account_key(value):
            return REDACTED
        out = {redact_text(str(k)) if isinstance(k, str) else k: redact(v, str(k)) for k, v in value.items()}
        if _is_secret_entry(value):
            out["value"] = REDACTED
        if value.get("kind") == "Secret":
            out.update({k: _redact_all(value[k]) for k in ("data", "stringData") if k in value})
        return out
    if _is_list(value):
        return _redact_args([redact(item, key) for item in value])
    if isinstance(value, str) and value:
        if (key and is_secret_key(key)) or is_secret_text(value):
            return REDACTED
        return redact_text(value)
    return value


def _redact_all(value: Any) -> Any:
    """Every value of a Secret's data: keys stay (they say what is there), values go."""
    if isinstance(value, Mapping) and not _is_engine_secret(value):
        return {k: REDACTED for k in value}
    return REDACTED


def redact_inputs(resource_type: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A resource's inputs, redacted; a Kubernetes Secret resource loses every value of `data`/`stringData`."""
    out = redact(dict(inputs))
    if resource_type.startswith("kubernetes:core/v1:Secret"):
        out.update({k: _redact_all(inputs[k]) for k in ("data", "stringData") if k in inputs})
    return out


def child_path(path: str, key: str | int) -> str:
    """`nodeConfig.labels.foo`, `nodeLocations[0]`, `labels["cloud.google.com/gke-tpu-topology"]`: how plans,
    diffs and policy messages name a value, with any secret in a key masked."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(redact_text(key))}]"


def sensitive_paths(value: Any, path: str = "", key: str = "") -> list[str]:
    """Paths under `value` that hold a plaintext secret (what `redact` would hide), sorted. Values the engine
    already marks secret are protected, so they are not listed."""
    return sorted(set(_plaintext(value, redact(value, key), path)))


def _plaintext(raw: Any, redacted: Any, path: str) -> list[str]:
    if _is_engine_secret(raw):
        return []
    if isinstance(raw, Mapping) and isinstance(redacted, Mapping):
        found = [path or "<value>"] if any(
            isinstance(k, str) and redact_text(k) != k for k in raw) else []
        pairs = zip(raw.items(), redacted.values())
        return found + [p for (k, v), r in pairs for p in _plaintext(v, r, child_path(path, str(k)))]
    if _is_list(raw) and _is_list(redacted):
        return [p for i, (v, r) in enumerate(zip(raw, redacted)) for p in _plaintext(v, r, child_path(path, i))]
    return [] if raw == redacted else [path or "<value>"]
