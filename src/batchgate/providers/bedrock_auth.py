"""SigV4 for a `kind: bedrock` provider: its region, its credentials from the standard AWS chain
and the signed headers of one request — all through `botocore` (the `bedrock` extra), imported
when the first Bedrock client is made, never by a gateway without one.

The signing name is `bedrock` for the Runtime endpoint (shared/PROTOCOLS.md "AWS Bedrock";
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html). The region comes from the
entry's `region:`, else the host `bedrock-runtime.{region}.amazonaws.com`, else the chain's
(`AWS_DEFAULT_REGION`, the profile's `region`). Credentials: botocore's chain (environment,
shared files and `aws_profile:`, SSO, container and instance roles); a refreshable one is
refreshed by botocore when it nears its expiry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from batchgate.config import ProviderConfig
from batchgate.errors import ConfigError

SERVICE = "bedrock"
_HOST_REGION = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com")
_INSTALL = "pip install 'batchgate[bedrock]'"


def url_region(url: str) -> str | None:
    """The region an AWS Bedrock Runtime URL names (None for any other host)."""
    found = _HOST_REGION.match(urlsplit(url).hostname or "")
    return found.group(1) if found else None


class SigV4Signer:
    """Signs requests for one provider with its credentials and region."""

    def __init__(self, config: ProviderConfig, base_url: str) -> None:
        where = f"providers.{config.name}"
        try:
            import botocore.session  # noqa: PLC0415 — optional extra, loaded for a bedrock provider only
            from botocore.auth import SigV4Auth  # noqa: PLC0415 — optional extra (see above)
            from botocore.awsrequest import AWSRequest  # noqa: PLC0415 — optional extra (see above)
        except ImportError:
            raise ConfigError("<config>", f"{where}.kind", f"bedrock needs botocore: {_INSTALL}") from None
        self._auth, self._request = SigV4Auth, AWSRequest
        settings = config.bedrock
        profile = settings.profile if settings is not None else None
        session = botocore.session.Session(profile=profile)
        region = (settings.region if settings else None) or url_region(base_url)
        region = region or session.get_config_variable("region")
        if not region:
            reason = "no AWS region: set region: or AWS_DEFAULT_REGION"
            raise ConfigError("<config>", f"{where}.region", reason)
        self.region: str = region
        credentials = session.get_credentials()
        if credentials is None:
            raise ConfigError(
                "<config>",
                where,
                "no AWS credentials found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, "
                "or a role)",
            )
        self._credentials: Any = credentials

    def sign(self, method: str, url: str, data: bytes, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` with `X-Amz-Date`, `Authorization` (and a session's `X-Amz-Security-Token`)."""
        request = self._request(method=method, url=url, data=data, headers=dict(headers))
        self._auth(self._credentials.get_frozen_credentials(), SERVICE, self.region).add_auth(request)
        return {k: str(v) for k, v in request.headers.items()}

    def __repr__(self) -> str:
        return f"SigV4Signer(region={self.region!r})"
