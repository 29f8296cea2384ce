"""The registry of check ids against the code that reports them: no id reported that is not listed, none listed that
nothing reports, and every phase the registry's."""
import ast
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo import checks
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import CHECKS, UnknownCheck, check

CHECKOUT = Path(__file__).resolve().parents[5]
# The phases a check belongs to, in the order a run goes through.
PHASES = ("preflight", "hold", "queue", "release", "cleanup")


def python_reports(root=CHECKOUT / "plugins"):
    """{check id: [file]} of every check("<id>", ...) call, and the dict literals that build a check without it."""
    reported, bypasses = {}, []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "check":
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant) and isinstance(first.value, str), (
                    "{0}:{1}: check() takes its id as a literal, so that this test can read it".format(path, node.lineno))
                reported.setdefault(first.value, []).append(path)
            if isinstance(node, ast.Dict):
                keys = {key.value: value for key, value in zip(node.keys, node.values) if isinstance(key, ast.Constant)}
                if {"id", "passed"} <= set(keys) and isinstance(keys["id"], ast.Constant):
                    bypasses.append("{0}:{1}: {2}".format(path.relative_to(root), node.lineno, keys["id"].value))
    return reported, bypasses


def _yaml_checks(value):
    if isinstance(value, dict):
        if {"id", "phase", "passed"} <= set(value):
            yield value
        for item in value.values():
            yield from _yaml_checks(item)
    elif isinstance(value, list):
        for item in value:
            yield from _yaml_checks(item)


def yaml_reports(root=CHECKOUT / "roles"):
    """{check id: (phase, file)} of the checks the role's tasks build in YAML."""
    reported = {}
    for path in sorted(root.glob("*/tasks/*.yml")):
        for found in _yaml_checks(yaml.safe_load(path.read_text(encoding="utf-8"))):
            reported[found["id"]] = (found["phase"], path)
    return reported


def test_check_takes_its_phase_from_the_registry():
    assert check("hold_running", 1, "ok") == {"id": "hold_running", "phase": "hold", "passed": True, "detail": "ok"}
    assert check("claims_gone", [], "left")["passed"] is False


def test_an_unlisted_id_is_refused_by_name():
    with pytest.raises(UnknownCheck, match="'hold_runing' is not in plugins/module_utils/_gpu_demo/checks.py"):
        check("hold_runing", True, "typo")


def test_the_registry_is_well_formed():
    ids = [check_id for check_id, _phase, _title in CHECKS]
    assert len(ids) == len(set(ids))
    assert all(phase in PHASES for _id, phase, _title in CHECKS)
    # In the order a run reports them: phases never go back.
    order = [PHASES.index(phase) for _id, phase, _title in CHECKS]
    assert order == sorted(order)
    for check_id, _phase, title in CHECKS:
        assert check_id.isidentifier() and check_id == check_id.lower()
        assert title.endswith(".") and "\n" not in title and len(title) < 120, check_id


def test_every_reported_id_is_listed_and_every_listed_id_is_reported():
    python, bypasses = python_reports()
    role = yaml_reports()
    assert not bypasses, "checks built without check(): " + "; ".join(bypasses)
    assert not set(python) & set(role)
    listed = set(checks.PHASE_OF)
    assert set(python) | set(role) == listed, (
        "reported, not listed: {0}; listed, never reported: {1}".format(
            sorted(set(python) | set(role) - listed), sorted(listed - set(python) - set(role))))
    for check_id, (phase, path) in role.items():
        assert phase == checks.PHASE_OF[check_id], "{0}: {1} is a {2} check".format(path, check_id, checks.PHASE_OF[check_id])


def test_the_scan_sees_a_bypass_and_an_unlisted_role_check(tmp_path):
    """The scan itself can fail: a dict literal check in Python and a YAML check are both found."""
    (tmp_path / "judge.py").write_text('x = [{"id": "made_up", "phase": "hold", "passed": True, "detail": ""}]\n'
                                       'y = check("also_made_up", True, "")\n')
    reported, bypasses = python_reports(tmp_path)
    assert list(reported) == ["also_made_up"] and bypasses[0].endswith("made_up")
    (tmp_path / "role" / "tasks").mkdir(parents=True)
    (tmp_path / "role" / "tasks" / "main.yml").write_text(
        "- name: Judge\n  ansible.builtin.set_fact:\n    _x: 1\n  vars:\n    _check: {id: invented, phase: queue, passed: true}\n")
    assert {key: value[0] for key, value in yaml_reports(tmp_path).items()} == {"invented": "queue"}
