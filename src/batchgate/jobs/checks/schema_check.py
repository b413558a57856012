"""A job's output JSON Schema, compiled once when the job is made, as data that reaches nothing:

- every `$ref` (`$dynamicRef`, `$recursiveRef`) must start with `#` — a reference to a file or a
  URL is refused, and the validator's `referencing.Registry` retrieves nothing, so no check ever
  opens a file or a socket;
- every reference must land on a schema (an object or a boolean) that is itself valid, or the
  job is refused at creation — never an error at the first answer;
- `pattern` and `patternProperties` are compiled on the `regex` engine and matched with a time
  limit (`safe_regex`), in place of jsonschema's own `re` calls;
- a refusal names the place in the schema (a JSON pointer) and never quotes the document.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import jsonschema
import orjson
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import ValidationError

from batchgate.jobs.checks import safe_regex

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from jsonschema.validators import _Validator  # a compiled validator (only in the stubs: made by `create`)
    from referencing import Specification
    from referencing._core import Resolver  # not re-exported; `referencing.typing` imports it so
    from referencing.jsonschema import Schema

_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_DATA = frozenset({"const", "enum", "default", "examples"})  # values that are data, not schemas


class SchemaRefused(ValueError):
    """Why a schema cannot be used, in one line naming where in it: not a valid JSON Schema, it
    would reach outside itself, or its patterns cannot be run safely (a 400 from the server)."""


def compile_schema(schema: Mapping[str, object]) -> _Validator:
    """A validator of `schema` that retrieves nothing and matches patterns safely; compiled once
    per process (the server compiles a job's schema when it is made, its run finds it here)."""
    try:
        text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # from YAML: a key that is not a string, a number JSON cannot hold
        raise SchemaRefused(f"not JSON data ({exc})") from None
    return _compiled(text)


@functools.lru_cache(maxsize=64)
def _compiled(text: bytes) -> _Validator:
    as_dict = orjson.loads(text)
    base = jsonschema.validators.validator_for(as_dict)
    try:
        base.check_schema(as_dict)
    except jsonschema.SchemaError as exc:
        raise SchemaRefused(
            f"not a valid JSON Schema at {_where(exc.absolute_path)}: {exc.message[:200]}"
        ) from None
    specification: Specification[Schema] = referencing.jsonschema.specification_with(
        str(base.META_SCHEMA.get("$id", "")), default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(as_dict)
    resolver = referencing.Registry().resolver_with_root(root)  # retrieves nothing
    keywords: set[str] = set()
    for path, node, here in _walk(as_dict, resolver, specification, ""):
        _check_refs(path, node, here, base)
        _check_patterns(path, node)
        keywords.update(k for k in ("unevaluatedProperties", "patternProperties") if k in node)
    if len(keywords) == 2:  # jsonschema matches the patterns of unevaluatedProperties with `re`
        raise SchemaRefused("'unevaluatedProperties' in a schema with 'patternProperties' is not supported")
    safe = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base,
        {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional},
    )
    validator: _Validator = safe(as_dict, registry=referencing.Registry())
    _probe(validator)
    return validator


def _probe(validator: _Validator) -> None:
    """Run the check once on small values: a schema whose references lead back to themselves
    without end (`{"$ref": "#"}`) is refused now, not found at every answer."""
    probes: tuple[object, ...] = (None, 0, "", [], {})
    for value in probes:
        try:
            next(iter(validator.iter_errors(value)), None)
        except RecursionError:
            raise SchemaRefused("its references lead back to themselves without end") from None
        except Exception as exc:  # said by kind: the schema's own text is not quoted
            raise SchemaRefused(f"it cannot check a value ({type(exc).__name__})") from None


def _walk(
    node: object, resolver: Resolver[Schema], specification: Specification[Schema], path: str
) -> Iterator[tuple[str, dict[str, object], Resolver[Schema]]]:
    """Every object of the schema (data keywords skipped), with the resolver of its base URI."""
    if isinstance(node, dict):
        if path and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(specification.create_resource(node))
        yield path, node, resolver
        for key, value in node.items():
            if key not in _DATA:
                yield from _walk(value, resolver, specification, f"{path}/{_escape(str(key))}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, resolver, specification, f"{path}/{i}")


def _check_refs(
    path: str, node: dict[str, object], resolver: Resolver[Schema], base: type[Validator]
) -> None:
    for key in _REFS:
        ref = node.get(key)
        if not isinstance(ref, str):
            continue
        where = f"{path}/{key}"
        if not ref.startswith("#"):
            raise SchemaRefused(
                f"at {where}: only references inside the schema (starting with '#') are allowed; "
                f"{_shown(ref)} would be fetched, and nothing is fetched"
            )
        try:
            target = resolver.lookup(ref).contents
        except referencing.exceptions.Unresolvable:
            raise SchemaRefused(f"at {where}: {_shown(ref)} points to nothing in the schema") from None
        if isinstance(target, bool):
            continue
        if not isinstance(target, dict):
            raise SchemaRefused(
                f"at {where}: {_shown(ref)} points to a {type(target).__name__}, not a schema"
            )
        try:
            base.check_schema(target)
        except jsonschema.SchemaError as exc:
            raise SchemaRefused(
                f"at {where}: {_shown(ref)} points to an invalid schema: {exc.message[:120]}"
            ) from None


def _check_patterns(path: str, node: dict[str, object]) -> None:
    pattern, properties = node.get("pattern"), node.get("patternProperties")
    patterns = [("pattern", pattern)] if isinstance(pattern, str) else []
    if isinstance(properties, dict):
        patterns += [("patternProperties", str(p)) for p in properties]
    for key, pattern in patterns:
        try:
            safe_regex.compile_pattern(pattern)
        except safe_regex.PatternTooLarge as exc:
            raise SchemaRefused(f"at {path}/{key}: a pattern too large to compile ({exc})") from None
        except (ValueError, TypeError) as exc:
            raise SchemaRefused(f"at {path}/{key}: not a usable regular expression ({exc})") from None


def _pattern(
    validator: _Validator, pattern: str, instance: object, schema: Mapping[str, object]
) -> Iterator[ValidationError]:
    if (
        validator.is_type(instance, "string")
        and isinstance(instance, str)
        and not safe_regex.search(pattern, instance)
    ):
        yield ValidationError(f"{instance[:80]!r} does not match {pattern[:80]!r}")


def _pattern_properties(
    validator: _Validator, patterns: dict[str, Schema], instance: object, schema: Mapping[str, object]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object") or not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if safe_regex.search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(
    validator: _Validator, additional: Schema, instance: object, schema: Mapping[str, object]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object") or not isinstance(instance, dict):
        return
    properties, pattern_properties = schema.get("properties", {}), schema.get("patternProperties", {})
    known = properties if isinstance(properties, dict) else {}  # a checked schema: always objects
    patterns = list(pattern_properties) if isinstance(pattern_properties, dict) else []
    extras = [k for k in instance if k not in known and not any(safe_regex.search(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = ", ".join(repr(e[:40]) for e in sorted(extras)[:5])
        yield ValidationError(f"Additional properties are not allowed ({names} unexpected)")


def _where(path: Iterable[str | int]) -> str:
    return "/".join(str(p) for p in path) or "(root)"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _shown(ref: str) -> str:
    return repr(ref[:80] + ("..." if len(ref) > 80 else ""))
