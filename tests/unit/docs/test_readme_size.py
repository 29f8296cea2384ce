"""The README stays short enough to read on one screenful of scrolling: details belong in docs/."""
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_is_under_12000_bytes():
    assert README.stat().st_size < 12000, "README.md is {0} bytes: move details to docs/".format(README.stat().st_size)
