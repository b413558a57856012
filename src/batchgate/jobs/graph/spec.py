"""What a fan-out or a pipeline is: named steps, each on a route, with what it reads and when it runs.

A fan-out is a graph of independent steps, one per route, each sending the input line's own
request to its route. A pipeline's steps render a prompt `Template` over the input fields and
earlier steps' answers, may carry a condition (`when: {step, equals | not_equals | in}`, compared
case-insensitively with surrounding whitespace and a final period ignored) and an output check
(`validate: REGEX`). A step depends on the steps its templates and condition name, which must come
before it in the file: the graph is a DAG by construction. Pure data; `to_dict`/`from_dict` let a
job remember its graph in the store, so `resume` needs neither the flag nor the file again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import yaml

from batchgate.config.section import Section
from batchgate.errors import ConfigError
from batchgate.jobs.graph.template import Template, TemplateSyntaxError

FANOUT = "fanout"
PIPELINE = "pipeline"
MAX_STEPS = 64
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_STEP_KEYS = frozenset({"name", "route", "prompt", "system", "max_tokens", "when", "validate"})
_WHEN_KEYS = frozenset({"step", "equals", "not_equals", "in"})


def normalise_answer(text: str) -> str:
    """How answers are compared (conditions, agreement): trimmed, lower case, no final period."""
    return text.strip().rstrip(".").strip().lower()


@dataclass(frozen=True, slots=True)
class Condition:
    step: str
    equals: tuple[str, ...] = ()  # any of these (equals / in)
    not_equals: str | None = None

    def holds(self, answer: str) -> bool:
        value = normalise_answer(answer)
        if self.not_equals is not None and value == normalise_answer(self.not_equals):
            return False
        return not self.equals or value in {normalise_answer(v) for v in self.equals}


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    route: str
    prompt: str | None = None  # None: send the input line's own request (fan-out)
    system: str | None = None
    max_tokens: int | None = None
    when: Condition | None = None
    validate: str | None = None

    def templates(self) -> list[Template]:
        return [Template.parse(t) for t in (self.prompt, self.system) if t is not None]

    def needs(self) -> tuple[str, ...]:
        """The steps whose answers this one waits for, sorted."""
        refs: set[str] = set()
        for t in self.templates():
            refs |= t.step_refs()
        if self.when is not None:
            refs.add(self.when.step)
        return tuple(sorted(refs))


# A step's condition as kept: `in` is a keyword, hence the functional form.
ConditionDoc = TypedDict("ConditionDoc", {"step": str, "in": list[str], "not_equals": str}, total=False)


class StepDoc(TypedDict, total=False):
    """A step as the job's options keep it (`Graph.to_dict`): the given fields only."""

    name: str
    route: str
    prompt: str
    system: str
    max_tokens: int
    validate: str
    when: ConditionDoc


class GraphDoc(TypedDict):
    kind: str
    steps: list[StepDoc]


@dataclass(frozen=True, slots=True)
class Graph:
    kind: str  # FANOUT | PIPELINE
    steps: tuple[Step, ...]

    @property
    def width(self) -> int:
        return len(self.steps)

    def index(self, name: str) -> int:
        return next(i for i, s in enumerate(self.steps) if s.name == name)

    def roots(self) -> list[Step]:
        return [s for s in self.steps if not s.needs()]

    def dependents(self, name: str) -> list[Step]:
        return [s for s in self.steps if name in s.needs()]

    def routes(self) -> list[str]:
        return sorted({s.route for s in self.steps})

    def to_dict(self) -> GraphDoc:
        return {"kind": self.kind, "steps": [_step_dict(s) for s in self.steps]}

    @classmethod
    def from_dict(cls, data: Mapping[str, object], source: str = "job options") -> Graph:
        return parse_steps(data.get("steps"), source, kind=str(data.get("kind", PIPELINE)))


