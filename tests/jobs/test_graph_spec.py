"""Pipeline files and templates: safe rendering, dependencies, conditions, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchgate.errors import ConfigError
from batchgate.jobs.graph.spec import Condition, Graph, fanout_graph, load_pipeline
from batchgate.jobs.graph.template import MissingField, Template, TemplateSyntaxError


def test_template_renders_fields_and_step_answers_only_by_lookup() -> None:
    t = Template.parse("Review {{ meta.id }}: {{text}} -> {{ steps.classify.answer }} {{ tags.1 }}")
    data = {"meta": {"id": 7}, "text": "ok", "steps": {"classify": {"answer": "neutral"}}, "tags": ["a", "b"]}
    assert t.render(data) == "Review 7: ok -> neutral b"
    assert t.step_refs() == {"classify"}
    with pytest.raises(MissingField, match=r"text\.__class__"):
        Template.parse("{{ text.__class__ }}").render({"text": "x"})  # no attribute access, ever
    assert Template.parse("{{ a }}").render({"a": "{{ b }}", "b": "no"}) == "{{ b }}"  # data is not re-read


@pytest.mark.parametrize(
    "source",
    ["{{ a + b }}", "{{ a() }}", "{{ a | upper }}", "{{ {{ a }} }}", "{{ open('x') }}", "{{ a ", "b }}"],
)
def test_template_refuses_anything_but_a_path(source: str) -> None:
    with pytest.raises(TemplateSyntaxError):
        Template.parse(source)


def test_condition_compares_normalised_answers() -> None:
    when = Condition("classify", ("Negative",))
    assert when.holds(" negative.\n")
    assert not when.holds("positive")
    assert Condition("c", (), not_equals="neutral").holds("positive")
    assert not Condition("c", (), not_equals="neutral").holds("Neutral")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_pipeline_file_round_trips_and_derives_dependencies(tmp_path: Path) -> None:
    graph = load_pipeline(_write(tmp_path, """
steps:
  - {name: classify, route: a, prompt: "Classify: {{ text }}", validate: "^(yes|no)$"}
  - name: summary
    route: b
    prompt: "Summarise: {{ text }} ({{ steps.classify.answer }})"
    when: {step: classify, in: ["no", maybe]}
  - {name: other, route: a, prompt: "{{ text }}"}
"""))  # fmt: skip
    assert [s.name for s in graph.roots()] == ["classify", "other"]
    assert [s.name for s in graph.dependents("classify")] == ["summary"]
    assert Graph.from_dict(graph.to_dict()) == graph
    fanout = fanout_graph(["gpt-4.1-nano", "claude-3-5-haiku"])
    assert fanout.roots() == list(fanout.steps)
    assert Graph.from_dict(fanout.to_dict()) == fanout  # a job remembers it: resume rebuilds it


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("steps: []", "steps"),
        ("steps:\n  - {name: a, route: r}", "steps[0].prompt"),
        ("steps:\n  - {name: a, route: r, prompt: '{{ steps.b.answer }}'}", "steps[0].prompt"),
        ("steps:\n  - {name: a, route: r, prompt: x, when: {step: a, equals: y}}", "steps[0].when"),
        ("steps:\n  - {name: a, route: r, prompt: '{{ steps.a.text }}'}", "steps[0].prompt"),
        ("steps:\n  - {name: a, route: r, prompt: x, validate: '('}", "steps[0].validate"),
        ("steps:\n  - {name: a, route: r, prompt: x}\n  - {name: a, route: r, prompt: x}", "steps[1].name"),
        ("steps:\n  - {name: a, route: r, prompt: x, colour: red}", "steps[0]"),
    ],
)
def test_bad_pipelines_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_pipeline(_write(tmp_path, text))
    assert info.value.key.startswith(key)
