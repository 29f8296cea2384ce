"""execution-environment.yml: `ansible-builder create` writes a build context offline, and its Containerfile
installs what the collection needs (no image is built here: no registry, no Galaxy).

The context is made as `make build && ansible-builder build` would make it: the tarball beside the definition.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEFINITION = yaml.safe_load((ROOT / "execution-environment.yml").read_text(encoding="utf-8"))
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))
TARBALL = f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (BIN / "ansible-builder").exists():
        pytest.skip("ansible-builder is not installed in this venv (requirements-dev.txt has it)")
    source = tmp_path_factory.mktemp("ee-source")
    for name in ("execution-environment.yml", DEFINITION["dependencies"]["galaxy"], DEFINITION["dependencies"]["python"],
                 DEFINITION["dependencies"]["system"]):
        shutil.copy(ROOT / name, source / name)
    built = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(source), str(ROOT)],
                           capture_output=True, text=True, cwd=ROOT, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    output = source.parent / "ee-context"
    created = subprocess.run([str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "--context", str(output),
                              "--output-filename", "Containerfile"], capture_output=True, text=True, cwd=source, check=False,
                             timeout=240)
    assert created.returncode == 0, created.stdout + created.stderr
    return output


def test_context_carries_the_collection_and_its_requirements(context: Path) -> None:
    build = context / "_build"
    assert (build / "requirements.txt").read_text() == (ROOT / "requirements.txt").read_text()
    assert (build / "requirements.yml").read_text() == (ROOT / "requirements.yml").read_text()
    assert (build / "bindep.txt").read_text() == (ROOT / "bindep.txt").read_text()
    assert (build / "collections" / TARBALL).is_file()


def test_containerfile_installs_what_the_collection_needs(context: Path) -> None:
    containerfile = (context / "Containerfile").read_text()
    # kubernetes.core from requirements.yml, into the image's collections path
    assert re.search(r"ansible-galaxy collection install .*-r requirements\.yml", containerfile)
    # the Python requirements (kubernetes, jmespath, PyYAML, ...) and the system packages, then installed
    assert "--user-pip=requirements.txt" in containerfile and "--user-bindep=bindep.txt" in containerfile
    assert "/output/scripts/assemble" in containerfile and "/output/scripts/install-from-bindep" in containerfile
    # the collection itself, from its tarball, after its dependencies
    install = re.search(r"RUN ansible-galaxy collection install --offline --no-deps .*gpuops-scheduling-\*\.tar\.gz", containerfile)
    assert install and install.start() > containerfile.index("/output/scripts/install-from-bindep")


def test_ee_ansible_core_is_the_supported_range() -> None:
    """The EE installs an ansible-core the collection is tested with: from meta/runtime.yml's lowest on."""
    spec = DEFINITION["dependencies"]["ansible_core"]["package_pip"]
    lowest = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert spec.startswith("ansible-core>=") and spec.split(">=")[1].split(",")[0] + ".0" == lowest.lstrip(">="), (spec, lowest)
