# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The README stays a page people read whole: at most 12,000 bytes (the rest belongs in docs/)."""

from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"
LIMIT = 12000


def test_the_readme_fits_its_limit():
    size = len(README.read_bytes())
    assert size <= LIMIT, "README.md is {0} bytes, over its {1}-byte limit: move detail to docs/".format(size, LIMIT)


def test_the_readme_says_how_to_read_the_verdict():
    text = README.read_text(encoding="utf-8")
    assert "## Reading the verdict" in text and "kubectl events --for node/" in text and "stale" in text
