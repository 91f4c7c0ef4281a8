"""The GPU child of every Triton puzzle, lesson 03's (:mod:`exercises.puzzles`) and lesson 13's
(:mod:`exercises.triton_tools`): where the GPU's Triton cannot interpret a copy of a compiled
kernel, :mod:`exercises.puzzle_checks` runs the student's compiled kernel here, in a child
process under compute-sanitizer (:data:`exercises.kernel_checks.CHILDREN`). It sits above both
ladders, which import the engine: the engine never imports them.
"""

from __future__ import annotations

import json

import torch

from exercises import puzzle_checks, puzzles, triton_child, triton_tools


def puzzle_child(source: str, small: bool) -> dict:
    """The GPU child of every puzzle (:data:`exercises.kernel_checks.CHILDREN`: lesson 03's
    and lesson 13's), under compute-sanitizer: the compiled kernel on the puzzle's cases, each
    tensor an allocation of its own exact size."""
    answer = triton_child.imported(source)
    p = {**puzzles.PUZZLES, **triton_tools.PUZZLES}[answer.PUZZLE]
    for sizes in p.cases:
        print(json.dumps({"case": p.label(sizes)}), flush=True)
        out = torch.empty(p.output(sizes), device="cuda")
        puzzle_checks.run_case(p, getattr(answer, p.kernel), sizes,
                               lambda shape, _: torch.randn(*shape, device="cuda"), out)
        torch.cuda.synchronize()
    return {"ok": True}