def _step_dict(s: Step) -> StepDoc:
    out: StepDoc = {"name": s.name, "route": s.route}
    if s.prompt is not None:
        out["prompt"] = s.prompt
    if s.system is not None:
        out["system"] = s.system
    if s.max_tokens is not None:
        out["max_tokens"] = s.max_tokens
    if s.validate is not None:
        out["validate"] = s.validate
    if s.when is not None:
        when = ConditionDoc(step=s.when.step)
        if s.when.equals:
            when["in"] = list(s.when.equals)
        if s.when.not_equals is not None:
            when["not_equals"] = s.when.not_equals
        out["when"] = when
    return out


def fanout_graph(routes: Sequence[str], source: str = "--fanout") -> Graph:
    """One independent step per route, each named after its route."""
    names = [r.strip() for r in routes if r.strip()]
    if len(names) < 2:
        raise ConfigError(source, "", "a fan-out needs at least two routes")
    if len(set(names)) != len(names):
        raise ConfigError(source, "", f"a route is named twice: {', '.join(names)}")
    return Graph(FANOUT, tuple(Step(name=r, route=r) for r in names))


def load_pipeline(path: Path) -> Graph:
    """Read a pipeline file (`steps: [...]`); errors name the file and the key."""
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(source, "", "file not found") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(source, "", f"cannot read the pipeline ({exc.__class__.__name__})") from None
    top = Section(data, source, "", frozenset({"steps"}))
    return parse_steps(top.items("steps", required=True), source, kind=PIPELINE)


def parse_steps(items: object, source: str, *, kind: str) -> Graph:
    if not isinstance(items, list) or not items:
        raise ConfigError(source, "steps", "must be a non-empty list")
    if len(items) > MAX_STEPS:
        raise ConfigError(source, "steps", f"at most {MAX_STEPS} steps")
    steps: list[Step] = []
    for i, item in enumerate(items):
        sec = Section(item, source, f"steps[{i}]", _STEP_KEYS)
        steps.append(_parse_step(sec, [s.name for s in steps], route_named=kind == FANOUT))
        if kind == PIPELINE and steps[-1].prompt is None:
            raise ConfigError(source, f"steps[{i}].prompt", "is required")
    return Graph(kind, tuple(steps))


def _parse_step(sec: Section, earlier: list[str], *, route_named: bool = False) -> Step:
    """One step; a fan-out's steps are named after their routes (which may hold dots)."""
    name = sec.string("name", required=True) or ""
    if not route_named and not _NAME.fullmatch(name):
        sec.fail("name", "must be letters, digits, '_' or '-', starting with a letter")
    if name in earlier:
        sec.fail("name", f"step {name!r} is defined twice")
    when = _parse_when(sec.section("when", _WHEN_KEYS)) if sec.has("when") else None
    step = Step(
        name=name,
        route=sec.string("route", required=True) or "",
        prompt=sec.string("prompt"),
        system=sec.string("system"),
        max_tokens=sec.integer("max_tokens"),
        when=when,
        validate=sec.string("validate"),
    )
    try:
        needs = step.needs()
    except TemplateSyntaxError as exc:
        sec.fail("prompt", str(exc))
    for t in step.templates():
        for path in t.paths:
            if path[0] == "steps" and (len(path) != 3 or path[2] != "answer"):
                sec.fail("prompt", f"{'.'.join(path)}: a step is read as steps.NAME.answer")
    for ref in needs:
        if ref not in earlier:
            sec.fail("when" if when and ref == when.step else "prompt", f"refers to step {ref!r}, "
                     "which is not an earlier step")  # fmt: skip
    if step.validate is not None:
        try:
            re.compile(step.validate)
        except re.error as exc:
            sec.fail("validate", f"invalid regular expression ({exc})")
    return step


def _parse_when(sec: Section) -> Condition:
    step = sec.string("step", required=True) or ""
    equals = [sec.string("equals")] if sec.has("equals") else []
    if sec.has("in"):
        raw = sec.items("in", required=True)
        values = [v for v in raw if isinstance(v, str)]
        if len(values) != len(raw):
            sec.fail("in", "must be a list of strings (quote words YAML reads as true/false: 'no', 'yes')")
        equals += values
    not_equals = sec.string("not_equals")
    if not equals and not_equals is None:
        sec.fail("", "needs one of: equals, not_equals, in")
    return Condition(step, tuple(e for e in equals if e is not None), not_equals)
