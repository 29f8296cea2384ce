"""Make `ansible_collections.gpuops.scheduling` importable from the checkout (see `make setup`)."""
import sys
from pathlib import Path

_COLLECTIONS = Path(__file__).resolve().parents[2] / ".collections"
if str(_COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(_COLLECTIONS))
