# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reading of "no English sentence" that the Chinese tests share (the reports, the run's own messages, the
summary, the JUnit): what may stay English is what a reader types or searches for - code blocks, what is quoted in
backticks (identifiers, kubectl commands, the English originals of check messages and what Kubernetes wrote), names
made of separators (pods, nodes, resources, paths), URLs and links' targets."""

import re

# Four English words in a row, once what may stay English is taken out: a sentence, or the start of one.
ENGLISH_WORDS = re.compile(r"[A-Za-z][A-Za-z']*(?:[ ,;:()]+[A-Za-z][A-Za-z']*){3,}")
QUOTED = re.compile(r"(`+).*?\1")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
URL = re.compile(r"(?:https?|file)://\S+")
# gpu-demo-hold, nvidia.com/gpu, prod102's pool a/b, key=value, 16:43:46: names and values, not words of a sentence.
NAME = re.compile(r"\S*[-_./=:]\S*")


def english_prose(markdown):
    """[(line number, the English words, the line)] of the prose lines of ``markdown`` (code blocks skipped)."""
    found, in_code = [], False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        bare = NAME.sub(" ", URL.sub(" ", LINK_TARGET.sub("]", QUOTED.sub(" ", line))))
        found += [(number, match.group(0), line) for match in ENGLISH_WORDS.finditer(bare)]
    return found
