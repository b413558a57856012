"""Adapters that let other frameworks drive a batchgate Gateway (optional extras).

May import: `gateway` and everything below it. Not `jobs` or `cli`.
"""
