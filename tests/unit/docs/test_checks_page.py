"""docs/checks.md against the registry of check ids and the code's messages.

One ``### <id>`` per registered check, under its phase's ``##`` heading, in the registry's order; each entry in English
and Chinese with the same labelled parts; and every message it quotes made of text the code really writes.
"""
import ast
import re
import string
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import CHECKS, PHASE_OF

CHECKOUT = Path(__file__).resolve().parents[3]
PAGE = CHECKOUT / "docs" / "checks.md"

# The parts of an entry, in order: (label, language). "shared" parts are written once for both languages.
PARTS = (
    ("**Proves:**", "en"), ("**证明：**", "zh"),
    ("**Evidence:**", "en"), ("**依据：**", "zh"),
    ("**Message / 报告原文:**", "shared"),
    ("**Common causes:**", "en"), ("**常见原因：**", "zh"),
    ("**Next:**", "en"), ("**下一步：**", "zh"),
)
CJK = re.compile(r"[\u4e00-\u9fff]")
PLACEHOLDER = re.compile(r"<[^<>]+>|\.\.\.")


def sections(text):
    """[(phase heading, check id, body)] of the page, in order (code blocks are not headings)."""
    found, phase, current, in_code = [], None, None, False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("## "):
            phase, current = line, None
            continue
        if not in_code and line.startswith("### "):
            current = [phase, line[4:].strip(), []]
            found.append(current)
            continue
        if current is not None:
            current[2].append(line)
    return [(phase, check_id, "\n".join(body)) for phase, check_id, body in found]


def parts(body):
    """{label: text} of an entry, each part up to the next label (the code block after the last part stays with it)."""
    positions = [(body.find(label), label) for label, _lang in PARTS]
    missing = [label for index, label in positions if index < 0]
    assert not missing, "missing " + ", ".join(missing)
    assert [label for _index, label in sorted(positions)] == [label for label, _lang in PARTS], "parts out of order"
    ordered = sorted(positions)
    return {label: body[index + len(label):(ordered[n + 1][0] if n + 1 < len(ordered) else len(body))].strip()
            for n, (index, label) in enumerate(ordered)}


def messages(message_part):
    return re.findall(r"^- `([^`]+)`$", message_part, flags=re.M)


# Where each phase's messages are written: its judge, the helpers it phrases with, and the tasks whose errors become
# a check's detail (the ledger read, the inference server's health, the waits); the role's tasks for the YAML checks.
_PLUGINS = "plugins/"
_DEMO = "plugin_utils/_gpu_demo/"
_KUBE = "module_utils/_kubernetes/"
SOURCES = {
    "preflight": tuple(_DEMO + name for name in ("preflight.py", "judging.py", "dra.py"))
    + tuple(_KUBE + name for name in ("ledger.py", "dra_ledger.py", "client.py"))
    + ("module_utils/_inference/health.py",),
    "walk": tuple(_DEMO + name for name in ("walk.py", "device_health.py", "dra.py", "report.py", "cleanup.py", "judging.py"))
    + tuple(_KUBE + name for name in ("pod_wait.py", "unit_claims.py", "lease.py", "client.py"))
    + ("module_utils/_tasks/pod_wait.py",),
}


def code_texts(sources):
    """Every literal text these files can write, whole: Python string constants split at their format fields, and the
    quoted strings of the role's Jinja expressions."""
    texts = []
    for name in sources:
        path = CHECKOUT / _PLUGINS / name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                try:
                    texts.extend(literal for literal, _field, _spec, _conv in string.Formatter().parse(node.value))
                except ValueError:
                    texts.append(node.value)
    for path in sorted((CHECKOUT / "roles").glob("*/tasks/*.yml")):
        for value in _yaml_strings(yaml.safe_load(path.read_text(encoding="utf-8"))):
            texts.extend(re.findall(r"'([^']*)'", value) if "{{" in value else [value])
    return {text for text in texts if text}


def _yaml_strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _yaml_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _yaml_strings(item)
    elif isinstance(value, str):
        yield value


VALUE_CHARS = set(string.whitespace + string.punctuation + string.digits)


