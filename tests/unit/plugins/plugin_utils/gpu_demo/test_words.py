# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run's failure in the run's language: every check in both languages, every check's failure said in Chinese with no
English sentence outside quoted originals, and the English the role always wrote, byte for byte."""

import re
from pathlib import Path

import pytest
from chinese_prose import english_prose

from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.checks import CHECKS, PHASE_OF
from ansible_collections.gpuops.scheduling.plugins.module_utils._gpu_demo.rows import failure_sentence, result_row
from ansible_collections.gpuops.scheduling.plugins.plugin_utils._gpu_demo import words

CHECKOUT = Path(__file__).resolve().parents[5]
PAGE = (CHECKOUT / "docs" / "checks.md").read_text(encoding="utf-8")
CJK = re.compile("[\u4e00-\u9fff]")

# A value for each placeholder of the page's messages, as the cluster would give it.
VALUES = {"node": "prod102", "url": "http://127.0.0.1:8000/health", "seconds": "120", "n": "1", "status": "503",
          "ms": "12", "resource": "nvidia.com/gpu", "class": "gpu.nvidia.com", "namespace": "gpu-operator",
          "pod": "gpu-demo-hold", "queue pod": "gpu-demo-queue", "pods": "gpu-demo-hold", "policy": "PreemptLowerPriority",
          "error": "Post \"https://127.0.0.1:6443/api/v1/namespaces/gpu-operator/pods?dryRun=All\": EOF",
          "the scheduler's message": "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: true}.",
          "message": "the server could not find the requested resource"}
UNVALUED = "x-1"
UNREACHABLE = {"id": "vllm_healthy_before", "phase": "preflight", "passed": False, "detail":
               "inference server http://127.0.0.1:1/health did not answer: GET http://127.0.0.1:1/health failed: "
               "<urlopen error [Errno 111] Connection refused>; refusing the node (gpu_demo_vllm_require_healthy=true)"}


def page_messages():
    """[(check id, message)] of docs/checks.md: each entry's quoted messages, placeholders filled with values."""
    found = []
    for section in re.split(r"^### ", PAGE, flags=re.M)[1:]:
        check_id, _newline, body = section.partition("\n")
        part = body.split("**Message / 报告原文:**", 1)[1].split("**Common causes:**", 1)[0]
        for message in re.findall(r"^- `([^`]+)`", part, flags=re.M):
            filled = re.sub(r"<([^<>]+)>", lambda match: VALUES.get(match.group(1), UNVALUED), message)
            found.append((check_id.strip(), filled.replace("...", UNVALUED)))
    return found


MESSAGES = page_messages()


@pytest.mark.parametrize("check_id", [check_id for check_id, _phase, _title in CHECKS])
def test_every_check_has_its_sentence_in_both_languages(check_id):
    sentences = words.CHECK_SENTENCES.get(check_id) or {}
    assert sorted(sentences) == sorted(words.LANGS), "%s lacks a language: add it to CHECK_SENTENCES" % check_id
    assert sentences["en"] == dict((check, title) for check, _phase, title in CHECKS)[check_id]
    assert CJK.search(sentences["zh"]) and not english_prose(sentences["zh"])


def test_the_table_has_no_check_the_registry_does_not_know():
    assert set(words.CHECK_SENTENCES) == set(PHASE_OF)


def test_the_page_quotes_a_message_for_every_check():
    assert {check_id for check_id, _message in MESSAGES} == set(PHASE_OF)


@pytest.mark.parametrize("check_id, detail", MESSAGES, ids=[check_id for check_id, _detail in MESSAGES])
def test_every_checks_failure_said_in_chinese_has_no_english_sentence_outside_quoted_originals(check_id, detail):
    said = words.check_text({"id": check_id, "detail": detail}, "zh")
    assert CJK.search(said) and english_prose(said) == [], said
    # And as the play says it: the refusal, a stopped walk, the failed host.
    check = {"id": check_id, "phase": PHASE_OF[check_id], "passed": False, "detail": detail}
    for sentence in (words.refusal([check], "prod102", "zh"), words.stop({"stop": detail, "checks": [check]}, "zh"),
                     words.run_failure({"node": "prod102", "checks": [check], "failure": {"message": detail}}, lang="zh")):
        assert english_prose(sentence) == [], sentence


def test_every_chinese_form_is_one_the_page_shows():
    """No form of MESSAGES that no message matches (a rewording in the code leaves it behind: the page's test then
    finds the new message, and this one the form that no longer says it)."""
    unmatched = [pattern.pattern for check_id, pattern, _text in words._COMPILED
                 if check_id != words.NOT_RUN and not any(pattern.match(detail) and check_id in (None, page_id)
                                                          for page_id, detail in MESSAGES)]
    assert unmatched == []


