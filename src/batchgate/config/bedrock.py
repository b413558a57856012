"""A `kind: bedrock` entry's own keys: `region`, `aws_profile` and `stream` (ConverseStream rather
than Converse), read into `BedrockSettings`; on any other kind they are a one-line error."""

from __future__ import annotations

from dataclasses import dataclass

from batchgate.config.section import Section, type_name

BEDROCK_KEYS = frozenset({"region", "aws_profile", "stream"})


@dataclass(frozen=True, slots=True)
class BedrockSettings:
    """Where and as whom a Bedrock provider signs: `region` (None: from its URL or the AWS
    chain), `profile` (None: the chain's default), and whether it asks ConverseStream."""

    region: str | None = None
    profile: str | None = None
    stream: bool = False


def read_bedrock(s: Section, kind: str) -> BedrockSettings | None:
    """The entry's Bedrock settings (None for another kind, which may not set them)."""
    if kind != "bedrock":
        for key in sorted(BEDROCK_KEYS):
            if s.has(key):
                s.fail(key, "is only for kind: bedrock")
        return None
    if s.raw("batch_api") is True:
        s.fail("batch_api", "Bedrock's batch inference (S3 jobs) is not supported: live Converse only")
    stream = s.raw("stream")
    if stream is not None and not isinstance(stream, bool):
        s.fail("stream", f"must be true or false, got {type_name(stream)}")
    return BedrockSettings(s.string("region"), s.string("aws_profile"), bool(stream))
