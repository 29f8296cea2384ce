"""Headless Chromium for the summary page: the DOM after its script ran, and a screenshot.

`make browser` (tests/browser.sh) installs Debian's chromium when it is missing; GPUOPS_CHROMIUM names another binary.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def chromium() -> str:
    binary = os.environ.get("GPUOPS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        raise AssertionError("no chromium on PATH: run `make browser` (bash tests/browser.sh) or set GPUOPS_CHROMIUM")
    return binary


def _run(page: Path, *flags: str, fragment: str = "") -> subprocess.CompletedProcess:
    # Its own profile, thrown away; no sandbox (root in CI containers); nothing but the file is loaded.
    with tempfile.TemporaryDirectory(prefix="gpuops-chromium-") as profile:
        return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
                               *flags, page.resolve().as_uri() + (f"#{fragment}" if fragment else "")],
                              capture_output=True, text=True, timeout=120, check=False)


def dump_dom(page: Path) -> str:
    """The page's DOM as Chromium built it (after its inline script ran), serialised."""
    result = _run(page, "--dump-dom")
    assert result.returncode == 0 and "<html" in result.stdout, result.stderr[-2000:]
    return result.stdout


def screenshot(page: Path, png: Path, width: int = 1400, height: int = 1000, fragment: str = "") -> Path:
    """A PNG of the window (``fragment``: an anchor of the page to open it at)."""
    result = _run(page, "--hide-scrollbars", f"--screenshot={png}", f"--window-size={width},{height}", fragment=fragment)
    assert result.returncode == 0 and png.exists(), result.stderr[-2000:]
    return png
