# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops developers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module_utils file is PRIVATE to this collection (gpuops.scheduling): it may change at any time,
# without notice. Do not use it from other collections, roles or standalone modules.

"""Keep a node's Lease while the controller process that took it lives, and not a moment longer.

Why a process of its own, and not renewals inside the role's long waits: between two waits run tasks this
collection does not control (kubernetes.core.k8s modules, an SSH read on the node), and in a fleet run the next
task of a node waits for a free fork while other nodes' waits (up to gpu_demo_timeout each) take every fork.
Renewing only inside the waits would need a Lease longer than any such gap, which is the ten-minute lock a crash
left before. A renewer that lives beside the run covers every gap with a Lease of seconds.

Why it watches ansible-playbook and not its task: the lock task's worker ends with the task. The renewer is
forked from that worker (it has kubernetes and our code imported already: no new interpreter, and memory shared
with the worker until written), leaves its session (an AWX cancel or a terminal's Ctrl-C signals the run's
process group, not it), and holds a pidfd of the worker's parent, ansible-playbook: the moment that process is
gone (exit, SIGKILL, OOM kill) the pidfd turns readable and the renewer exits without another renewal, so the
Lease then expires ``leaseDurationSeconds`` after its last renewal. A renewal refused because the Lease changed
(409) is re-read: gone or released (the run's release) ends the renewer, another holder (a take-over after the
API server was away longer than the Lease) ends it and is seen by the run's next wait. API errors are retried
at the next period: while the API server is away nobody else can take the Lease either.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import select
import signal
import time

from ansible_collections.gpuops.scheduling.plugins.module_utils._kubernetes.lease import (
    renew_period,
    renewal_outcome,
    renewed_body,
    utc_now,
)

try:
    from kubernetes.client.rest import ApiException
except ImportError:
    # The module (k8s_module()) reports the missing library.
    pass


class ProcessWatch:
    """Whether a process (ansible-playbook) is still alive, waiting for its end at most ``timeout`` seconds.

    Opened while the process is known to be alive (it is the caller's parent), a pidfd cannot be fooled by the
    pid being reused later. Without pidfds (not Linux, or a kernel before 5.3) the pid is polled with signal 0.
    """

    POLL_SECONDS = 0.5

    def __init__(self, pid):
        self.pid = pid
        self.pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(pid)
            except OSError:
                self.pidfd = None

    def alive(self):
        try:
            os.kill(self.pid, 0)
        except OSError as error:
            return error.errno == errno.EPERM
        return True

    def wait(self, timeout):
        """True if the process still lives after ``timeout`` seconds; False as soon as it is gone."""
        if self.pidfd is not None:
            poller = select.poll()
            poller.register(self.pidfd, select.POLLIN)
            return not poller.poll(max(0, int(timeout * 1000)))
        deadline = time.monotonic() + timeout
        while self.alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(self.POLL_SECONDS, left))
        return False

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def renew_until_gone(api, lease, watch, clock=utc_now):
    """Renew ``lease`` (as last written) every period while ``watch`` says the controller lives.

    Returns why it stopped: 'controller gone', 'released' or 'lost'. ``api`` has ``lease(method, ns, name, body)``
    (client.CoreV1Rest).
    """
    metadata = lease["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    holder = lease["spec"]["holderIdentity"]
    period = renew_period(lease["spec"]["leaseDurationSeconds"])
    while True:
        if not watch.wait(period):
            return "controller gone"
        try:
            # Bounded by the period: a request that hangs must not outlive the controller and renew after its end.
            lease = json.loads(api.lease("PUT", namespace, name, renewed_body(lease, clock()), timeout=period).data)
            continue
        except ApiException as error:
            if error.status == 404:
                return "released"
            if error.status != 409:
                # Forbidden, server errors: try again next period (the Lease has four periods to go).
                continue
        except Exception:  # pylint: disable=broad-except
            # The API server away (connection refused, timeouts): nobody else can take the Lease meanwhile.
            continue
        # 409: someone wrote the Lease since our last write.
        try:
            current = json.loads(api.lease("GET", namespace, name, timeout=period).data)
        except ApiException as error:
            if error.status == 404:
                return "released"
            continue
        except Exception:  # pylint: disable=broad-except
            continue
        outcome = renewal_outcome(current, holder)
        if outcome != "retry":
            return outcome
        lease = current


def _detach(keep=()):
    """A daemon's hygiene: its own session, nothing of the run's terminal or output pipes, default signals.

    ansible-playbook's stdout may be a pipe that AWX or a test reads to its end: holding it open would keep that
    reader waiting for as long as the renewer lives.
    """
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(devnull, descriptor)
    os.close(devnull)
    if os.path.isdir("/proc/self/fd"):
        for entry in os.listdir("/proc/self/fd"):
            descriptor = int(entry)
            try:
                if descriptor > 2 and descriptor not in keep and os.readlink("/proc/self/fd/" + entry).startswith("pipe:"):
                    os.close(descriptor)
            except OSError:
                pass
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def start_renewer(controller_pid, make_api, lease):
    """Fork the renewer of ``lease`` for as long as ``controller_pid`` lives; returns the renewer's pid.

    ``make_api`` builds the renewer's own API client in the renewer (never the worker's connections, which the
    worker goes on using and then closes).
    """
    watch = ProcessWatch(controller_pid)
    if not watch.alive():
        watch.close()
        raise OSError("the controller process {0} is gone".format(controller_pid))
    reader, writer = os.pipe()
    child = os.fork()
    if child:
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            renewer_pid = pipe.read().decode("ascii", "replace").strip()
        os.waitpid(child, 0)
        watch.close()
        if not renewer_pid.isdigit():
            raise OSError("the lock's renewer did not start: {0}".format(renewer_pid or "no answer"))
        return int(renewer_pid)
    # The first child: a new session, then a grandchild that init adopts (no zombie left to the worker).
    try:
        os.close(reader)
        _detach(keep=(writer,))
        if os.fork():
            os._exit(0)
        api = make_api()
        # Only a renewer that has its client says it started: otherwise the lock task fails and gives the lock back.
        os.write(writer, str(os.getpid()).encode("ascii"))
        os.close(writer)
        renew_until_gone(api, lease, watch)
    except BaseException:  # pylint: disable=broad-except
        pass
    os._exit(0)
