"""The workload ``compute-sanitizer`` checks for the Hopper attention forward: every step on the
registry's small cases (``kernels.sanitize.workload``, the same as ``make sanitize`` runs).

    compute-sanitizer --tool synccheck python -m kernels.attention.hopper.sanitize_attention

The cases have ragged sequence lengths (77, 130, 97 keys: TMA's zero fill and the tail mask),
causal and cross shapes, and several key tiles, so every ring slot is reused and its barriers
change phase.
"""

import os
import sys

from course_utils import sanitizer
from kernels import sanitize


def main() -> int:
    os.environ.setdefault(sanitizer.VARIABLE, "by hand")  # the barrier waits' longer limit
    names = [k.name for k in sanitize.cuda_kernels(["attention/wgmma"])]
    return sanitize.workload(names)


if __name__ == "__main__":
    sys.exit(main())
