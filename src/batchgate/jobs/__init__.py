"""Durable jobs: the job store seam and its backends, input reading, group commit and outputs."""
