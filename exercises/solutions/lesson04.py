"""Solutions (and known-wrong answers) of lesson 04's exercises."""

SOLUTIONS = {
    "04.sweep": '''
import torch

from course_utils import nvrtc
from kernels.add import nvrtc as add_nvrtc

ADD = add_nvrtc.SOURCE


def add_variants(blocks, arch):
    return {block: nvrtc.compile(ADD, "add_kernel", arch=arch,
                                 defines={"scalar_t": torch.float32, "BLOCK": block})
            for block in blocks}
''',
}

WRONG = {
    # one compile, reused for every block size: BLOCK stays 256 in every variant
    "04.sweep": '''
import torch

from course_utils import nvrtc
from kernels.add import nvrtc as add_nvrtc

ADD = add_nvrtc.SOURCE


def add_variants(blocks, arch):
    compiled = nvrtc.compile(ADD, "add_kernel", arch=arch,
                             defines={"scalar_t": torch.float32, "BLOCK": 256})
    return {block: compiled for block in blocks}
''',
}
