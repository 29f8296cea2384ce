# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""report_files: the pure parts directly, then the action as ansible-playbook runs it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _report_files as files

CHECKOUT = Path(__file__).resolve().parents[4]


def test_mode_is_octal_text():
    assert files.parse_mode("0644") == 0o644
    assert files.parse_mode("600") == 0o600
    for bad in ("rw-r--r--", "0999", "", "77777"):
        with pytest.raises(files.ReportFilesError, match="not an octal file mode"):
            files.parse_mode(bad)


def test_text_is_written_as_is_and_data_as_sorted_json():
    assert files.file_bytes("a.md", "# 报告\n") == "# 报告\n".encode()
    assert json.loads(files.file_bytes("a.json", {"b": 1, "a": [1, 2]})) == {"a": [1, 2], "b": 1}
    assert files.file_bytes("a.json", {"b": 1, "a": 2}).decode().index('"a"') < files.file_bytes("a.json", {"b": 1, "a": 2}).decode().index('"b"')
    with pytest.raises(files.ReportFilesError, match=r"files\[x\]\.content must be text"):
        files.file_bytes("x", 42)


@pytest.mark.parametrize("name", ["", ".", "..", "../escape.md", "sub/report.md", "a\\b", "nul\0"])
def test_names_outside_the_directory_are_refused(name):
    with pytest.raises(files.ReportFilesError, match="plain file name"):
        files.plan_files("/tmp/reports", [{"name": name, "content": "x"}])


def test_a_name_given_twice_is_refused():
    with pytest.raises(files.ReportFilesError, match="given twice"):
        files.plan_files("/tmp/reports", [{"name": "r.md", "content": "x"}, {"name": "r.md", "content": "y"}])


def test_every_name_is_checked_before_any_bytes_are_planned():
    planned = files.plan_files("/tmp/reports", [{"name": "r.json", "content": {"k": 1}}, {"name": "r.md", "content": "x"}])
    assert [path for path, _data in planned] == ["/tmp/reports/r.json", "/tmp/reports/r.md"]


def test_atomic_write_sets_the_mode_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "r.svg"
    files.write_atomically(str(target), b"<svg/>", 0o640)
    assert target.read_bytes() == b"<svg/>"
    assert target.stat().st_mode & 0o7777 == 0o640
    assert os.listdir(tmp_path) == ["r.svg"]
    assert files.unchanged(str(target), b"<svg/>", 0o640)
    assert not files.unchanged(str(target), b"<svg/>", 0o644)
    assert not files.unchanged(str(target), b"<svg />", 0o640)
    assert not files.unchanged(str(tmp_path / "missing"), b"", 0o644)


PLAYBOOK = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      tasks:
        - gpuops.scheduling.report_files:
            dir: "{{ out }}"
            files: "{{ files }}"
          register: written
        - ansible.builtin.copy:
            content: "{{ written | to_json }}"
            dest: "{{ out_result }}"
          delegate_to: localhost
          check_mode: false
    """)


def run_playbook(tmp_path, files, *extra):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    result_file = tmp_path / "result.json"
    extra_vars = {"out": str(tmp_path / "reports" / "deep"), "files": files, "out_result": str(result_file)}
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", "localhost,", "-c", "local",
         "-e", json.dumps(extra_vars), *extra],
        cwd=CHECKOUT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable},
    )
    result = json.loads(result_file.read_text()) if completed.returncode == 0 else None
    return completed, result


def test_playbook_writes_then_leaves_alone_and_check_mode_writes_nothing(tmp_path):
    files = [{"name": "r.md", "content": "# report\n"}, {"name": "r.json", "content": {"passed": True}}]
    completed, result = run_playbook(tmp_path, files, "--check")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert result["changed"] and not (tmp_path / "reports").exists()

    completed, result = run_playbook(tmp_path, files)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    reports = tmp_path / "reports" / "deep"
    assert result["changed"] and result["files"] == [str(reports / "r.md"), str(reports / "r.json")]
    assert (reports / "r.md").read_text() == "# report\n"
    assert json.loads((reports / "r.json").read_text()) == {"passed": True}

    completed, result = run_playbook(tmp_path, files)
    assert completed.returncode == 0 and not result["changed"]


def test_playbook_refuses_a_path_as_a_name_and_writes_nothing(tmp_path):
    completed, _result = run_playbook(tmp_path, [{"name": "ok.md", "content": "x"}, {"name": "../../etc/x", "content": "y"}])
    assert completed.returncode != 0
    assert "files[].name '../../etc/x' must be a plain file name" in completed.stdout
    assert not (tmp_path / "reports").exists()
