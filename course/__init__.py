"""The course's command line and everything that needs both the helpers and the kernels.

The packages form layers, and imports go one way only (``tests/test_layers.py`` checks it)::

    course/       python -m course doctor|run|bench|prepare|record|exercises|sanitize
    exercises/    the auto-checked exercises of every lesson, with their solutions
    kernels/      every kernel, by op, and the registry
    course_utils/ the helpers the notebooks and the kernels import (env, timing, nvrtc, ...)

A layer may import any layer below it, never one above: ``course_utils`` imports none of the
others, so a helper can never depend on a kernel.
"""
