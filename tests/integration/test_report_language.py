"""One language per run, and a link that opens.

A run in Chinese (gpu_demo_report_lang=zh) refused for an inference server that does not answer: the failure the play
prints last, the report's conclusion, the fleet page, the Markdown summary and the JUnit say it in Chinese, the URL and
the original error quoted; the Node's condition and Event, read by every team on the cluster, stay English. No file the
run wrote links a placeholder host: the check links open the installed collection's page on this controller.
"""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from safety_helpers import (NODE, closed_loopback_port, new_run_id, output_of, read_report, run_env, run_playbook, tail,
                            write_inventory)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from chinese_prose import english_prose  # noqa: E402  pylint: disable=wrong-import-position

CHECKOUT = Path(__file__).resolve().parents[2]
CJK = re.compile("[\u4e00-\u9fff]")


def last_failure(output: str) -> str:
    """The message of the last task that failed the node, from the callback's YAML."""
    lines = output.splitlines()
    start = max(index for index, line in enumerate(lines) if line.startswith(f"fatal: [{NODE}]"))
    first = lines[start].split("=> ", 1)[1].strip()
    if first:  # one line of JSON
        return json.loads(first)["msg"]
    block = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break
        block.append(line)
    return yaml.safe_load("\n".join(block))["msg"]


@pytest.fixture(scope="module")
def refused_in_chinese(sim, tmp_path_factory):
    sim.use_topology("default")
    directory = tmp_path_factory.mktemp("zh-refused")
    url = f"http://127.0.0.1:{closed_loopback_port()}/health"
    run_id = new_run_id("zh")
    inventory = write_inventory(directory, sim, gpu_demo_kubeconfig=sim.kubeconfig, gpu_demo_vllm_health_url=url,
                                gpu_demo_report_lang="zh", gpu_demo_run_id=run_id)
    run = run_playbook(inventory, run_env(sim), {"gpu_demo_run_id": run_id})
    return {"run": run, "url": url, "run_id": run_id, "reports": directory / "reports", "directory": directory}


def test_the_failure_the_play_prints_last_is_chinese_with_the_url_and_the_error_quoted(refused_in_chinese):
    run, url = refused_in_chinese["run"], refused_in_chinese["url"]
    assert run.returncode != 0, tail(run)
    # The last play fails the node with the summary's sentence for it (the callback writes results as YAML).
    message = last_failure(output_of(run))
    assert message.startswith(f"节点 `{NODE}` 上的 GPU 调度演示未通过：vllm_healthy_before：拒绝节点 `{NODE}`："), message
    assert f"推理服务 `{url}` 没有应答，原话：`GET {url} failed: " in message, message
    assert english_prose(message) == [], message


def test_the_report_the_summary_and_the_junit_say_it_in_chinese(refused_in_chinese):
    reports, run_id, url = refused_in_chinese["reports"], refused_in_chinese["run_id"], refused_in_chinese["url"]
    result = read_report(reports, run_id)
    assert result["failed_checks"] == ["vllm_healthy_before"], result["failed_checks"]
    # The check's own words stay English in the data (the Node, docs/checks.md and searches read them).
    assert result["checks"][[check["id"] for check in result["checks"]].index("vllm_healthy_before")]["detail"].startswith(
        f"inference server {url} did not answer: ")
    markdown = (reports / f"gpu-demo-{NODE}-{run_id}.md").read_text()
    assert f"- vllm_healthy_before：推理服务 `{url}` 没有应答，原话：" in markdown
    fleet = (reports / f"gpu-demo-fleet-{run_id}.md").read_text()
    assert fleet.startswith("# GPU 调度预检：1 个节点") and english_prose(fleet) == [], english_prose(fleet)
    assert f"推理服务 `{url}` 没有应答" in fleet
    junit = ET.parse(reports / f"gpu-demo-fleet-{run_id}.junit.xml").getroot()
    failure = junit.find(".//testcase[@name='vllm_healthy_before']/failure")
    assert failure.get("message").startswith(f"推理服务 `{url}` 没有应答，原话：`GET {url} failed: "), failure.get("message")
    assert english_prose(failure.get("message")) == []


def test_the_nodes_condition_and_event_stay_english(refused_in_chinese, sim):
    node = json.loads(sim.kubectl("get", "node", NODE, "-o", "json").stdout)
    condition = next(item for item in node["status"]["conditions"] if item["type"] == "gpuops.scheduling/GPUPreflightPassed")
    assert condition["reason"] == "PreflightRefused" and not CJK.search(condition["message"]), condition
    assert f"inference server {refused_in_chinese['url']} did not answer" in condition["message"]
    events = json.loads(sim.kubectl("get", "events.events.k8s.io", "-n", "default", "-o", "json").stdout)["items"]
    notes = [event.get("note") or "" for event in events
             if (event.get("regarding") or {}).get("name") == NODE and refused_in_chinese["run_id"] in (event.get("note") or "")]
    assert notes and not any(CJK.search(note) for note in notes), notes


def test_no_output_links_a_placeholder_host_and_the_check_links_open(refused_in_chinese):
    run, reports = refused_in_chinese["run"], refused_in_chinese["reports"]
    written = sorted(reports.iterdir())
    assert len(written) >= 5, written
    for text in [output_of(run)] + [path.read_text() for path in written]:
        assert "example.invalid" not in text
    links = set(re.findall(r"file://[^)\s\"'<>]+#[a-z_]+", "\n".join(path.read_text() for path in written)))
    assert links, "no check link"
    for link in links:
        page, anchor = urlsplit(link).path, urlsplit(link).fragment
        assert f"\n### {anchor}\n" in Path(page).read_text(encoding="utf-8"), link
