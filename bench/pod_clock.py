"""Times the GPU-occupied window from outside, the same way for every contender.

A watch on the demo namespace notes when the first demo pod is created and when the last one is
gone. Neither the playbook's own report nor the reference script's timestamps are trusted for it.
"""
from __future__ import annotations

import threading
import time

from kubernetes import client, config, watch


class PodClock:
    """Watches pods whose name starts with `prefix`; `window()` = first ADDED to last DELETED (seconds)."""

    def __init__(self, kubeconfig: str, namespace: str, prefix: str = "gpu-demo-"):
        config.load_kube_config(config_file=kubeconfig)
        self.core = client.CoreV1Api()
        self.namespace = namespace
        self.prefix = prefix
        self.first_added = None
        self.last_deleted = None
        self.live = set()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_exc):
        self._stop.set()

    def _run(self) -> None:
        listing = self.core.list_namespaced_pod(self.namespace)
        self._ready.set()
        stream = watch.Watch().stream(self.core.list_namespaced_pod, self.namespace,
                                      resource_version=listing.metadata.resource_version, timeout_seconds=3600)
        for change in stream:
            if self._stop.is_set():
                return
            name = change["object"].metadata.name
            if not name.startswith(self.prefix):
                continue
            moment = time.monotonic()
            if change["type"] == "ADDED":
                self.live.add(name)
                self.first_added = self.first_added or moment
            elif change["type"] == "DELETED":
                self.live.discard(name)
                self.last_deleted = moment

    def window(self, settle: float = 5.0) -> float:
        """Waits (briefly) until no demo pod is left, then returns the occupied window."""
        deadline = time.monotonic() + settle
        while self.live and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.first_added is None or self.last_deleted is None or self.live:
            raise RuntimeError(f"incomplete window: first={self.first_added} last={self.last_deleted} live={self.live}")
        return self.last_deleted - self.first_added
