"""What the emulated Gemini wire reads from a `generateContent` body beyond its texts: the ranges
its `generationConfig` must keep (temperature in [0, 2], topP in [0, 1], as
https://ai.google.dev/api/generate-content#generationconfig gives them), and the function a
request forces (`toolConfig.functionCallingConfig.mode` ANY), which the emulator answers with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.emulator.wire import ApiError


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)


def check_ranges(config: Mapping[str, Any]) -> None:
    """temperature in [0, 2] and topP in [0, 1], as the reference gives them."""
    for names, top in ((("temperature",), 2.0), (("topP", "top_p"), 1.0)):
        for name in names:
            value = config.get(name)
            if value is not None and (not isinstance(value, int | float) or not 0 <= value <= top):
                raise _invalid(f"* GenerateContentRequest.generation_config.{name}: must be in [0, {top:g}]")


def forced_call(body: Mapping[str, Any]) -> str | None:
    """The function a body forces (`functionCallingConfig.mode` ANY): its first allowed one, else
    its first declared one; None when it forces none."""
    tool_config = body.get("toolConfig") or body.get("tool_config")
    config = tool_config.get("functionCallingConfig") if isinstance(tool_config, Mapping) else None
    if not isinstance(config, Mapping) or config.get("mode") != "ANY":
        return None
    allowed = config.get("allowedFunctionNames") or []
    if allowed and isinstance(allowed[0], str):
        return str(allowed[0])
    for tool in body.get("tools") or []:
        for declaration in tool.get("functionDeclarations") or [] if isinstance(tool, Mapping) else []:
            if isinstance(declaration, Mapping) and isinstance(declaration.get("name"), str):
                return str(declaration["name"])
    return None
