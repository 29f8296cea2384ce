# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_demo_summary as ansible-playbook runs it: three files, nothing in check mode, the summary returned either way."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from chinese_prose import english_prose

CHECKOUT = Path(__file__).resolve().parents[4]
FIXTURES = CHECKOUT / "tests" / "unit" / "fixtures" / "gpu_demo_results"

PLAYBOOK = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      tasks:
        - gpuops.scheduling.gpu_demo_summary:
            dir: "{{ out }}"
            run_id: "{{ run_id }}"
            hosts: [gpu-a2, gpu-a4, bad-input]
            results: {gpu-a2: "{{ passed }}", gpu-a4: "{{ refused }}"}
            failures: {bad-input: {phase: input, task: "Validating arguments against arg spec 'main'", message: "bad <value>"}}
            lang: zh
          register: summary
        - ansible.builtin.copy:
            content: "{{ summary | to_json }}"
            dest: "{{ out_result }}"
          check_mode: false
    """)


def run_playbook(tmp_path, *extra, run_id="t1"):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    result_file = tmp_path / "result.json"
    extra_vars = {"out": str(tmp_path / "reports"), "out_result": str(result_file), "run_id": run_id,
                  "passed": json.loads((FIXTURES / "gpu-a2-passed.json").read_text()),
                  "refused": json.loads((FIXTURES / "gpu-a4-not-ready.json").read_text())}
    variables = tmp_path / "vars.json"
    variables.write_text(json.dumps(extra_vars))
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", "localhost,", "-c", "local",
         "-e", "@" + str(variables), *extra],
        cwd=CHECKOUT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable},
    )
    result = json.loads(result_file.read_text()) if completed.returncode == 0 else None
    return completed, result


def test_check_mode_writes_nothing_then_a_run_writes_the_three_files(tmp_path):
    completed, result = run_playbook(tmp_path, "--check")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert result["changed"] and result["files"] == {} and not (tmp_path / "reports").exists()
    assert result["summary"]["counts"] == {"nodes": 3, "failed": 2, "not_run": 0, "checked": 0, "passed": 1}

    completed, result = run_playbook(tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    reports = tmp_path / "reports"
    assert result["changed"] and result["files"] == {kind: str(reports / ("gpu-demo-fleet-t1." + ext)) for kind, ext in
                                                     (("json", "json"), ("markdown", "md"), ("html", "html"), ("junit", "junit.xml"))}
    assert json.loads((reports / "gpu-demo-fleet-t1.json").read_text())["rows"][0]["host"] == "bad-input"
    assert (reports / "gpu-demo-fleet-t1.md").read_text().startswith("# GPU 调度预检：3 个节点")
    page = (reports / "gpu-demo-fleet-t1.html").read_text()
    assert "bad &lt;value&gt;" in page and "bad <value>" not in page
    # In the run's language, the failure each failed host is failed with; the Node's verdict stays English.
    assert result["failed_hosts"]["gpu-a4"].startswith("节点 `gpu-a4` 上的 GPU 调度演示未通过：node_ready：拒绝节点 `gpu-a4`：")
    assert english_prose(result["failed_hosts"]["gpu-a4"]) == [] and english_prose(result["failed_hosts"]["bad-input"]) == []
    assert result["verdicts"]["gpu-a4"]["detail"].startswith("node gpu-a4 is not Ready: ")
    # Nothing written links a placeholder host: the checks link is the installed collection's page, which opens.
    for path in reports.iterdir():
        assert "example.invalid" not in path.read_text(), path.name
    assert (CHECKOUT / "docs" / "checks.md").as_uri() + "#node_ready" in (reports / "gpu-demo-fleet-t1.md").read_text()


def test_a_run_id_with_a_path_is_refused(tmp_path):
    completed, _result = run_playbook(tmp_path, run_id="../x")
    assert completed.returncode != 0 and "must be a non-empty name without '/'" in completed.stdout
    assert not (tmp_path / "reports").exists()
