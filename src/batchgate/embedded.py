"""The embedded emulator a config may ask for (an `emulator:` section, providers whose base_url is
`emulator`): starting it, and the provider URLs it serves merged with the ones given — one place
for the gateway, batch mode and `batchgate cancel`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from batchgate.clock import Clock
from batchgate.config import GatewayConfig
from batchgate.errors import ConfigError

if TYPE_CHECKING:
    from batchgate.emulator import Emulator, EmulatorConfig


def embeds_emulator(config: GatewayConfig) -> bool:
    """Whether the config asks for an embedded emulator that one of its providers uses."""
    return config.emulator is not None and any(p.emulated for p in config.providers)


def check_embedded(config: GatewayConfig) -> EmulatorConfig | None:
    """The config's `emulator:` section read and checked (None when it has none), with every
    provider whose base_url is `emulator` served by it in the same API family: a `ConfigError`
    naming the key, raised before a job or a gateway exists."""
    if config.emulator is None:
        return None
    # start-up: the emulator's modules load only for a config with an emulator section
    from batchgate.emulator import emulator_config_from_dict  # noqa: PLC0415 — see above

    emulated = emulator_config_from_dict(config.emulator, source=f"{config.source}: emulator")
    served = {p.name: p.family for p in emulated.providers}
    entries = list(dict.fromkeys(p.entry_name for p in config.providers))  # the YAML's, in order
    for p in config.providers:
        if not p.emulated:
            continue
        name = p.entry_name  # a per-model quota is served by its entry's emulated provider
        i = entries.index(name)
        if name not in served:
            raise ConfigError(
                config.source,
                f"providers[{i}].base_url",
                f"is 'emulator' but the emulator section has no provider {name!r} "
                f"(it has: {', '.join(sorted(served))})",
            )
        if served[name] != p.kind:
            raise ConfigError(
                config.source,
                f"providers[{i}].kind",
                f"is {p.kind!r} but the emulator serves {name!r} as {served[name]!r}",
            )
    return emulated


def load_embedded(config: GatewayConfig) -> None:
    """Import the embedded emulator's modules now (~60 ms of CPU), if the config embeds one: a job
    does it while its store's thread waits on the disk, so the gateway's start finds them loaded."""
    if embeds_emulator(config):
        import batchgate.emulator.server  # noqa: F401, PLC0415 — start-up: only for a config that embeds one


async def start_embedded(config: GatewayConfig, clock: Clock | None = None) -> Emulator | None:
    """Start the config's embedded emulator (None when it has none or no provider uses it); the
    caller stops it with `await emulator.__aexit__(None, None, None)`."""
    emulated = check_embedded(config)
    if emulated is None or not embeds_emulator(config):
        return None

    # start-up: aiohttp.web and the emulator load only for a config that embeds one
    from batchgate.emulator import Emulator  # noqa: PLC0415 — see above

    emu = Emulator(emulated)
    await emu.__aenter__()
    return emu


def provider_urls(
    config: GatewayConfig, emulator: Emulator | None, given: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The base URL overrides: `given` first, then the embedded emulator's for emulated providers;
    a per-model quota (`entry/models`) has its entry's URL."""
    urls = dict(given or {})
    for p in config.providers:
        if p.name in urls:
            continue
        if p.entry_name in urls:
            urls[p.name] = urls[p.entry_name]
        elif emulator is not None and p.emulated:
            urls[p.name] = emulator.base_url(p.entry_name)
    return urls
