"""Fingerprint the weights of short fixed-seed PPO, APG and SHAC runs, to show a refactor exact.

Run it on two checkouts (``PYTHONPATH=<checkout>/src``) and compare: equal digests
mean the two versions compute bit-identical weights, optimizer moments and
normaliser statistics.

    python benchmarks/pinned_weights.py --out before.json
    python benchmarks/pinned_weights.py --out after.json --compare before.json
"""

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pinned_runs import RUNS, trained_modules


def _digest(modules: Iterable[nn.Module]) -> str:
    """SHA-256 over every floating-point tensor of the modules' state dicts, in order."""
    hasher = hashlib.sha256()
    for module in modules:
        for name, value in module.state_dict().items():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                hasher.update(name.encode())
                hasher.update(value.detach().cpu().contiguous().numpy().tobytes())
    return hasher.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the digests here (JSON)")
    parser.add_argument("--compare", type=Path, help="digests of another checkout to compare with")
    args = parser.parse_args()
    torch.set_num_threads(1)
    digests = {name: _digest(trained_modules(run()).values()) for name, run in RUNS.items()}
    for name, digest in digests.items():
        print(f"{name:24s} {digest}")
    if args.out is not None:
        args.out.write_text(json.dumps(digests, indent=2) + "\n")
    if args.compare is not None:
        other = json.loads(args.compare.read_text())
        differ = [name for name in digests if other.get(name) != digests[name]]
        print("bit-identical" if not differ else f"differ: {', '.join(differ)}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
