"""The dashboard's static files, shipped as package data: read by name from `static/` (only the
files listed there are served; a name never walks out of the folder)."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
}


def _root() -> Traversable:
    return resources.files("batchgate.web").joinpath("static")


def _walk(folder: Traversable, prefix: str) -> dict[str, Traversable]:
    found: dict[str, Traversable] = {}
    for item in folder.iterdir():
        if item.is_dir():
            found.update(_walk(item, f"{prefix}{item.name}/"))
        elif any(item.name.endswith(ext) for ext in TYPES):
            found[prefix + item.name] = item
    return found


def asset_names() -> dict[str, Traversable]:
    """Every servable file, by its path under `static/` (e.g. `vendor/uPlot.min.css`)."""
    return _walk(_root(), "")


def read_asset(name: str) -> bytes:
    """One static file's bytes (a KeyError for a name that is not one of them)."""
    return asset_names()[name].read_bytes()


def content_type(name: str) -> str:
    return next((t for ext, t in TYPES.items() if name.endswith(ext)), "application/octet-stream")
