# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""The demo pods of a run, and through DRA their ResourceClaimTemplates, from the role's templates (pod.yaml.j2,
claim_templates.yaml.j2) and the settings the role gives them.

They are rendered by the collection's own Jinja2 environment (_report_templates.py), which keeps compiled templates
for the task workers that come after the first: through ansible-core's template lookup, every node's pre-flight
compiled the pod template once per role and copied all of the host's variables for each, about a third of a CPU-second
of a node's run (docs/development.md, "A fleet's cost"). The templates read only the settings given here, so what a
pod is made of is said in one list (the role's _gpu_demo_pod_settings).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import yaml

from ansible_collections.gpuops.scheduling.plugins.plugin_utils._report_templates import render

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # PyYAML without libyaml
    from yaml import SafeLoader as _Loader

POD_ROLES = ("hold", "queue", "probe")


def documents(text):
    """A multi-document YAML text -> its documents, the empty ones (a template's leading ``---``) left out."""
    return [document for document in yaml.load_all(text, Loader=_Loader) if document is not None]


def demo_manifests(plan, settings):
    """The hold's plan and the role's pod settings -> {hold, queue, probe: [Pod], claim_templates: [template]}.

    The claim templates are made only when the plan takes the devices through the run's own claims."""
    data = dict(settings, _gpu_demo_plan=plan)
    manifests = dict((role, documents(render("pod.yaml.j2", _gpu_demo_pod_role=role, **data))) for role in POD_ROLES)
    claims = (plan.get("dra_request") or "") == "claim"
    manifests["claim_templates"] = documents(render("claim_templates.yaml.j2", **data)) if claims else []
    return manifests
