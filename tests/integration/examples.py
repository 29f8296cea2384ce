"""docs/report-example/ against what the current code writes (`make report-example` regenerates it: tests/report_example.py).

The integration tests that make the same runs (tests/integration/test_gpu_demo.py) compare their reports with the
examples: the same checks in the same order, the same top-level fields, the same sections. Times, UUIDs and names
differ from run to run and are not compared. tests/unit/test_report_examples.py checks, without a cluster, that each
example's Markdown and SVG are what the current templates write from its JSON.
"""
from __future__ import annotations

import json
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
EXAMPLES = CHECKOUT / "docs" / "report-example"
# The per-node examples: name -> (topology, language); files gpu-demo-prod102-example-<name>.{json,md,svg}.
PER_NODE = {"en-4gpus": ("four-gpus", "en"), "zh": ("default", "zh"), "dra-zh": ("dra", "zh"),
            "dra-failed-zh": ("dra-unregistered", "zh")}
# The examples of a run that fails (the DRA driver the kubelet does not know: the hold is bound, never prepared).
FAILING = ("dra-failed-zh",)
STALE = "docs/report-example is not what the current code writes: run `make report-example` and commit the result"


def headings(markdown: str) -> list:
    """The Markdown's headings, outside code blocks."""
    found, in_code = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.append(line)
    return found


def example(name: str) -> tuple:
    """(result, markdown) of a per-node example."""
    base = EXAMPLES / f"gpu-demo-prod102-example-{name}"
    return json.loads(base.with_suffix(".json").read_text()), base.with_suffix(".md").read_text()


def matches_example(result: dict, markdown: str, name: str) -> None:
    """A run's report is shaped as the committed example of the same run: checks, fields, sections."""
    committed, committed_markdown = example(name)
    assert [check["id"] for check in result["checks"]] == [check["id"] for check in committed["checks"]], STALE
    assert sorted(result) == sorted(committed), STALE
    assert headings(markdown) == headings(committed_markdown), STALE
