"""The built collection: what `ansible-galaxy collection build` ships, and that it installs and documents.

Builds the tarball from the checkout (as `make build` does), installs it offline into a fresh
collections path (kubernetes.core comes from the venv's `ansible` package, as on our machines), and
renders every module's documentation from the installed copy, not from the checkout.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))
FQCN = f"{GALAXY['namespace']}.{GALAXY['name']}"
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")

# Development-only paths that must never reach users (galaxy.yml build_ignore keeps them out).
DEV_PATHS = (
    "tests/sim",
    "tests/device",
    "tests/output",
    ".venv",
    ".venvs",
    ".sim",
    ".collections",
    ".build",
    ".git",
    ".ci",
    ".ansible-lint",
    ".pytest_cache",
    "bench",
    "reports",
    "Makefile",
    "requirements-dev.txt",
)

pytestmark = pytest.mark.timeout(600)


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def ansible_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment that sees only the installed copy (plus collections shipped in the venv)."""
    home = tmp_path_factory.mktemp("ansible_home")
    config = home / "ansible.cfg"
    config.write_text("[defaults]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_CONFIG=str(config),  # not the checkout's: it points collections_path at .collections
        ANSIBLE_COLLECTIONS_PATH=str(home / "collections"),
        ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
        ANSIBLE_NOCOLOR="1",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory, ansible_env: dict[str, str]) -> Path:
    output = tmp_path_factory.mktemp("build")
    _run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(output), str(ROOT)],
         ansible_env, ROOT)
    built = sorted(output.glob(f"{GALAXY['namespace']}-{GALAXY['name']}-*.tar.gz"))
    assert len(built) == 1, f"expected one tarball in {output}, found {built}"
    assert built[0].name == f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"
    return built[0]


@pytest.fixture(scope="module")
def installed(tarball: Path, ansible_env: dict[str, str]) -> Path:
    collections = Path(ansible_env["ANSIBLE_COLLECTIONS_PATH"])
    _run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps",
          "-p", str(collections), str(tarball)], ansible_env, tarball.parent)
    path = collections / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    assert (path / "MANIFEST.json").is_file()
    return path


def test_tarball_has_no_dev_files(tarball: Path) -> None:
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    leaked = sorted(n for n in names for dev in DEV_PATHS if n == dev or n.startswith(dev + "/"))
    assert not leaked, f"development files in {tarball.name}: {leaked}"
    assert not [n for n in names if "__pycache__" in n.split("/") or n.endswith(".pyc")]
    # Hidden files are caches and run-time state (.pytest_cache, .ansible, .sim-bench, ...), never content.
    hidden = sorted(n for n in names if any(part.startswith(".") for part in n.split("/")))
    assert not hidden, f"hidden files in {tarball.name} (add them to galaxy.yml build_ignore): {hidden[:20]}"
    for required in ("MANIFEST.json", "FILES.json", "meta/runtime.yml"):
        assert required in names


def test_installed_manifest_declares_dependencies(installed: Path) -> None:
    manifest = json.loads((installed / "MANIFEST.json").read_text(encoding="utf-8"))
    info = manifest["collection_info"]
    assert f"{info['namespace']}.{info['name']}" == FQCN
    assert info["dependencies"] == GALAXY.get("dependencies", {})


def test_requirements_yml_matches_galaxy_dependencies() -> None:
    """execution-environment.yml installs requirements.yml; it must ask for what galaxy.yml declares."""
    requirements = yaml.safe_load((ROOT / "requirements.yml").read_text(encoding="utf-8"))
    wanted = {c["name"]: str(c.get("version", "*")) for c in requirements["collections"]}
    assert wanted == {name: str(version) for name, version in GALAXY.get("dependencies", {}).items()}


def test_there_are_modules() -> None:
    assert MODULES, "plugins/modules/ has no module"


@pytest.mark.parametrize("module", MODULES)
def test_module_doc_renders_from_installed_copy(module: str, installed: Path, ansible_env: dict[str, str]) -> None:
    name = f"{FQCN}.{module}"
    doc = json.loads(_run([str(BIN / "ansible-doc"), "--json", name], ansible_env, installed.parent).stdout)[name]
    assert Path(doc["doc"]["filename"]).resolve().is_relative_to(installed.resolve()), (
        f"{name} documented from {doc['doc']['filename']}, not from the installed tarball")
    assert doc["doc"].get("short_description"), f"{name}: no short_description"
    assert doc.get("examples", "").strip(), f"{name}: no EXAMPLES"
    assert doc.get("return"), f"{name}: no RETURN"
    assert f"{FQCN}." in doc["examples"], f"{name}: EXAMPLES should use FQCNs"

    text = _run([str(BIN / "ansible-doc"), name], ansible_env, installed.parent).stdout
    assert "EXAMPLES:" in text and "RETURN VALUES:" in text, text[-2000:]
