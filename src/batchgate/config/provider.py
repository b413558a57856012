"""One `providers[i]` entry of a gateway config read into a `ProviderConfig`: its kind, base URL,
key (`api_key_env`), limits and headers; for `kind: azure` its `deployment` and `api_version`
(the URL forms Azure publishes: a resource, a deployment URL, the `/openai/v1` surface).

A header value may take values from the environment, `${VAR}` (`api-key: "${AZURE_KEY}"`): such a
header is kept as a `Secret` (`ProviderConfig.secret_headers`), never printed; an unset variable is
a one-line error naming the key and the variable."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from typing import cast
from urllib.parse import parse_qsl, urlsplit

from batchgate.config.bedrock import BEDROCK_KEYS, read_bedrock
from batchgate.config.gemini_entry import GEMINI_KEYS, read_vertex
from batchgate.config.model_limits import read_model_limits
from batchgate.config.network import NETWORK_KEYS, NetworkSettings, provider_network
from batchgate.config.schema import (
    EMULATOR_BASE_URL,
    OutputCharge,
    ProviderConfig,
    ProviderKind,
    Secret,
)
from batchgate.config.section import Section, type_name
from batchgate.quota.limits import QuotaLimits

KINDS = ("openai", "anthropic", "azure", "gemini", "bedrock")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PROVIDER = frozenset(
    {
        "name",
        "kind",
        "base_url",
        "api_key_env",
        "api_key",
        "limits",
        "tokenizer",
        "default_max_tokens",
        "headers",
        "batch_api",
        "batch_max_requests",
        "batch_max_bytes",
        "output_charge",
        "models",
        "deployment",
        "api_version",
        *GEMINI_KEYS,
        *NETWORK_KEYS,
        *BEDROCK_KEYS,
    }
)
_LIMITS = frozenset({"rpm", "tpm", "itpm", "otpm", "max_concurrency", "burst_seconds"})
_OUTPUT_CHARGES = ("max_tokens", "adjusted")
_AZURE_DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)/?$")


def read_provider(
    top: Section, i: int, raw: object, environ: Mapping[str, str], network: NetworkSettings
) -> ProviderConfig:
    """`providers[i]` checked, every bad key named; `network`: the environment's settings, which
    the entry's own keys (`proxy`, `ca_bundle`, ...) override."""
    s = Section(raw, top.source, f"providers[{i}]", _PROVIDER)
    name = s.string("name", required=True)
    assert name is not None
    if not _NAME.match(name):
        s.fail("name", f"{name!r} must be letters, digits, '_', '.' or '-'")
    kind = s.string("kind", "openai")
    if kind not in KINDS:
        s.fail("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    base_url = s.string("base_url", required=True)
    assert base_url is not None
    if base_url != EMULATOR_BASE_URL and not base_url.startswith(("http://", "https://")):
        s.fail("base_url", f"must be an http(s) URL or 'emulator', got {base_url!r}")
    lim = s.section("limits", _LIMITS)
    limits = _quota_limits(lim)
    output_charge = s.string("output_charge")
    if output_charge is not None and output_charge not in _OUTPUT_CHARGES:
        s.fail("output_charge", f"must be one of {', '.join(_OUTPUT_CHARGES)}, got {output_charge!r}")
    headers, secret_headers = _headers(s, environ)
    default_max = s.integer("default_max_tokens", 1024)
    assert default_max is not None
    batch_api = s.raw("batch_api")
    if batch_api is not None and not isinstance(batch_api, bool):
        s.fail("batch_api", f"must be true or false, got {type_name(batch_api)}")
    deployment, api_version = _azure(s, kind, base_url)
    vertex = read_vertex(s, kind)
    return ProviderConfig(
        name=name,
        kind=cast("ProviderKind", kind),
        base_url=base_url.rstrip("/"),
        api_key=_key(s, base_url, environ),
        api_key_env=s.string("api_key_env"),
        limits=limits,
        max_concurrency=lim.integer("max_concurrency"),
        tokenizer=s.string("tokenizer", "auto") or "auto",
        default_max_tokens=default_max,
        headers=headers,
        secret_headers=secret_headers,
        # Vertex AI and Bedrock: live only here (no batch mode)
        batch_api=(vertex is None and kind != "bedrock") if batch_api is None else batch_api,
        batch_max_requests=s.integer("batch_max_requests"),
        batch_max_bytes=s.integer("batch_max_bytes"),
        output_charge=cast("OutputCharge | None", output_charge),
        model_limits=read_model_limits(s, limits.burst_seconds),
        deployment=deployment,
        api_version=api_version,
        vertex=vertex,
        network=provider_network(s.data, s.path, s.source, network),
        bedrock=read_bedrock(s, kind),
    )


def _key(s: Section, base_url: str, environ: Mapping[str, str]) -> Secret | None:
    """The key: `api_key` as written, or the value of the variable `api_key_env` names."""
    literal = s.string("api_key")
    if literal is not None:
        return Secret(literal)
    key_env = s.string("api_key_env")
    if key_env is None:
        return None
    value = environ.get(key_env)
    if value:
        return Secret(value)
    if base_url != EMULATOR_BASE_URL:
        s.fail("api_key_env", f"environment variable {key_env} is not set")
    return None


def _headers(s: Section, environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, Secret]]:
    """The provider's extra headers: plain ones, and those taking a value from the environment
    (`${VAR}`), kept as secrets."""
    raw = s.raw("headers") or {}
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        s.fail("headers", "must map header names to strings")
    plain: dict[str, str] = {}
    secret: dict[str, Secret] = {}
    for header, value in raw.items():
        names = _VAR.findall(value)
        if not names:
            plain[header] = value
            continue
        for var in names:
            if not environ.get(var):
                s.fail(f"headers.{header}", f"environment variable {var} is not set")
        secret[header] = Secret(_VAR.sub(lambda m: environ[m.group(1)], value))
    return plain, secret