def test_an_unreachable_inference_server_is_refused_in_chinese_with_the_url_and_the_error_quoted():
    said = words.refusal([UNREACHABLE], "prod102", "zh")
    assert said == ("拒绝节点 `prod102`：vllm_healthy_before：推理服务 `http://127.0.0.1:1/health` 没有应答，原话："
                    "`GET http://127.0.0.1:1/health failed: <urlopen error [Errno 111] Connection refused>`；"
                    "因此拒绝这个节点（`gpu_demo_vllm_require_healthy=true`）")


def test_a_detail_of_no_known_form_is_said_by_what_its_check_proves_with_the_original_quoted():
    said = words.check_text({"id": "ledger_full", "detail": "ledger nvidia.com/gpu on prod102: allocatable 1, free 1"}, "zh")
    assert said == ("没有做到「排队 Pod 等待时，节点账本剩余 0，由占位 Pod 占满，排队 Pod 在等这个资源」，原文："
                    "`ledger nvidia.com/gpu on prod102: allocatable 1, free 1`")
    assert words.quoted("a `b` c") == "`` a `b` c ``" and words.quoted("a\nb") == "`a b`"


def test_in_english_the_role_says_what_it_always_said():
    other = dict(UNREACHABLE, id="node_ready", detail="node prod102 is not Ready: x")
    passed = dict(UNREACHABLE, id="timeout_usable", passed=True, detail="120 s")
    assert words.refusal([UNREACHABLE, passed, other], "prod102") == "Refusing node prod102: {0}; {1}".format(
        UNREACHABLE["detail"], other["detail"])
    walk = {"stop": "a; b", "checks": [dict(UNREACHABLE, detail="a"), dict(other, detail="b")]}
    assert words.stop(walk, "en") == "a; b" and words.stop({"stop": ""}, "zh") == ""
    result = {"node": "prod102", "checks": [UNREACHABLE, passed], "failure": {"task": "Preflight | Refuse", "message": "m"}}
    # main.yml: "GPU scheduling demo on {{ gpu_demo_node }} failed: {{ failed_checks | join(', ') or 'error' }}: {{ message }}"
    assert words.run_failure(result, "prod102") == "GPU scheduling demo on prod102 failed: vllm_healthy_before: m"
    assert words.run_failure({"checks": [], "failure": {"message": "m"}}, "gpu-a5") == "GPU scheduling demo on gpu-a5 failed: error: m"
    row = result_row("prod102", dict(result, passed=False))
    assert words.row_failure_sentence(row, "en") == failure_sentence(row)
    assert words.check_text(UNREACHABLE, "en") == UNREACHABLE["detail"]


def test_a_failed_host_is_failed_in_chinese_naming_its_checks():
    row = result_row("prod102", {"node": "prod102", "passed": False, "checks": [UNREACHABLE],
                                 "failure": {"task": "Preflight | Refuse", "message": "Refusing node prod102: ..."}})
    said = words.row_failure_sentence(row, "zh")
    assert said.startswith("节点 `prod102` 上的 GPU 调度演示未通过：vllm_healthy_before：拒绝节点 `prod102`：推理服务 ")
    assert english_prose(said) == []


def test_a_failure_outside_the_checks_quotes_the_task_and_its_message():
    row = result_row("gpu-a5", None, {"task": "Lock | Take the node's pre-flight lock",
                                      "message": "node gpu-a5 is locked by run r1 until 2026-11-30T22:00:00Z"})
    said = words.row_failure_sentence(row, "zh")
    assert said == ("节点 `gpu-a5` 上的 GPU 调度演示未通过：出错：任务 `Lock | Take the node's pre-flight lock` 出错，原文："
                    "`node gpu-a5 is locked by run r1 until 2026-11-30T22:00:00Z`")


@pytest.mark.parametrize("reason", [
    "no node gpu-03 in the cluster", "never pre-flighted: node gpu-03 has no verdict",
    "unreadable verdict on node gpu-03 (label maybe, condition True): written by hand or half written",
    "unreadable verdict on node gpu-03", "interrupted: run r1 started at 2026-11-30T22:00:00Z and never wrote its verdict",
    "running: run r1 since 2026-11-30T22:00:00Z",
    "stale: passed at 2026-11-30T22:00:00Z (run r1): the node rebooted (boot 1234abcd -> 5678efgh)",
    "something a later release says"])
def test_why_a_node_has_no_result_is_said_in_chinese(reason):
    said = words.row_reason({"status": "not_run", "reason": reason}, "zh")
    assert CJK.search(said) and english_prose(said) == [], said
    assert words.row_reason({"status": "not_run", "reason": reason}, "en") == reason
