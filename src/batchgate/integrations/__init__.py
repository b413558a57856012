"""Adapters that let other frameworks drive a batchgate Gateway (optional extras).

May import: the gateway and everything below it; not `jobs` or `cli`.
"""
