"""The emulator's own tests (a package, so its conftest and the suite's top-level one are two modules)."""
