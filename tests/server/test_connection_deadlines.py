"""The connection door's decision (`door.connections.deadline`), without sockets or sleeping."""

from __future__ import annotations

from batchgate.server.door.connections import ConnectionLimits, deadline

LIMITS = ConnectionLimits(head_timeout_s=20.0, body_timeout_s=30.0)


def test_between_requests_the_head_is_due_from_the_start_whatever_bytes_came() -> None:
    assert deadline(LIMITS, in_request=False, since=100.0, last_byte=119.0, body_pending=False) == 120.0


def test_a_body_being_read_is_due_from_its_last_byte() -> None:
    assert deadline(LIMITS, in_request=True, since=100.0, last_byte=150.0, body_pending=True) == 180.0


def test_a_request_whose_body_has_all_arrived_has_no_deadline() -> None:
    """A live request waiting on its provider for minutes is not the client's stall."""
    assert deadline(LIMITS, in_request=True, since=100.0, last_byte=150.0, body_pending=False) is None
