"""A `kind: gemini` provider entry's own keys: `vertex: true` with its `project` and `location`
(Vertex AI, a bearer token from google-auth), or none of them (AI Studio, `x-goog-api-key`).

    - name: gemini
      kind: gemini
      base_url: https://generativelanguage.googleapis.com     # AI Studio
      api_key_env: GEMINI_API_KEY
    - name: vertex
      kind: gemini
      vertex: true
      project: my-project
      location: us-central1
      base_url: https://us-central1-aiplatform.googleapis.com

(https://ai.google.dev/api, https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest)
"""

from __future__ import annotations

import re

from batchgate.config.schema import VertexTarget
from batchgate.config.section import Section, type_name

GEMINI_KEYS = ("vertex", "project", "location")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def read_vertex(s: Section, kind: str) -> VertexTarget | None:
    """The entry's Vertex AI target, or None (AI Studio); the keys are refused on other kinds."""
    vertex = s.raw("vertex")
    if vertex is not None and not isinstance(vertex, bool):
        s.fail("vertex", f"must be true or false, got {type_name(vertex)}")
    project, location = s.string("project"), s.string("location")
    if kind != "gemini":
        for key, value in (("vertex", vertex), ("project", project), ("location", location)):
            if value is not None:
                s.fail(key, "is only for kind: gemini")
        return None
    if not vertex:
        for key, value in (("project", project), ("location", location)):
            if value is not None:
                s.fail(key, "is only for a Vertex AI entry (vertex: true)")
        return None
    for key, value in (("project", project), ("location", location)):
        if value is None:
            s.fail(key, "is required with vertex: true")
        elif not _NAME.match(value):
            s.fail(key, f"must be a Google Cloud {key} id such as us-central1, got {value!r}")
    if s.raw("batch_api") is True:
        s.fail("batch_api", "Vertex AI's batch prediction reads Cloud Storage or BigQuery: not supported")
    assert project is not None
    assert location is not None
    return VertexTarget(project, location)
