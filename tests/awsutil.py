"""The AWS credential chain for a test: `aws_only(keys)` makes it see the given access key and
secret and nothing of the machine (no config or credentials files, no instance role), as the
Bedrock tests over real HTTP need; `aws_env(key_id, secret)` is the same as a child's environment."""

from __future__ import annotations

import pytest

_UNSET = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION")


def aws_env(key_id: str, secret: str) -> dict[str, str]:
    """The variables that give a process (a child `batchgate`, say) these keys and no others."""
    return {
        "AWS_ACCESS_KEY_ID": key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def aws_only(monkeypatch: pytest.MonkeyPatch, key_id: str, secret: str) -> None:
    """This process's credential chain sees these keys only."""
    for name in _UNSET:
        monkeypatch.delenv(name, raising=False)
    for name, value in aws_env(key_id, secret).items():
        monkeypatch.setenv(name, value)
