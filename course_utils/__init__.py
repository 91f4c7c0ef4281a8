"""Helpers that the course notebooks import.

``import course_utils`` (or any submodule) first prepares the process (``CUDA_HOME``, the Triton
interpreter on machines without a GPU; see :mod:`course_utils.env`). In a notebook,
``%load_ext course_utils`` adds the ``%%requires`` cell magic.
"""

from course_utils import env
from course_utils.env import DEFAULT_DEVICE, HAS_CUDA, device_info, environment
from course_utils.requirements import requires

__all__ = ["DEFAULT_DEVICE", "HAS_CUDA", "device_info", "env", "environment", "requires"]


def load_ipython_extension(ipython) -> None:
    """``%load_ext course_utils``: register ``%%requires``."""
    from course_utils.magic import register

    register(ipython)
