"""The launch path of course_utils.nvrtc, without a GPU: the driver call is replaced by a
recorder, so what is checked is the Python side of a launch (what is read once, what each
launch does, what it hands the driver). Times are never asserted: lesson 11's overhead
benchmark measures them on a GPU."""

import ctypes
import threading
import types

import pytest
import torch

from course_utils.nvrtc import launch
from course_utils.nvrtc.arguments import ArgPacker, Param

CPU = torch.device("cpu")
SOURCE = """
struct Desc { unsigned long long words[16]; };
extern "C" __global__ void k(const float* x, float* out, long long n, float alpha,
                             const __grid_constant__ Desc desc) {}
"""


class Desc(ctypes.Structure):  # 128 bytes, like a CUtensorMap
    _fields_ = [("words", ctypes.c_uint64 * 16)]


def _params():
    return [Param("x", "float", True, "const float* x"), Param("out", "float", True, "float* out"),
            Param("n", "long long", False, "long long n"),
            Param("alpha", "float", False, "float alpha")]


def _read(pointers, i, ctype):
    return ctypes.cast(pointers[i], ctypes.POINTER(ctype)).contents.value


def test_packer_puts_each_value_where_the_driver_reads_it():
    x, out = torch.ones(4), torch.zeros(4)
    packer = ArgPacker("k", _params(), CPU)  # owns the slots the pointers point at
    pointers = packer.pack((x, out, 2**40, 0.5))
    assert _read(pointers, 0, ctypes.c_void_p) == x.data_ptr()
    assert _read(pointers, 1, ctypes.c_void_p) == out.data_ptr()
    assert _read(pointers, 2, ctypes.c_int64) == 2**40
    assert _read(pointers, 3, ctypes.c_float) == 0.5


def test_packer_refuses_what_check_args_refuses_with_its_message():
    packer, x = ArgPacker("k", _params(), CPU), torch.ones(4)
    with pytest.raises(TypeError, match=r"k takes 4 arguments"):
        packer.pack((x, x, 4))
    with pytest.raises(TypeError, match=r"argument 1 \(float\* out\) expected a "
                                        r"torch.float32 tensor \(float\), got torch.float64"):
        packer.pack((x, x.double(), 4, 1.0))
    with pytest.raises(TypeError, match=r"argument 2 \(long long n\) expected a Python int, "
                                        "got float"):
        packer.pack((x, x, 4.0, 1.0))
    with pytest.raises(TypeError, match="does not fit in long long"):
        packer.pack((x, x, 2**63, 1.0))
    with pytest.raises(TypeError, match=r"argument 3 \(float alpha\) expected a Python float, "
                                        "got bool"):
        packer.pack((x, x, 4, True))
    with pytest.raises(TypeError, match="expected a tensor on cuda:0, got one on cpu"):
        ArgPacker("k", _params(), 0).pack((x, x, 4, 1.0))


def test_packer_accepts_what_check_args_accepts_beyond_the_quick_checks():
    import enum

    class Size(enum.IntEnum):
        N = 12

    x, packer = torch.ones(4), ArgPacker("k", _params(), CPU)
    pointers = packer.pack((x, x, Size.N, 2))
    assert _read(pointers, 2, ctypes.c_int64) == 12 and _read(pointers, 3, ctypes.c_float) == 2


def test_a_structure_goes_by_value_and_the_next_launch_gets_its_own_slot_back():
    params = [*_params(), Param("desc", "Desc", False, "const __grid_constant__ Desc desc")]
    packer, x = ArgPacker("k", params, CPU), torch.ones(4)
    desc = Desc()
    desc.words[3] = 77
    pointers = packer.pack((x, x, 3, 1.0, desc))
    assert pointers[4] == ctypes.addressof(desc)
    # a scalar parameter given a ctypes value (the escape hatch), then a plain int again
    five = ctypes.c_int64(5)  # the caller keeps a by-value argument alive until the launch
    pointers = packer.pack((x, x, five, 1.0, desc))
    assert _read(pointers, 2, ctypes.c_int64) == 5
    pointers = packer.pack((x, x, 6, 1.0, desc))
    assert _read(pointers, 2, ctypes.c_int64) == 6
    with pytest.raises(TypeError, match="cannot pass a Desc from Python; pass a ctypes value"):
        packer.pack((x, x, 6, 1.0, 7))


def test_threads_pack_into_their_own_buffers():
    packer, x = ArgPacker("k", _params(), CPU), torch.ones(4)
    mine = packer.pack((x, x, 1, 1.0))
    theirs = []

    def pack_there():  # read while the thread lives: its buffers go when it ends
        packed = packer.pack((x, x, 2, 2.0))
        theirs.append((ctypes.addressof(packed), _read(packed, 2, ctypes.c_int64)))

    thread = threading.Thread(target=pack_there)
    thread.start()
    thread.join()
    assert ctypes.addressof(mine) != theirs[0][0]
    assert _read(mine, 2, ctypes.c_int64) == 1 and theirs[0][1] == 2


class _Driver:
    """Stands in for libcuda: records each cuLaunchKernel with the values it was given."""

    def __init__(self):
        self.launches = []

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, pointers, extra):
        self.launches.append(((gx, gy, gz), (bx, by, bz), shared, stream,
                              _read(pointers, 2, ctypes.c_int64)))
        return 0

    def cuLaunchKernelEx(self, config, func, pointers, extra):  # a cluster launch
        c = config._obj
        attribute = c.attrs[0]
        assert c.numAttrs == 1 and attribute.id == 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        self.launches.append(((c.gridDimX, c.gridDimY, c.gridDimZ),
                              (c.blockDimX, c.blockDimY, c.blockDimZ), c.sharedMemBytes,
                              c.hStream, _read(pointers, 2, ctypes.c_int64),
                              tuple(attribute.value[:3])))
        return 0


