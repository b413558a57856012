"""A small client of the native job API (`/v1/jobs`) over real sockets, as a user scripts it with
httpx, for the job tests."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from waiting import poll

from .harness import Server, batch_line

JOB_ENDED = ("completed", "failed", "cancelled")


class JobsClient:
    def __init__(self, server: Server, key: str) -> None:
        self.http = httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )

    def close(self) -> None:
        self.http.close()

    def create(self, **body: Any) -> dict[str, Any]:
        r = self.http.post("/jobs", json=body)
        assert r.status_code == 201, r.text
        data: dict[str, Any] = r.json()
        return data

    def get(self, job_id: str) -> dict[str, Any]:
        r = self.http.get(f"/jobs/{job_id}")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data

    def act(self, job_id: str, action: str) -> httpx.Response:
        return self.http.post(f"/jobs/{job_id}/{action}")

    def find(self, **params: Any) -> dict[str, Any]:
        r = self.http.get("/jobs", params=params)
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data

    def results(self, job_id: str) -> list[dict[str, Any]]:
        r = self.http.get(f"/jobs/{job_id}/results")
        assert r.status_code == 200, r.text
        return [orjson.loads(line) for line in r.content.splitlines() if line.strip()]

    def wait_state(self, job_id: str, states: tuple[str, ...] = JOB_ENDED) -> dict[str, Any]:
        """Poll the job as a user does, bounded (never a timing assertion)."""
        return poll(
            lambda: self.get(job_id),
            lambda job: job["state"] in states,
            lambda job: f"job {job_id}: {job['state']}",
        )


def requests_for(model: str, n: int, prefix: str = "req") -> list[dict[str, Any]]:
    lines = [batch_line(i, model) for i in range(n)]
    for line in lines:
        line["custom_id"] = f"{prefix}-{line['custom_id']}"
    return lines
