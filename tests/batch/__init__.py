"""Tests of the Batch API clients and the emulated Batch APIs."""
