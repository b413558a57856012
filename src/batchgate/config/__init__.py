"""Configuration: the schema (frozen value objects), and reading YAML/JSON into it once, at the edge.

May import: `batchgate.errors` and the policy value objects (`batchgate.policy`). Nothing else of
batchgate; everything else may import this.
"""
