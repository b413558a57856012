"""The emulator's check of a SigV4-signed request (Bedrock's): the `Authorization` header present
and shaped as SigV4, its access key the configured one, its signature the one botocore's signer
computes from the request as received with the configured secret key.

Shape (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html,
shared/PROTOCOLS.md "AWS Bedrock"): `AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/bedrock/
aws4_request, SignedHeaders=a;b;c, Signature=HEX`, with `X-Amz-Date`. The answers, as AWS gives
them (403s; https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html):
no header `MissingAuthenticationTokenException`, a malformed one `IncompleteSignatureException`,
an unknown key `UnrecognizedClientException`, a wrong signature `InvalidSignatureException`.
The emulator's credentials are its provider's `api_key: "ACCESS_KEY_ID:SECRET_ACCESS_KEY"`; the
request's time is not checked against the clock (a test may run on a FakeClock). botocore (the
`bedrock` extra) is imported on the first signed request checked.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/,\s]+)/"
    r"(?P<service>[^/,\s]+)/aws4_request,\s*SignedHeaders=(?P<signed>[a-z0-9;._-]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)
SERVICE = "bedrock"
BAD_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. Check your AWS "
    "Secret Access Key and signing method. Consult the service documentation for details."
)


class SignatureRefused(Exception):
    """The request's signature is refused: `error_type` names the AWS error, the message its text."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass(frozen=True, slots=True)
class Signed:
    """What the Authorization header says."""

    key: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str


def parse_authorization(headers: Mapping[str, str]) -> Signed:
    """The SigV4 Authorization header of a request, checked for shape."""
    value = headers.get("Authorization")
    if not value:
        raise SignatureRefused("MissingAuthenticationTokenException", "Missing Authentication Token")
    found = _AUTH.match(value.strip())
    if found is None or not headers.get("X-Amz-Date"):
        raise SignatureRefused(
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters "
            "and an X-Amz-Date header.",
        )
    if found["service"] != SERVICE:
        raise SignatureRefused(
            "InvalidSignatureException", f"Credential should be scoped to correct service: '{SERVICE}'."
        )
    signed = tuple(found["signed"].split(";"))
    return Signed(found["key"], found["region"], found["service"], signed, found["signature"])


def credentials(api_key: str) -> tuple[str, str]:
    """(access key id, secret access key) of an emulated Bedrock provider's `api_key`."""
    key_id, _, secret = api_key.partition(":")
    return key_id, secret


def verify(api_key: str, method: str, url: str, headers: Mapping[str, str], body: bytes) -> None:
    """Raise `SignatureRefused` unless the request is signed with `api_key`'s credentials.
    `url`: scheme, host and the raw path and query as received."""
    signed = parse_authorization(headers)
    key_id, secret = credentials(api_key)
    if signed.key != key_id:
        raise SignatureRefused(
            "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    from botocore.auth import SigV4Auth  # noqa: PLC0415 — optional extra: only for a Bedrock provider
    from botocore.awsrequest import AWSRequest  # noqa: PLC0415 — optional extra (see above)
    from botocore.credentials import Credentials  # noqa: PLC0415 — optional extra (see above)

    kept = {name: headers.get(name, "") for name in signed.signed_headers}
    request = AWSRequest(method=method, url=url, data=body, headers=kept)
    request.context["timestamp"] = headers["X-Amz-Date"]
    auth = SigV4Auth(Credentials(key_id, secret), signed.service, signed.region)
    expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    if not hmac.compare_digest(expected, signed.signature):
        raise SignatureRefused("InvalidSignatureException", BAD_SIGNATURE)
