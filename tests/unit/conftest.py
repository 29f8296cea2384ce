"""Make `ansible_collections.gpuops.scheduling` importable from the checkout (see `make setup`)."""
import os
import sys
from pathlib import Path

_COLLECTIONS = Path(__file__).resolve().parents[2] / ".collections"
if str(_COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(_COLLECTIONS))

# The PodResources tests leave grpcio's threads running in this process; with grpcio's fork support
# on, a child that a later test forks (AnsibleModule.run_command) runs grpcio's fork handlers and can
# abort before it execs. A module process never forks after its PodResources call (see
# gpu_process_facts.main); the tests share one process, so they turn the handlers off.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
