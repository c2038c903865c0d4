"""The one place that decides what must never be printed: every output (plan in every format, diff, policy
messages, `sidecar check`, error messages) passes its values through here.

A value is a secret by where it is (under a key named like a secret, inside a value the Pulumi engine marks secret
or a stack file holds as `secure:`, at any depth) or by what it is, whatever its key: an env entry `{"name":
"DB_PASSWORD", "value": ...}`, an argument `--password=...` (or `--password VALUE`), the userinfo of a URL, a
credential query parameter (`?token=`), a `token:` line of a kubeconfig, a docker config, a Kubernetes Secret's
data, a PEM private key, a service-account key, or a string shaped like a well-known token (GitHub, AWS, Slack,
GitLab, Google...).

Pure: values in, redacted copies out. Structured values lose the whole secret (`[secret]`); free text keeps its
shape and loses only the secret part (`https://***@host`, `--password=***`). It imports nothing of tpuplane,
so every layer (errors, plans, reports, the runtime's tools) uses it without reaching up.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

# How the Pulumi engine marks a secret value: `{SIG: "1b47061264138c4ac30d75fd1eb44270", "value": ...}`.
PULUMI_SECRET_SIG = "4dabf18193072939515e22adb298388d"
# How a stack file holds a secret config value: `{"secure": "<ciphertext>"}`.
CONFIG_SECRET_KEY = "secure"
REDACTED = "[secret]"
MASK = "***"

_SECRET_WORDS = (r"password|passwd|passphrase|secret|token|api[_-]?key|apikey|private[_-]?key|credentials?"
                 r"|auth[_-]?key|bearer")
SECRET_KEY = re.compile(_SECRET_WORDS, re.IGNORECASE)
# Keys that name or point at a secret rather than hold one: secretName, secretRef, secret_uri, tokenFile...
_SECRET_REFERENCE_KEY = re.compile(
    r"(name|names|ref|refs|uri|url|path|file|id|version|ttl|seconds|expiration|audience|type|mode)$", re.IGNORECASE)
# Keys whose value is a secret whatever it looks like (docker configs, HTTP auth headers, a stack file's secret).
_SECRET_EXACT_KEYS = frozenset({".dockerconfigjson", ".dockercfg", "auth", "authorization", "proxy-authorization",
                                "x-api-key", "cookie", "set-cookie", CONFIG_SECRET_KEY})

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
# The userinfo of a URL: everything up to the LAST `@` of the authority (a password may hold `@`); with a scheme,
# protocol-relative (`//user:pw@host`), or bare (`user:pw@host/simple` as pip takes an index, `--proxy
# user:pw@proxy:3128`, `user:pw@host.example`). See `_mask_bare_userinfo` for what bare userinfo is not.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://|(?<![:/])//)(?P<userinfo>[^/?#\s]*)@")
_BARE_USERINFO = re.compile(
    r"(?<![^\s\"'=(\[,</])(?P<user>[A-Za-z0-9._~%!$&*+-]+):[^\s/?#@\"']+@"
    r"(?P<host>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)(?P<after>/|:[0-9]{1,5}(?![0-9A-Za-z])|)")
# `kind:email` is how IAM writes a member (`user:alice@example.com`), and `mailto:` an address: no password there
_NOT_USERINFO = frozenset({"user", "group", "serviceAccount", "domain", "deleted", "principal", "principalSet",
                           "mailto"})
_CREDENTIAL_PARAM = re.compile(
    r"(?P<name>[?&;](?:[A-Za-z0-9_.-]*(?:token|secret|password|passwd|signature|credential|api[_-]?key|apikey)"
    r"[A-Za-z0-9_.-]*|key|sig|auth|code)=)(?P<value>[^&#\s\"']+)", re.IGNORECASE)
# A secret-named key, then its value: `--password=x`, `--password x`, `DB_PASSWORD=x`, `token: x`, `"password": "x"`,
# `'passphrase': 'a b c'`, `Authorization: Bearer x`. Only the key and separator are matched, so scanning goes on
# inside a value (`a=--password=x` still finds the password); `_value_end` decides where the value ends.
_ASSIGNMENT = re.compile(
    r"(?P<open>[\"']?)(?P<key>(?<![A-Za-z0-9_.-])-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)(?P<close>[\"']?)"
    r"(?P<sep>[ \t]*[=:][ \t]*|[ \t]+)")
# The credentials of an HTTP auth scheme wherever they stand (`curl --header "Bearer x"`); `Basic` only before
# something encoded (a word of lowercase letters after it is prose).
_AUTH_SCHEME = re.compile(
    r"(?P<scheme>(?<![A-Za-z0-9])(?:[Bb]earer|BEARER)[ \t]+)(?P<value>[^\s\"',;]+)"
    r"|(?P<basic>(?<![A-Za-z0-9])(?:[Bb]asic|BASIC)[ \t]+)(?P<encoded>(?![a-z]+\b)[A-Za-z0-9+/]{8,}=*)")
# A container env entry written out as text (a dict's repr, JSON): `'name': 'DB_PASSWORD', 'value': 'x'`.
_ENV_ENTRY = re.compile(
    r"""(?P<head>(?P<q>["']?)(?:name|key)(?P=q)[ \t]*[:=][ \t]*["']?(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)["']?"""
    r"""[ \t]*[,\n][ \t]*(?P<vq>["']?)value(?P=vq)[ \t]*(?P<vsep>[:=])[ \t]*)""")
_WORD = re.compile(r"[^\s\"',;&}\]]*")
_ALREADY_MASKED = (MASK, REDACTED, f'"{REDACTED}"', f"'{REDACTED}'", f'"{MASK}"', f"'{MASK}'")


def is_secret_key(key: str) -> bool:
    """A key (or env-var / flag name) that holds a secret value: `password`, `DB_PASSWORD`, `apiKey`, `auth`, also
    as the last part of a dotted path (`headers.Authorization`)."""
    bare = key.lstrip("-")
    if bare.lower() in _SECRET_EXACT_KEYS or bare.rsplit(".", 1)[-1].lower() in _SECRET_EXACT_KEYS:
        return True
    return bool(SECRET_KEY.search(bare)) and not _SECRET_REFERENCE_KEY.search(bare)


def _is_list(value: Any) -> bool:
    """Lists and list-likes (pulumi-policy hands props over as read-only Mapping/Sequence proxies)."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _is_marked_secret(value: Any) -> bool:
    """A value Pulumi marks secret: the engine's `{SIG: ..., "value": ...}`, or a stack file's `{secure: v1:...}`
    (`pulumi config set --secret` writes its ciphertext so)."""
    return isinstance(value, Mapping) and (PULUMI_SECRET_SIG in value or (
        len(value) == 1 and isinstance(value.get(CONFIG_SECRET_KEY), str)))


def _is_service_account_key(value: Mapping[str, Any]) -> bool:
    return value.get("type") == "service_account" and "private_key" in value


def is_secret_text(text: str) -> bool:
    """A string that is wholly a secret wherever it sits: a private key or a service-account key file."""
    return ("PRIVATE KEY" in text and bool(_PEM_PRIVATE_KEY.search(text))) or (
        "private_key" in text and bool(_SA_KEY_JSON.search(text)))


def _mask_userinfo(match: re.Match[str]) -> str:
    """`scheme://***@`; `ssh://git@host` keeps its well-known, secret-free user."""
    return match[0] if match["userinfo"] == "git" else f"{match['scheme']}{MASK}@"


def _mask_bare_userinfo(match: re.Match[str]) -> str:
    """`***@host`, for a host followed by a path or a port, or a domain name alone; not an image digest
    (`image:tag@sha256:...`: no domain, no port), an IAM member or a `mailto:` address."""
    if not match["after"] and ("." not in match["host"] or match["user"] in _NOT_USERINFO):
        return match[0]
    return f"{MASK}@{match['host']}{match['after']}"


def _value_end(text: str, start: int, *, opened: str = "", to_line_end: bool = False) -> int:
    """Where the value that starts at `start` ends: at its closing quote when quoted (or when the key opened a
    quote: `"Authorization: Bearer x"`), at the end of the line after `key:` (a header, a YAML line: the value may
    be several words), else at the end of the word (`KEY=x`, `--flag x`, a JSON value after `"key": `)."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end == -1 else line_end
    if start < len(text) and text[start] in "\"'":
        close = text.find(text[start], start + 1, line_end)
        return line_end if close == -1 else close + 1
    if opened:
        close = text.find(opened, start, line_end)
        return line_end if close == -1 else close
    if to_line_end:
        return line_end
    return _WORD.match(text, start).end()  # type: ignore[union-attr]  # matches the empty string at worst


# What a YAML key's line holds when its value continues on the lines below: a block scalar's header, or nothing
_BLOCK_START = re.compile(r"(?:[|>][0-9+-]*)?[ \t]*")


def _block_end(text: str, key_at: int, line_end: int) -> int:
    """The end of the lines after `line_end` indented deeper than the line of the key at `key_at`: its YAML value
    (`secret: |` then the text, `password:` then a plain scalar on the next line, or a mapping)."""
    line = text[text.rfind("\n", 0, key_at) + 1:key_at]
    indent = len(line) - len(line.lstrip(" \t"))
    end = line_end
    while line_end < len(text):
        next_end = text.find("\n", line_end + 1)
        next_end = len(text) if next_end == -1 else next_end
        line = text[line_end + 1:next_end]
        if line.strip():
            if len(line) - len(line.lstrip(" \t")) <= indent:
                break
            end = next_end
        line_end = next_end
    return end


def _secret_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every value after a secret-named key (`KEY=`, `KEY:`, or a `--flag` and a space), of every
    auth scheme's credentials and of every secret env entry's value."""
    for match in _ASSIGNMENT.finditer(text):
        key, sep = match["key"], match["sep"]
        if not is_secret_key(key) or (sep.isspace() and not key.startswith("-")):
            continue
        bare_key = not match["close"]  # `"password": x` is a JSON key: its value is one JSON value
        to_line_end = ":" in sep and bare_key
        end = _value_end(text, match.end(), opened=match["open"] if bare_key else "", to_line_end=to_line_end)
        if to_line_end and _BLOCK_START.fullmatch(text, match.end(), end):
            end = _block_end(text, match.start("key"), end)
        yield match.end(), end
    for match in _AUTH_SCHEME.finditer(text):
        yield match.span("value") if match["value"] else match.span("encoded")
    for match in _ENV_ENTRY.finditer(text):
        if is_secret_key(match["name"]):
            yield match.end(), _value_end(text, match.end(), to_line_end=match["vsep"] == ":" and not match["vq"])


def _mask_assignments(text: str) -> str:
    """Every secret value in free text masked whole; overlapping finds merge, masks already there stay."""
    out, last = [], 0
    for start, end in sorted(_secret_spans(text)):
        start = max(start, last)
        if end <= start or text[start:end].strip() in _ALREADY_MASKED:
            continue
        quoted = text[start] in "\"'" and end - start >= 2 and text[end - 1] == text[start]
        out += [text[last:start], f"{text[start]}{MASK}{text[start]}" if quoted else MASK]
        last = end
    return "".join([*out, text[last:]])


# What every secret in free text but a well-known token (`_TOKEN`) contains at least one of: a secret-named key's
# word (SECRET_KEY's own, and those of the schemes, headers and PEM blocks masked in text), userinfo before an `@`,
# a query parameter. Searched in lowercased text (a case-insensitive alternation is ten times slower), each regex
# only where it can hit. Text with none is returned as it is: an email address,
# `oauthScopes` or a `/auth/` scope URL alone hold no secret.
_SECRET_WORD = re.compile(_SECRET_WORDS + r"|private|basic|docker|begin|cookie")
# `auth`/`authorization` as a word of its own (a key, a flag, an env name), not inside `oauth` or a `/auth/` URL
_AUTH_KEY = re.compile(r"(?<![a-z/])auth(?:orization)?(?![a-z0-9_/])|auth[_-]?key")
_USERINFO_BEFORE_AT = re.compile(r"//[^/?#\s]*@|:[^\s/?#@\"']+@")
_QUERY_PARAMETER = re.compile(r"[?&;][a-z0-9_.-]*=")


def _may_hold_secret_text(text: str) -> bool:
    """Whether `text` holds anything `redact_text` masks (a superset of its rules' triggers)."""
    lowered = text.lower()
    return bool(_SECRET_WORD.search(lowered)
                or ("auth" in lowered and _AUTH_KEY.search(lowered))
                or ("@" in text and _USERINFO_BEFORE_AT.search(text))
                or ("=" in text and _QUERY_PARAMETER.search(lowered))
                or _TOKEN.search(text))


def redact_text(text: str) -> str:
    """Free text (a log line, an error message, a requirement line) with every secret part replaced by `***`."""
    if not text or not _may_hold_secret_text(text):
        return text
    text = _PEM_PRIVATE_KEY.sub(MASK, text)
    text = _USERINFO.sub(_mask_userinfo, text)
    text = _BARE_USERINFO.sub(_mask_bare_userinfo, text)
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
    """`value` with every secret (plaintext or marked by Pulumi, at any depth) replaced, safe to print."""
    if type(value) in (dict, list) and not (key and is_secret_key(key)) and not _may_hold_a_secret(value):
        return value
    return _redact(value, key)


def _may_hold_a_secret(value: dict | list) -> bool:
    """Whether plain JSON data holds anything `_redact` acts on: every rule needs a secret word, a token, userinfo,
    a query parameter or the engine's secret marker somewhere in it, key or value. One pass over its JSON instead
    of one per string (a plan of thousands of resources is mostly plain); other data is walked."""
    try:
        text = json.dumps(value, ensure_ascii=False, check_circular=False)
    except (TypeError, ValueError, RecursionError):
        return True
    return PULUMI_SECRET_SIG in text or f'"{CONFIG_SECRET_KEY}"' in text or _may_hold_secret_text(text)


def _redact(value: Any, key: str = "") -> Any:
    if isinstance(value, str):  # the common case first: a plan holds mostly text
        if value and ((key and is_secret_key(key)) or is_secret_text(value)):
            return REDACTED
        return redact_text(value)
    if isinstance(value, Mapping):
        if _is_marked_secret(value) or _is_service_account_key(value):
            return REDACTED
        out = {redact_text(str(k)) if isinstance(k, str) else k: _redact(v, str(k)) for k, v in value.items()}
        if _is_secret_entry(value):
            out["value"] = REDACTED
        if value.get("kind") == "Secret":
            out.update({k: _redact_all(value[k]) for k in ("data", "stringData") if k in value})
        return out
    if _is_list(value):
        return _redact_args([_redact(item, key) for item in value])
    return value


def _redact_all(value: Any) -> Any:
    """Every value of a Secret's data: keys stay (they say what is there), values go."""
    if isinstance(value, Mapping) and not _is_marked_secret(value):
        return {k: REDACTED for k in value}
    return REDACTED


def redact_inputs(resource_type: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A resource's inputs, redacted (the very mapping when nothing in it is secret: never changed here); a
    Kubernetes Secret resource loses every value of `data`/`stringData`, and inputs the engine marks secret as a
    whole (a plan file can say so) are all hidden, as `{"[secret]": ...}`."""
    out = redact(inputs if type(inputs) is dict else dict(inputs))
    if not isinstance(out, dict):
        return {REDACTED: REDACTED}
    if resource_type.startswith("kubernetes:core/v1:Secret"):
        out = {**out, **{k: _redact_all(inputs[k]) for k in ("data", "stringData") if k in inputs}}
    return out


def redact_names(names: Sequence[str]) -> list[str]:
    """Several names (a resource's URN, type, parent, ...) masked, with one check for all when none holds a secret."""
    if not _may_hold_secret_text("\n".join(names)):
        return list(names)
    return [redact_text(name) for name in names]


@functools.lru_cache(maxsize=1 << 16)  # the same paths recur in every resource of a kind
def child_path(path: str, key: str | int) -> str:
    """`nodeConfig.labels.foo`, `nodeLocations[0]`, `labels["cloud.google.com/gke-tpu-topology"]`: how plans,
    diffs and policy messages name a value, with any secret in a key masked."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    shown = redact_text(key)  # a key may be a token (`ghp_...`) however it is spelled
    if _IDENTIFIER.fullmatch(shown):
        return f"{path}.{shown}" if path else shown
    return f"{path}[{json.dumps(shown)}]"


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sensitive_paths(value: Any, path: str = "", key: str = "") -> list[str]:
    """Paths under `value` that hold a plaintext secret (what `redact` would hide), sorted. Values the engine
    already marks secret are protected, so they are not listed."""
    return sorted(set(_plaintext(value, redact(value, key), path)))


def _plaintext(raw: Any, redacted: Any, path: str) -> list[str]:
    if _is_marked_secret(raw):
        return []
    if isinstance(raw, Mapping) and isinstance(redacted, Mapping):
        found = [path or "<value>"] if any(
            isinstance(k, str) and redact_text(k) != k for k in raw) else []
        pairs = zip(raw.items(), redacted.values())
        return found + [p for (k, v), r in pairs for p in _plaintext(v, r, child_path(path, str(k)))]
    if _is_list(raw) and _is_list(redacted):
        return [p for i, (v, r) in enumerate(zip(raw, redacted)) for p in _plaintext(v, r, child_path(path, i))]
    return [] if raw == redacted else [path or "<value>"]
