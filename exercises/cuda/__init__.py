"""CUDA sources of the exercises (``*.cu``) and :mod:`exercises.cuda.checks`, the machinery that
checks a CUDA kernel a student wrote: NVRTC and the SASS census on any machine, a run on awkward
shapes and compute-sanitizer in a child process on a GPU."""
