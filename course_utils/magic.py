"""The ``%%requires`` cell magic.

    %%requires cuda nvcc
    ...a cell that needs a CUDA GPU and nvcc...

When a requirement is missing the cell prints one line saying what is missing and does not run;
the notebook goes on. Under that line it shows what the cell printed and drew on a real GPU,
when ``docs/recordings/`` holds a recording of it (see :mod:`course_utils.recordings`), labelled
with the device, torch, date and git revision, and marked stale if the cell changed since.
Under ``COURSE_STRICT=1`` (``make test-gpu``) a missing requirement is an error, so a GPU run
can never pass by skipping, except an optional extra (``requirements.OPTIONAL``: the CuTe
DSL): the cell skips with its line, and the test run lists it at the end. An unknown
requirement is always an error that lists the known ones.
"""

from __future__ import annotations

from course_utils import requirements


def requires_magic(line: str, cell: str, ipython=None) -> None:
    names = line.replace(",", " ").split()
    if not names:
        raise ValueError(f"%%requires needs at least one requirement; known: "
                         f"{requirements.known_requirements()}")
    if not requirements.requires(*names):
        # what the cell showed on a GPU, when the course has a recording of it
        from course_utils import recordings

        recordings.show(f"%%requires {line}\n{cell}")
        return
    if cell.rstrip().endswith(";"):
        # IPython hides a cell's last value after ";" by reading the source it stored in the
        # history: the outer "%%requires" cell, not this body. Ending the body with a statement
        # hides the value here too (a figure's repr in a cell that ends in ";").
        cell = cell.rstrip() + "\npass"
    result = ipython.run_cell(cell, store_history=False)
    # run_cell has already shown the traceback; re-raise so the cell itself counts as failed
    # (nbval and "run all" stop on it) instead of looking green.
    if not result.success:
        raise RuntimeError("the cell under %%requires failed (traceback above)") from (
            result.error_in_exec or result.error_before_exec)


def register(ipython) -> None:
    ipython.register_magic_function(
        lambda line, cell: requires_magic(line, cell, ipython),
        magic_kind="cell", magic_name="requires")
    from course_utils import shared_gpu

    if shared_gpu.SHARED:
        ipython.events.register("post_run_cell", shared_gpu.give_back_cached_memory)
