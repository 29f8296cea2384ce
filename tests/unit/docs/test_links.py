"""Every relative link and anchor of the README, docs/ and tests/sim/README.md resolves; no link points at a private
address. Nothing is fetched: external links are only read."""
import ipaddress
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

CHECKOUT = Path(__file__).resolve().parents[3]
PAGES = sorted([CHECKOUT / "README.md", CHECKOUT / "tests" / "sim" / "README.md", *(CHECKOUT / "docs").rglob("*.md")])

FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
# [text](target "title") and ![alt](target); the text may hold one level of brackets (an image in a link).
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
EXPLICIT_ANCHOR = re.compile(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def slug(heading):
    """GitHub's anchor for a heading: its text as rendered, lowercased, punctuation dropped (letters of any script,
    digits, '_' and '-' kept), each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def prose_lines(text):
    """The lines outside fenced code blocks."""
    inside = False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            inside = not inside
            continue
        if not inside:
            yield line


def anchors(path):
    """The anchors a page offers: its headings' slugs (GitHub numbers repeats: x, x-1, x-2) and explicit ones."""
    found, seen = set(), {}
    for line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else "{0}-{1}".format(base, count))
        found.update(EXPLICIT_ANCHOR.findall(line))
    return found


def links(path):
    """The link targets of a page, outside code."""
    for line in prose_lines(path.read_text(encoding="utf-8")):
        line = CODE_SPAN.sub("", line)
        yield from INLINE.findall(line)
        yield from HTML.findall(line)
        reference = REFERENCE.match(line)
        if reference:
            yield reference.group(1)


# Where the example reports say the collection is installed (tests/report_example.py: INSTALLED).
INSTALLED = "file:///usr/share/ansible/collections/ansible_collections/gpuops/scheduling/"
# RFC 2606 / 6761 names that never resolve, or resolve to a page about examples.
PLACEHOLDER_DOMAINS = ("invalid", "example", "example.com", "example.org", "example.net", "test")


def placeholder_host(host):
    return any(host == domain or host.endswith("." + domain) for domain in PLACEHOLDER_DOMAINS) if host else False


def private_host(host):
    if not host or host == "localhost" or host.endswith(".local") or host.endswith(".internal"):
        return bool(host)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_loopback or address.is_link_local


def broken(path):
    """Why each of a page's links does not resolve."""
    problems = []
    for target in links(path):
        parsed = urlparse(target)
        if parsed.scheme in ("http", "https"):
            if private_host(parsed.hostname):
                problems.append("{0}: a private address".format(target))
            elif placeholder_host(parsed.hostname):
                problems.append("{0}: a placeholder host, which opens nothing".format(target))
            continue
        if target.startswith(INSTALLED):
            # The example reports link the checks page of the collection installed where the EE installs it: the page
            # of this checkout.
            file_part, _hash, anchor = target[len(INSTALLED):].partition("#")
            resolved = (CHECKOUT / unquote(file_part)).resolve()
        elif parsed.scheme or target.startswith("//"):
            if parsed.scheme != "mailto":
                problems.append("{0}: an unknown scheme".format(target))
            continue
        else:
            file_part, _hash, anchor = target.partition("#")
            resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            problems.append("{0}: no such file".format(target))
            continue
        try:
            resolved.relative_to(CHECKOUT)
        except ValueError:
            problems.append("{0}: outside the checkout".format(target))
            continue
        if anchor:
            if resolved.suffix != ".md":
                problems.append("{0}: an anchor into a file that is not Markdown".format(target))
            elif unquote(anchor) not in anchors(resolved):
                problems.append("{0}: no heading with that anchor in {1}".format(target, resolved.relative_to(CHECKOUT)))
    return problems


@pytest.mark.parametrize("heading, expected", [
    ("The checks · 检查项", "the-checks--检查项"),
    ("Before anything is created · 预检 (`preflight`)", "before-anything-is-created--预检-preflight"),
    ("hold_env_corroborates", "hold_env_corroborates"),
    ("`gpu_ledger_facts` reads both", "gpu_ledger_facts-reads-both"),
    ("What make test runs, and how long it takes", "what-make-test-runs-and-how-long-it-takes"),
    ("See [the page](docs/x.md) now!", "see-the-page-now"),
    ("走一遍 nvidia.com/gpu：调度演示", "走一遍-nvidiacomgpu调度演示"),
])
def test_slug_follows_githubs_rules(heading, expected):
    assert slug(heading) == expected


def test_repeated_headings_are_numbered(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Usage\n\n```\n## Not a heading\n```\n\n## Usage\n\n<a name=\"kept\"></a>\n")
    assert anchors(page) == {"title", "usage", "usage-1", "kept"}


def test_broken_links_and_private_addresses_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "CHECKOUT", tmp_path)
    (tmp_path / "other.md").write_text("# Other page\n")
    page = tmp_path / "page.md"
    page.write_text("# Here\n\n[ok](other.md#other-page) [ok](#here) [ok](https://kubernetes.io/docs/) `[code](gone.md)`\n"
                    "[bad](gone.md) [bad](other.md#missing) [bad](#nowhere) [bad](http://10.0.1.47:8000/health)\n"
                    "![bad](img/missing.png) [bad](https://192.168.1.5/) [bad](http://localhost:8000/)\n"
                    "[bad](https://example.invalid/docs/checks.md#node_ready) [bad](file:///home/me/checks.md)\n"
                    "[ok](" + INSTALLED + "other.md#other-page) [bad](" + INSTALLED + "other.md#missing)\n")
    assert broken(page) == [
        "gone.md: no such file", "other.md#missing: no heading with that anchor in other.md",
        "#nowhere: no heading with that anchor in page.md", "http://10.0.1.47:8000/health: a private address",
        "img/missing.png: no such file", "https://192.168.1.5/: a private address",
        "http://localhost:8000/: a private address",
        "https://example.invalid/docs/checks.md#node_ready: a placeholder host, which opens nothing",
        "file:///home/me/checks.md: an unknown scheme",
        INSTALLED + "other.md#missing: no heading with that anchor in other.md"]


def test_the_pages_are_found():
    names = {str(path.relative_to(CHECKOUT)) for path in PAGES}
    assert {"README.md", "docs/checks.md", "docs/development.md", "docs/awx.md", "tests/sim/README.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(CHECKOUT)))
def test_every_link_resolves(page):
    assert broken(page) == []
