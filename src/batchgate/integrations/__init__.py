"""Adapters that let other frameworks drive a batchgate Gateway (optional extras)."""
