"""`BatchgateUDF` called as a Ray actor calls it, without Ray (fast): the cells Arrow hands over
(numpy arrays in nested lists, None for absent keys, NaN for absent text) become chat bodies,
answers and errors land in the right rows, and a closed UDF says so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

np = pytest.importorskip("numpy", reason="Ray Data is not installed (pip install 'batchgate[ray]')")
pd = pytest.importorskip("pandas", reason="Ray Data is not installed (pip install 'batchgate[ray]')")

from batchgate.integrations.ray import BatchgateUDF, row_body  # noqa: E402 — after the skips

pytestmark = pytest.mark.integration


@pytest.fixture
def udf() -> Iterator[BatchgateUDF]:
    provider = {"name": "p", "family": "openai", "latency": {"ttft_p50_ms": 0, "per_token_ms": 0}}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": [provider]}))
    emu.start()
    config: dict[str, Any] = {
        "providers": [{"name": "p", "kind": "openai", "base_url": emu.base_url("p"), "api_key": "sk-u"}],
        "routes": [{"model": "m", "targets": ["p"]}],
    }
    made = BatchgateUDF(config, quota="memory", model="m", max_tokens=8)
    try:
        yield made
    finally:
        made.close()
        emu.stop()


def test_arrow_shaped_cells_become_chat_bodies() -> None:
    message = {"role": "user", "content": "hi", "name": None}
    cell = {"model": "m", "messages": np.array([message], dtype=object), "temperature": np.float64(0.5)}
    body = row_body(cell, None, model=None, max_tokens=4)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.5,
        "max_tokens": 4,
    }
    assert row_body(float("nan"), "yo", model="m", max_tokens=None)["messages"] == [
        {"role": "user", "content": "yo"}
    ]
    with pytest.raises(ValueError, match="names no model"):
        row_body(None, "yo", model=None, max_tokens=None)
    with pytest.raises(ValueError, match="neither a request nor a prompt"):
        row_body(None, None, model="m", max_tokens=None)


def test_a_pandas_batch_comes_back_with_answers_and_errors_in_its_rows(udf: BatchgateUDF) -> None:
    batch = pd.DataFrame(
        {
            "id": [0, 1, 2, 3],
            "prompt": ["echo zero", None, "echo two", "echo three"],
            "request": [
                None,
                '{"model": "m", "messages": [{"role": "user", "content": "echo one"}]}',
                "[1]",
                None,
            ],
        }
    )
    out = udf(batch)
    assert list(out["id"]) == [0, 1, 2, 3]
    assert list(out["answer"]) == ["echo: echo zero", "echo: echo one", None, "echo: echo three"]
    assert list(out["error"]) == [None, None, "input: the request column holds list, not a chat body", None]
    assert out["usage"][1]["completion_tokens"] > 0
    assert list(out["provider"]) == ["p", "p", None, "p"]


def test_a_numpy_batch_keeps_its_columns_and_a_closed_udf_says_so(udf: BatchgateUDF) -> None:
    batch = {"id": np.array([5, 6]), "prompt": np.array(["echo a", "echo b"], dtype=object)}
    out = udf(batch)
    assert list(out["id"]) == [5, 6]
    assert list(out["answer"]) == ["echo: echo a", "echo: echo b"]
    assert out["error"].dtype == object
    udf.close()
    with pytest.raises(RuntimeError, match="closed"):
        udf(batch)