@pytest.fixture
def fake_gpu(monkeypatch):
    driver = _Driver()
    parsed = []
    real_parameters = launch.parameters
    monkeypatch.setattr(launch.cuda_libs, "driver_library", lambda: driver)
    monkeypatch.setattr(launch, "_load_function", lambda compiled, device: (None, "func"))
    monkeypatch.setattr(launch, "_raw_stream", lambda device: 1234)
    monkeypatch.setattr(launch.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "_current_device", lambda: 0)
    monkeypatch.setattr(launch, "parameters", lambda c: parsed.append(c) or real_parameters(c))
    compiled = types.SimpleNamespace(program=SOURCE, name="k", aliases=(), lowered_name="k")
    kernel = launch.Kernel(compiled, 0)
    kernel._packer = ArgPacker("k", kernel.params, CPU)  # CPU tensors stand in for the GPU's
    return kernel, driver, parsed


def test_a_loaded_kernel_parses_its_parameters_once_and_launches_many_times(fake_gpu):
    kernel, driver, parsed = fake_gpu
    x, desc = torch.ones(4), Desc()
    checked = []
    real_check = launch.check_args
    launch.check_args = lambda *a: checked.append(a) or real_check(*a)
    try:
        for n in range(100):
            kernel(x, x, n, 1.0, desc, grid=(n + 1, 2), block=128)
        bound = kernel.launcher(grid=7, block=(32, 4), shared_mem=1024)
        bound(x, x, 100, 1.0, desc)
    finally:
        launch.check_args = real_check
    assert len(parsed) == 1, "the parameter list is read once, when the kernel is loaded"
    assert checked == [], "good arguments never take the slow, explaining path"
    assert [n for *_, n in driver.launches] == list(range(101))
    assert driver.launches[5][:4] == ((6, 2, 1), (128, 1, 1), 0, 1234)
    assert driver.launches[-1][:4] == ((7, 1, 1), (32, 4, 1), 1024, 1234)


def test_a_cluster_launch_declares_its_cluster_at_launch(fake_gpu):
    # lesson 16's step 5: blocks in pairs, through cuLaunchKernelEx's cluster attribute; every
    # other launch stays on plain cuLaunchKernel
    kernel, driver, _ = fake_gpu
    x, desc = torch.ones(4), Desc()
    kernel(x, x, 7, 1.0, desc, grid=132, block=384, cluster=2)
    prepared = kernel.prepare(x, x, 8, 1.0, desc, grid=4, block=128, cluster=2)
    prepared()
    kernel(x, x, 9, 1.0, desc, grid=3, block=32)
    assert driver.launches[0][:4] == ((132, 1, 1), (384, 1, 1), 0, 1234)
    assert [launch[4] for launch in driver.launches] == [7, 8, 9]
    assert [launch[5:] for launch in driver.launches] == [((2, 1, 1),), ((2, 1, 1),), ()]
    with pytest.raises(ValueError, match="cluster expected a block count >= 1 that divides"):
        kernel(x, x, 1, 1.0, desc, grid=3, block=32, cluster=2)


def test_bad_launch_shapes_are_value_errors_naming_what(fake_gpu):
    kernel, driver, _ = fake_gpu
    x = torch.ones(4)
    with pytest.raises(ValueError, match="block expected at most 1024 threads"):
        kernel.launcher(grid=1, block=(64, 32))
    with pytest.raises(ValueError, match="grid expected 1-3 positive ints"):
        kernel(x, x, 1, 1.0, Desc(), grid=0, block=1)
    with pytest.raises(ValueError, match="shared_mem expected a byte count"):
        kernel(x, x, 1, 1.0, Desc(), grid=1, block=1, shared_mem=-1)
    assert driver.launches == []


def test_a_prepared_launch_is_checked_once_and_takes_a_new_output_unchecked(fake_gpu):
    kernel, _, _ = fake_gpu
    seen = []  # what the driver reads: the output's address, n, the descriptor's first word

    def driver_launch(func, *shape_and_stream, pointers, extra):
        seen.append((_read(pointers, 1, ctypes.c_uint64), _read(pointers, 2, ctypes.c_int64),
                     ctypes.cast(pointers[4], ctypes.POINTER(Desc)).contents.words[0]))
        return 0

    kernel._cu_launch = lambda *args: driver_launch(*args[:-2], pointers=args[-2],
                                                    extra=args[-1])
    x, out, other = torch.ones(4), torch.zeros(4), torch.zeros(8)
    first, second = Desc(), Desc()
    first.words[0], second.words[0] = 11, 22
    with pytest.raises(TypeError, match=r"argument 2 \(long long n\) expected a Python int"):
        kernel.prepare(x, out, 1.5, 1.0, first, grid=1, block=32)
    prepared = kernel.prepare(x, out, 7, 1.0, first, grid=(3, 2), block=64)
    assert (prepared.grid, prepared.block) == ((3, 2, 1), (64, 1, 1))
    kernel(x, x, 99, 1.0, second, grid=1, block=1)  # the kernel's own launches change nothing
    prepared()
    prepared.set_address(1, other.data_ptr())
    prepared.set_value(4, second)
    prepared()
    assert seen[1:] == [(out.data_ptr(), 7, 11), (other.data_ptr(), 7, 22)]