def _azure(s: Section, kind: str, base_url: str) -> tuple[str | None, str | None]:
    """`deployment` and `api_version` of a `kind: azure` entry, checked against its base_url: a
    deployment URL names its deployment; every form but `/openai/v1` needs an api-version (given
    here or in the URL's query)."""
    deployment = s.string("deployment")
    raw_version = s.raw("api_version")
    if isinstance(raw_version, date):  # YAML reads an unquoted 2024-10-21 as a date
        raw_version = raw_version.isoformat()
    if raw_version is not None and (not isinstance(raw_version, str) or not raw_version):
        s.fail("api_version", f"must be a version such as 2024-10-21, got {type_name(raw_version)}")
    api_version = raw_version
    if kind != "azure":
        for key, value in (("deployment", deployment), ("api_version", api_version)):
            if value is not None:
                s.fail(key, "is only for kind: azure")
        return None, None
    if base_url == EMULATOR_BASE_URL:
        return deployment, api_version
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    in_url = _AZURE_DEPLOYMENT.search(path)
    if in_url is not None and deployment is not None and deployment != in_url.group(1):
        s.fail("deployment", f"is {deployment!r} but base_url names deployment {in_url.group(1)!r}")
    if path.endswith("/openai/v1"):
        return deployment, api_version
    query_version = dict(parse_qsl(parts.query)).get("api-version")
    if api_version is None and query_version is None:
        s.fail(
            "api_version",
            "is required for an Azure deployment URL (e.g. 2024-10-21), "
            "or use the v1 surface: base_url https://RESOURCE.openai.azure.com/openai/v1",
        )
    return deployment, api_version


def _quota_limits(lim: Section) -> QuotaLimits:
    """A provider's `limits`: per-minute rpm, tpm, itpm, otpm and, if known, its `burst_seconds`."""
    burst = lim.number("burst_seconds")
    if burst is not None and burst > 60:
        lim.fail("burst_seconds", f"must be at most 60 (the limits are per minute), got {burst:g}")
    return QuotaLimits(
        rpm=lim.number("rpm"),
        tpm=lim.number("tpm"),
        itpm=lim.number("itpm"),
        otpm=lim.number("otpm"),
        burst_seconds=burst,
    )
