"""The syllabus: the one place where lesson numbers live.

Every lesson is known everywhere else by its **topic slug** (``"attention"``, ``"mma_matmul"``):
exercise ids are ``"<slug>.<name>"`` (``"attention.online_step"``), record keys in
``docs/results/`` are ``"<slug>"`` or ``"<slug>.<part>"`` (``"cuda_gelu.row_sum"``), recordings
live in ``docs/recordings/<slug>.json``. The number a student sees, and the notebook's file name,
come from the lesson's place in :data:`LESSONS`, which is the teaching order: the core path
first, then the optional tracks. Moving a lesson is one edit here (and a ``git mv`` the tests
ask for).

The numbering of earlier versions of the course is kept in :data:`FORMER` so that old exercise
ids, old record keys and old recording files stay readable (:func:`topic_key`).

This module imports nothing from the course: anything may read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CORE = "core"
#: Optional tracks, in the order the syllabus lists them, with what each is for.
TRACKS = {
    CORE: "the path every student takes: measure, fuse, write CUDA and Triton kernels, "
          "tensor cores, attention, the registry, a model",
    "triton": "more Triton: the tools you reach for daily (autotune, do_bench, block pointers, "
              "what torch.compile writes)",
    "reference": "look-ups for when something fails: NVRTC's traps, inline PTX",
    "hopper": "Hopper GPUs (H100, H200): TMA, wgmma, warp specialisation, attention at "
              "cuDNN's level",
    "systems": "more than one GPU: collectives, data parallelism, kernels over symmetric memory",
    "patterns": "the canonical parallel patterns: a scan, thread coarsening",
}


@dataclass(frozen=True)
class Lesson:
    slug: str  # identity: exercise ids, record keys and recordings use it
    name: str  # the notebook's name after its number: NN_<name>.ipynb
    title: str
    track: str
    minutes: int  # the time plan in the notebook's first cell adds up to this
    prerequisites: tuple[str, ...] = ()  # slugs of the lessons it builds on
    exercises: tuple[str, ...] = ()  # short names: "<slug>.<name>" is the id
    kind: str = "lecture"  # "lecture" (in class), "lab" (hands-on, at home or a lab), "reference"
    needs: str = ""  # what it needs a GPU for, in a few words (README's table)

    @property
    def number(self) -> int:
        return NUMBERS[self.slug]

    @property
    def label(self) -> str:
        """How a student sees it: ``"09"``."""
        return f"{self.number:02d}"

    @property
    def stem(self) -> str:
        return f"{self.label}_{self.name}"

    @property
    def notebook(self) -> str:
        return f"{self.stem}.ipynb"

    @property
    def exercise_ids(self) -> tuple[str, ...]:
        return tuple(f"{self.slug}.{e}" for e in self.exercises)

    @property
    def core(self) -> bool:
        return self.track == CORE


LESSONS: tuple[Lesson, ...] = (
    # ---- the core path ------------------------------------------------------------------------
    Lesson("profiling", "benchmarking_and_profiling", "Benchmarking and profiling", CORE, 75,
           (), ("sync", "tflops", "dominant"),
           needs="GPU timings and kernel names"),
    Lesson("fusion", "kernel_fusion", "Kernel fusion: the warehouse and the factory", CORE, 75,
           ("profiling",), ("reverse", "bias_gelu", "predict", "silu_mul"),
           needs="bandwidth numbers and kernel counts"),
    Lesson("puzzles", "triton_puzzles", "The Triton puzzle ladder", CORE, 90,
           ("fusion",),
           ("add", "add_blocks", "outer", "outer_blocks", "row_sum", "col_sum", "long_sum",
            "softmax", "long_softmax", "matvec", "dot", "attention"),
           kind="lab", needs="nothing (the interpreter checks every puzzle)"),
    Lesson("first_kernels", "cuda_first_kernels", "CUDA from the first kernel", CORE, 65,
           ("fusion",), ("flip_rows", "histogram"),
           kind="lab", needs="running and timing the kernels"),
    Lesson("cuda_gelu", "cuda_gelu", "GeLU in CUDA (and Triton beside it)", CORE, 75,
           ("fusion", "first_kernels"), ("index", "oob", "silu", "transpose", "warp_sum"),
           needs="running the CUDA kernels"),
    Lesson("nvrtc", "nvrtc", "Run-time compilation with NVRTC", CORE, 75,
           ("cuda_gelu",), ("sweep", "occupancy", "divergence", "tiled_matmul"),
           needs="launching kernels"),
    Lesson("mma_matmul", "mma_matmul", "A tensor-core matmul with mma.sync", CORE, 75,
           ("fusion", "cuda_gelu", "nvrtc"), ("smem", "swizzle", "swizzle_cuda", "triton_dot"),
           needs="running and timing the steps"),
    Lesson("mma_variants", "mma_variants",
           "One tensor-core source, every variant: check, tune, measure", CORE, 70,
           ("nvrtc", "mma_matmul"), ("feed", "native", "config"),
           needs="running and timing the variants"),
    Lesson("attention", "attention", "Attention: from three kernels to FlashAttention in Triton",
           CORE, 56, ("fusion", "puzzles", "mma_matmul"),
           ("online_step", "attend_block", "key_range", "backward_dkdv"),
           needs="GPU timings, profiles and peak memory"),
    Lesson("rmsnorm", "rmsnorm", "A fused RMSNorm, forward and backward", CORE, 60,
           ("fusion", "puzzles"), ("backward",),
           kind="lab", needs="the measurements"),
    Lesson("byok", "bring_your_own_kernel", "Bring your own kernel", CORE, 72,
           ("fusion", "nvrtc", "mma_matmul", "mma_variants"), ("supports", "where", "byok"),
           needs="launching the CUDA kernels, GPU timings"),
    Lesson("model", "kernels_in_a_model", "The kernels in a model", CORE, 73,
           ("profiling", "fusion", "attention", "rmsnorm", "byok"),
           ("predict", "swap", "cross_entropy"),
           needs="GPT-2 small's step times, profile and memory"),
    # ---- optional tracks ----------------------------------------------------------------------
    Lesson("triton_tools", "triton_tools", "Triton's everyday tools", "triton", 61,
           ("puzzles",), ("transpose",),
           kind="lab", needs="the measurements and the generated Triton code"),
    Lesson("attention_variants", "attention_variants",
           "Attention variants: a sliding window, decoding, packed sequences", "triton", 55,
           ("attention",), ("window_range", "combine_splits", "varlen_locate", "flash_tiles",
                            "flash_triton"),
           kind="lab", needs="the bench's records (every kernel here runs in the interpreter)"),
    Lesson("nvrtc_reference", "nvrtc_reference",
           "NVRTC reference: headers, half operators, template names", "reference", 30,
           ("nvrtc",), ("libcu", "generic"),
           kind="reference", needs="launching through torch"),
    Lesson("hopper_matmul", "hopper_matmul", "Hopper: TMA, wgmma and warp specialisation",
           "hopper", 60, ("mma_matmul", "mma_variants"), ("descriptor", "tile_order", "parity"),
           needs="nothing (NVRTC compiles for sm_90a anywhere)"),
    Lesson("hopper_measured", "hopper_matmul_measured",
           "The Hopper matmul measured: its ceiling, its pipeline, every size, scaled fp8",
           "hopper", 65, ("mma_variants", "hopper_matmul"), ("stages", "waves", "promote"),
           needs="a Hopper GPU (sm_90) to launch and time"),
    Lesson("hopper_attention", "attention_on_hopper", "Attention on Hopper: the forward",
           "hopper", 64, ("attention", "hopper_matmul", "hopper_measured"), ("pingpong",),
           needs="a Hopper GPU (sm_90) to launch and time"),
    Lesson("hopper_backward", "attention_backward_and_fp8",
           "Attention on Hopper: the backward and fp8", "hopper", 62,
           ("attention", "hopper_attention"), ("dq_add", "quantize"),
           needs="a Hopper GPU (sm_90) for the backward, sm_89+ for fp8"),
    Lesson("distributed", "beyond_one_gpu", "Beyond one GPU", "systems", 70,
           ("profiling", "model"), ("halves", "fsdp_backward", "one_shot", "pipeline"),
           needs="2 GPUs for NCCL (every cell runs on 2 CPU processes with gloo)"),
    Lesson("patterns", "parallel_patterns", "Parallel patterns: a scan, and thread coarsening",
           "patterns", 60, ("first_kernels", "cuda_gelu", "nvrtc", "puzzles"),
           ("block_scan",),
           kind="lab", needs="timing the scans and the coarsening sweep"),
)

NUMBERS = {lesson.slug: i for i, lesson in enumerate(LESSONS, start=1)}
BY_SLUG = {lesson.slug: lesson for lesson in LESSONS}


@dataclass(frozen=True)
class Former:
    """How an earlier numbering of the course named a lesson."""

    prefix: str  # old exercise-id prefix: "08" in "08.online_step"
    stem: str  # old notebook and recordings stem
    record_keys: dict[str, str] = field(default_factory=dict)  # old record key -> new


FORMER: dict[str, Former] = {
    "profiling": Former("01", "01_benchmarking_and_profiling",
                        {"01_benchmarking_and_profiling": "profiling"}),
    "fusion": Former("02", "02_kernel_fusion", {"02_kernel_fusion": "fusion"}),
    "cuda_gelu": Former("03", "03_cuda_gelu",
                        {"03_cuda_gelu": "cuda_gelu", "03_row_sum": "cuda_gelu.row_sum",
                         "03_strided_copy": "cuda_gelu.strided_copy"}),
    "nvrtc": Former("04", "04_nvrtc", {"04_nvrtc": "nvrtc"}),
    "mma_matmul": Former("05", "05_mma_matmul",
                         {"05_matmul_steps": "mma_matmul.steps",
                          "05_triton_dot": "mma_matmul.triton_dot"}),
    # the variants' records kept the key of the lesson they were measured in before its split
    "mma_variants": Former("06", "06_mma_variants", {"05_mma_matmul": "mma_variants"}),
    # the sizes' records belong to the lesson their section moved to when hopper_matmul was split;
    # the staircase's (the steps against the ceiling and cuBLAS) keep the key of the steps' lesson
    "hopper_matmul": Former("07", "07_hopper_matmul",
                            {"07_hopper_matmul": "hopper_matmul",
                             "07_hopper_sizes": "hopper_measured.sizes",
                             "hopper_matmul.sizes": "hopper_measured.sizes"}),
    "attention": Former("08", "08_attention",
                        {"08_attention": "attention",
                         "08_attention_variants": "attention_variants",
                         # the variants' section became a lesson of its own
                         "attention.variants": "attention_variants"}),
    "byok": Former("09", "09_bring_your_own_kernel",
                   {"06_bring_your_own_kernel": "byok", "04_nvrtc_launch": "byok.launch"}),
    "model": Former("10", "10_kernels_in_a_model", {"10_kernels_in_a_model": "model"}),
    "distributed": Former("11", "11_beyond_one_gpu",
                          {"11_beyond_one_gpu": "distributed",
                           "11_tensor_parallel": "distributed.tensor_parallel",
                           "11_data_parallel": "distributed.data_parallel"}),
    "hopper_attention": Former("12", "12_attention_on_hopper"),
    "hopper_backward": Former("13", "13_attention_backward_and_fp8",
                              {"08_attention_fp8": "hopper_backward.fp8"}),
    "nvrtc_reference": Former("A1", "A1_nvrtc_reference"),
    "puzzles": Former("A2", "A2_triton_puzzles"),
    "rmsnorm": Former("A3", "A3_rmsnorm", {"02_rmsnorm": "rmsnorm"}),
    "triton_tools": Former("A4", "A4_triton_tools"),
    "first_kernels": Former("A5", "A5_cuda_first_kernels",
                            {"A5_first_kernels": "first_kernels",
                             "A5_histogram": "first_kernels.histogram"}),
}

#: Exercises that moved to another lesson when theirs was split: former id -> id. A student's
#: notebook saved before the split still checks with the id it holds.
MOVED_EXERCISES: dict[str, str] = {
    **{f"hopper_matmul.{name}": f"hopper_measured.{name}"
       for name in ("stages", "waves", "promote")},
    **{f"attention.{name}": f"attention_variants.{name}"
       for name in ("window_range", "combine_splits", "varlen_locate")}}

_OLD_PREFIX = {f.prefix: slug for slug, f in FORMER.items()}
_OLD_STEM = {f.stem: slug for slug, f in FORMER.items()}
_OLD_RECORD_KEY = {old: new for f in FORMER.values() for old, new in f.record_keys.items()}


def lesson(key: str) -> Lesson:
    """The lesson a slug, an exercise id, a record key, a notebook stem (new or former) or a
    number as students see it belongs to: ``lesson("attention.online_step")``,
    ``lesson("12_attention_on_hopper")``, ``lesson("09")``."""
    if key.isdigit() and 1 <= int(key) <= len(LESSONS):
        return LESSONS[int(key) - 1]
    new = topic_key(key)
    slug = new.split(".", 1)[0]
    if slug in BY_SLUG:
        return BY_SLUG[slug]
    for candidate in LESSONS:
        if new in (candidate.stem, candidate.notebook):
            return candidate
    raise KeyError(f"no lesson {key!r} in the syllabus; lessons are {', '.join(BY_SLUG)}")


def topic_key(key: str) -> str:
    """A key in the current vocabulary: former record keys, exercise ids (``"08.online_step"``,
    or ``"hopper_matmul.stages"`` of an exercise that moved, :data:`MOVED_EXERCISES`) and
    notebook stems are translated; current keys come back unchanged."""
    if key in _OLD_RECORD_KEY:
        return _OLD_RECORD_KEY[key]
    if key in _OLD_STEM:
        return _OLD_STEM[key]
    prefix, dot, rest = key.partition(".")
    if dot and prefix in _OLD_PREFIX:
        key = f"{_OLD_PREFIX[prefix]}.{rest}"
    return MOVED_EXERCISES.get(key, key)


def core_path() -> list[Lesson]:
    return [lesson for lesson in LESSONS if lesson.core]


def track(name: str) -> list[Lesson]:
    if name not in TRACKS:
        raise ValueError(f"track expected one of {', '.join(TRACKS)}, got {name!r}")
    return [lesson for lesson in LESSONS if lesson.track == name]


def next_lesson(slug: str) -> Lesson | None:
    """What comes after a lesson: the next one of its track; after the core path's last lesson,
    None (the tracks branch from there)."""
    same = track(BY_SLUG[slug].track)
    index = [lesson.slug for lesson in same].index(slug)
    return same[index + 1] if index + 1 < len(same) else None
