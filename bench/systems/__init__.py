"""One small module per compared system; each exposes `run(spec, rec)` (see `systems.common`)."""
