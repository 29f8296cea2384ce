"""The simulated cluster's folders in unit tests: a SimDir's short run folder (the nodes' sockets) is made under the
test's own temporary folder, never in the machine's /tmp where it would outlive the test."""
import tempfile

import pytest


@pytest.fixture(autouse=True)
def run_folders_under_tmp_path(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUOPS_SIM_RUN_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
