"""`batchgate run` imports aiohttp without parsing the system's CA bundle before its first request.

aiohttp builds two default SSL contexts when it is imported, each parsing the CA bundle (~30 ms
apiece, holding the GIL), although a job's first request often goes to an http:// target (the
embedded emulator, a local server) that never uses them. `import_aiohttp()` imports it with the CA
loading of the contexts made meanwhile deferred to their first use: such a context loads its CAs
just before it wraps its first connection, so an https request is verified exactly as before.
Only the CLI does this (a library user's process may make contexts of its own while importing).
"""

from __future__ import annotations

import importlib
import ssl
import sys
import threading
from collections.abc import Callable

_DEFERRED = "set_default_verify_paths"  # what create_default_context and aiohttp call to load CAs
_WRAPS = ("wrap_bio", "wrap_socket")  # a TLS connection starts with one of these


def import_aiohttp() -> None:
    """Import aiohttp, its import-time SSL contexts loading their CAs on first use; nothing to do
    when it is already imported."""
    if "aiohttp" in sys.modules:
        return
    made: list[ssl.SSLContext] = []

    def defer(ctx: ssl.SSLContext) -> None:  # a context made during the import: CAs not loaded yet
        made.append(ctx)

    cls: type[ssl.SSLContext] = ssl.SSLContext
    own = cls.__dict__.get(_DEFERRED)  # None: inherited from the C type, as in CPython
    setattr(cls, _DEFERRED, defer)
    try:
        importlib.import_module("aiohttp")
    finally:
        if own is None:
            delattr(cls, _DEFERRED)
        else:
            setattr(cls, _DEFERRED, own)
    for ctx in made:
        _load_on_first_use(ctx)


def _load_on_first_use(ctx: ssl.SSLContext) -> None:
    """Give `ctx` wrappers (instance attributes over the class's methods) that load its CAs, then
    step aside for good, before it wraps its first connection."""
    lock = threading.Lock()

    def load() -> None:
        with lock:
            if _WRAPS[0] in vars(ctx):
                for name in _WRAPS:
                    delattr(ctx, name)
                getattr(ctx, _DEFERRED)()

    def hook(name: str) -> Callable[..., object]:
        def wrap(*args: object, **kwargs: object) -> object:
            load()
            return getattr(ctx, name)(*args, **kwargs)

        return wrap

    for name in _WRAPS:
        setattr(ctx, name, hook(name))
