"""``python -m course doctor | run | bench | exercises | record | prepare | sanitize |
startup``."""

import sys


def main(argv: list[str]) -> int:
    commands = {
        "doctor": "course_utils.doctor",  # what this machine can run, lesson by lesson
        "run": "course_utils.run_notebooks",  # execute every notebook, print a summary
        "bench": "course.bench",  # lesson benchmarks -> docs/results/
        "exercises": "exercises.notebook",  # write a lesson's Exercises section
        "record": "course_utils.recordings",  # on a GPU: what %%requires cells show -> docs/
        "prepare": "course.prepare",  # lecture mode: build and cache everything first
        "sanitize": "kernels.sanitize",  # on a GPU: compute-sanitizer over every CUDA kernel
        "startup": "course.startup",  # what a fresh kernel costs before a notebook's first line
        "docs": "course.docs",  # README, teaching.md and docs/results/README.md from records
    }
    if not argv or argv[0] not in commands:
        print(f"usage: python -m course {{{'|'.join(commands)}}} [options]", file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(commands[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
