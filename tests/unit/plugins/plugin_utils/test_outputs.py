# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's outputs, proven writable before the first pod (plugin_utils/_outputs.py): fed a missing folder, a read-only
mount (as root, whom permission bits do not stop), a folder named as the textfile, a malformed Pushgateway URL."""

import os
import subprocess

import pytest

from ansible_collections.gpuops.scheduling.plugins.plugin_utils import _outputs as outputs


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder on a read-only tmpfs: what no permission bit shows."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here (needs root and CAP_SYS_ADMIN)")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def test_writable_outputs_pass_and_the_probe_leaves_nothing(tmp_path):
    (tmp_path / "textfile").mkdir()
    assert outputs.refusals(str(tmp_path / "reports"), True, str(tmp_path / "textfile" / "gpu.prom"),
                            "http://127.0.0.1:9091") == []
    assert os.listdir(tmp_path / "textfile") == [] and os.listdir(tmp_path / "reports") == []


def test_a_textfile_in_a_missing_folder_is_refused_naming_the_variable_and_the_path():
    assert outputs.refusals(metrics_textfile="/nonexistent/x.prom", write=False) == [
        "gpu_demo_metrics_textfile=/nonexistent/x.prom: its folder /nonexistent does not exist (the textfile "
        "collector's folder, made where node_exporter reads it)"]


def test_a_read_only_folder_is_refused_for_the_textfile_and_the_reports(read_only_folder):
    found = outputs.refusals(str(read_only_folder / "reports"), True, str(read_only_folder / "x.prom"))
    assert found == [
        "gpu_demo_report_dir={0}: the folder cannot be made (Read-only file system)".format(read_only_folder / "reports"),
        "gpu_demo_metrics_textfile={0}: a file cannot be written in its folder {1} (Read-only file system)".format(
            read_only_folder / "x.prom", read_only_folder)]


def test_a_folder_where_no_file_can_be_made_is_refused_even_for_root():
    # /proc takes no new file, whoever asks.
    assert outputs.textfile_refusal("/proc/gpu.prom").startswith(
        "gpu_demo_metrics_textfile=/proc/gpu.prom: a file cannot be written in its folder /proc (")


def test_a_folder_given_as_the_textfile_and_a_file_as_the_report_folder_are_refused(tmp_path):
    (tmp_path / "file").write_text("")
    assert outputs.refusals(str(tmp_path / "file"), True, str(tmp_path)) == [
        "gpu_demo_report_dir={0} is not a folder: the reports cannot be written there".format(tmp_path / "file"),
        "gpu_demo_metrics_textfile={0} is a folder, not a file".format(tmp_path)]


@pytest.mark.parametrize("url", ["127.0.0.1:9091", "ftp://gateway:9091", "http://", "http://gateway:99999"])
def test_a_malformed_pushgateway_url_is_refused(url):
    assert outputs.refusals(write=False, pushgateway_url=url)[0].startswith(
        "gpu_demo_pushgateway_url={0} is not a Pushgateway URL".format(url))


def test_check_mode_writes_nothing(tmp_path):
    assert outputs.refusals(str(tmp_path / "reports"), True, check_mode=True) == []
    assert not (tmp_path / "reports").exists()
