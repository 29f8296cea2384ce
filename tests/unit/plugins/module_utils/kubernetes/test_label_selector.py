# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Label selectors matched as the API server matches them (k8s.io/apimachinery labels.Parse and Selector.Matches)."""

import pytest

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.label_selector import selector_matcher

RUN = {"app.kubernetes.io/managed-by": "gpuops.scheduling", "gpuops.scheduling/role": "queue", "tier": "gpu"}


@pytest.mark.parametrize("selector, matched", [
    ("app.kubernetes.io/managed-by=gpuops.scheduling", True),
    ("app.kubernetes.io/managed-by==gpuops.scheduling,tier=gpu", True),
    ("app.kubernetes.io/managed-by=gpuops.scheduling,tier=cpu", False),
    # != and notin match a pod without the key, as in Kubernetes.
    ("gpuops.scheduling/role!=hold", True),
    ("gpuops.scheduling/role!=queue", False),
    ("absent!=x", True),
    ("gpuops.scheduling/role in (hold, queue)", True),
    ("gpuops.scheduling/role in (hold,probe),tier=gpu", False),
    ("gpuops.scheduling/role notin (hold,probe), tier", True),
    ("absent notin (x)", True),
    ("tier", True),
    ("!tier", False),
    ("!absent", True),
    ("tier=", False),
    ("", True),
])
def test_a_selector_matches_as_the_api_server_matches(selector, matched):
    assert selector_matcher(selector)(RUN) is matched


def test_no_labels_match_only_what_asks_for_none():
    assert selector_matcher("a!=b,!c,d notin (e)")(None) is True
    assert selector_matcher("a")(None) is False


@pytest.mark.parametrize("selector", ["a=(b)", "a in b", "a b", "a=b=c", "=b"])
def test_what_is_no_selector_is_refused_naming_it(selector):
    with pytest.raises(ValueError, match="is not a label selector requirement"):
        selector_matcher(selector)