def covered(message, literals):
    """The code's literals that, whole and in order, make ``message``, with only what values bring between them (a
    ``<...>`` placeholder, spaces, punctuation, digits); None when there is no such split. A rewording, or the code's
    words strung together in another order, has none."""
    by_first = {}
    for literal in literals:
        by_first.setdefault(literal[0], []).append(literal)
    # best[i]: the literals of a split of message[:i], or None when message[:i] has no split.
    best = [None] * (len(message) + 1)
    best[0] = []
    for position in range(len(message)):
        if best[position] is None:
            continue
        steps = [(position + len(literal), [literal]) for literal in by_first.get(message[position], ())
                 if message.startswith(literal, position)]
        placeholder = PLACEHOLDER.match(message, position)
        if placeholder:
            steps.append((placeholder.end(), []))
        if message[position] in VALUE_CHARS:
            steps.append((position + 1, []))
        for end, pieces in steps:
            if best[end] is None:
                best[end] = best[position] + pieces
    return best[len(message)]


@pytest.fixture(scope="module")
def page():
    return sections(PAGE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def corpus():
    return {key: code_texts(sources) for key, sources in SOURCES.items()}


def test_one_heading_per_registered_check_in_the_registry_order(page):
    headings = [check_id for _phase, check_id, _body in page]
    registered = [check_id for check_id, _phase, _title in CHECKS]
    assert set(headings) - set(registered) == set(), "documented, not in the registry"
    assert set(registered) - set(headings) == set(), "in the registry, not documented"
    assert headings == registered


def test_each_check_is_under_its_phase(page):
    phase_of = {check_id: phase for check_id, phase, _title in CHECKS}
    for heading, check_id, _body in page:
        assert "(`{0}`)".format(phase_of[check_id]) in heading, (check_id, heading)


@pytest.mark.parametrize("check_id", [check_id for check_id, _phase, _title in CHECKS])
def test_each_entry_has_every_part_in_both_languages(page, check_id):
    body = {found: text for _phase, found, text in page}[check_id]
    text = parts(body)
    for label, lang in PARTS:
        assert text[label], (check_id, label)
        if lang == "zh":
            assert CJK.search(text[label]), (check_id, label, "no Chinese")
        if lang == "en":
            assert not CJK.search(text[label]), (check_id, label, "Chinese in the English part")
    for label in ("**Common causes:**", "**常见原因：**"):
        assert re.search(r"^- \S", text[label], flags=re.M), (check_id, label, "no cause listed")
    # The next step ends with the commands to run.
    assert re.search(r"```bash\n.+\n```", text["**下一步：**"], flags=re.S), (check_id, "no commands")
    assert messages(text["**Message / 报告原文:**"]), (check_id, "no message quoted")


@pytest.mark.parametrize("check_id", [check_id for check_id, _phase, _title in CHECKS])
def test_the_messages_quoted_are_the_codes(page, corpus, check_id):
    body = {found: text for _phase, found, text in page}[check_id]
    literals = corpus["preflight" if PHASE_OF[check_id] == "preflight" else "walk"]
    for message in messages(parts(body)["**Message / 报告原文:**"]):
        pieces = covered(message, literals)
        assert pieces is not None, "{0}: not the code's text: {1!r}".format(check_id, message)
        assert max(len(piece) for piece in pieces) >= 8, "{0}: too little of the code's text: {1!r}".format(check_id, message)


def test_the_message_check_can_fail(corpus):
    literals = corpus["preflight"]
    sentence = ("not Ready: the scheduler places nothing there until its kubelet reports Ready. Look at its conditions "
                "(kubectl describe node ")
    message = "node <node> is " + sentence + "<node>) and at the kubelet's log on the node"
    assert covered(message, literals) == ["node ", " is ", sentence, ") and at the kubelet's log on the node"]
    assert covered(message.replace("its kubelet", "the kubelet"), literals) is None
    assert covered(message.replace("<node> is", "prod102 is"), literals) is None
    assert covered("the GPU melted", literals) is None


def test_every_check_is_built_in_python_none_in_the_role():
    """A check's words are its judge's (the corpus above); the role's tasks only call the judges."""
    tasks = "\n".join(path.read_text(encoding="utf-8") for path in (CHECKOUT / "roles" / "gpu_demo" / "tasks").glob("*.yml"))
    for check_id, _phase, _title in CHECKS:
        assert not re.search(r"""\bid['"]?:\s*['"]?{0}\b""".format(check_id), tasks), check_id
