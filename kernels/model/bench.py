"""Lesson 12's benchmark: one training step of the whole model, end to end.

    python -m course bench model        # on a GPU: GPT-2 small, bf16 autocast, S = 1024 and 4096

For each configuration (:data:`CONFIGS`: eager, ``torch.compile`` of the eager model in its
default mode and in "reduce-overhead" (which replays CUDA graphs of its own), then the course's
kernels swapped in one at a time until all run, and last all of them with the whole step
captured in one CUDA graph, :mod:`kernels.model.graphed`) it builds the same model from the same
seed and measures, in one run:

* the step's time (forward, backward, AdamW; the median of CUDA-event-timed steps), with eager's
  as the peer;
* its peak memory (``torch.cuda.max_memory_allocated`` over one step: weights, gradients,
  optimizer state and activations; for a step replayed from a CUDA graph, from its set-up on,
  since the graph's activations were allocated when it was captured), with eager's as the
  peer, and the bytes of (S, S) tensors the
  eager step saves for its backward (measured by a hook, :func:`breakdown.saved_square_bytes`);
* where the time goes (:func:`breakdown.by_category` of a profile, and the launch gaps);
* the loss of :data:`LOSS_STEPS` steps from one seed and data, eager and all course kernels;
  on a GPU also torch.compile's and eager's in fp32 (:data:`FP32`): the yardsticks of how far
  rounding alone moves the loss of this short run.

A configuration whose kernels cannot run here is skipped with the registry's reason (a
:class:`~course_utils.results.Note` says which and why); the two with CUDA graphs are skipped on
a CPU. On a CPU (no GPU) it runs the tiny model
in fp32 (the Triton kernels in their interpreter, which computes bf16 wrongly): a check that the
benchmark works, not a measurement of anything a GPU does.

Reading the records back (step times, profile parts, loss curves, the verdicts, a GPU's
committed records) is :mod:`kernels.model.records`; its names are imported here too.
"""

from __future__ import annotations

import gc
import statistics
from dataclasses import dataclass

import torch

from course_utils import env, requirements, results, timing
from course_utils.plots import stamped_table
from kernels.model import breakdown
from kernels.model.config import COURSE, EAGER, GPT2_SMALL, STEPS, TINY, ModelConfig, Providers
from kernels.model.records import (  # noqa: F401  (read from here: notebook 12, exercises)
    LESSON,
    RECORDED,
    TARGET_LOSS,
    loss_curves_from,
    parts,
    recorded,
    step_times,
    verdicts,
)
from kernels.model.train import Trainer, batch
from kernels.model.transformer import Transformer
from kernels.registry import KernelNotSupported

GPU_SHAPES = ((1024, 8), (4096, 2))  # (sequence, batch): 8192 tokens a step each
CPU_SHAPES = ((16, 2),)
GPU_LR, SEED = 6e-4, 0  # GPT-2 small's learning rate
LOSS_STEPS, LOSS_EVERY, LOSS_TAIL = 200, 20, 10  # the loss compared: the mean of the last 10
CPU_LOSS_STEPS = 12  # (4 with --quick)
# the loss curves drawn: on a GPU two yardsticks of the target too: torch.compile's (its fused
# kernels round in another order, as the course's do) and eager's in fp32 (no bf16 rounding at
# all). How far does rounding alone move the loss after 200 steps? (On an H100 at 8a27582: the
# fp32 run ended 1.5% below the bf16 one; docs/results/*-loss-yardstick-8a27582.log.)
LOSS_KEYS = ("eager", "all-course", "all-course-graph")
GPU_LOSS_KEYS = ("eager", "fp32", "compile", "all-course", "all-course-graph")


@dataclass(frozen=True)
class Config:
    key: str  # in the records' names
    label: str  # in tables and figures
    providers: Providers
    compiled: bool = False
    compile_mode: str = "default"  # torch.compile's mode
    graphed: bool = False  # the whole step captured in one CUDA graph (kernels/model/graphed.py)
    precision: str | None = None  # its own precision, not the run's (the fp32 yardstick)


CONFIGS = (Config("eager", "eager", EAGER),
           Config("compile", "torch.compile (eager model)", EAGER, compiled=True),
           Config("compile-ro", "torch.compile reduce-overhead (its own CUDA graphs)", EAGER,
                  compiled=True, compile_mode="reduce-overhead"),
           Config("+attention", "+ attention", STEPS["+ attention"]),
           Config("+norm", "+ norm", STEPS["+ norm"]),
           Config("all-course", "+ activation (all course kernels)", COURSE),
           Config("all-course-graph", "all course kernels, the step in one CUDA graph", COURSE,
                  graphed=True))
# trained for its loss curve only (its step time is not the lesson's question)
FP32 = Config("fp32", "eager in fp32", EAGER, precision="fp32")
BY_KEY = {c.key: c for c in (*CONFIGS, FP32)}


def setting(device: str | None = None) -> tuple[ModelConfig, str, tuple, float]:
    """(model, precision, (seq, batch) shapes, learning rate) for ``device``."""
    if (device or env.DEFAULT_DEVICE) == "cuda" and not env.TRITON_INTERPRET:
        return GPT2_SMALL, "bf16-autocast", GPU_SHAPES, GPU_LR
    return TINY, "fp32", CPU_SHAPES, 3e-3


def graph_unmet(config: Config, device: str) -> str | None:
    """Why ``config``'s CUDA graphs cannot run on ``device`` (None: they can, or it has none)."""
    if not (config.graphed or config.compile_mode == "reduce-overhead"):
        return None
    if device != "cuda":
        if reasons := requirements.unmet("cuda"):
            return "CUDA graphs need a CUDA GPU: " + "; ".join(reasons)
        return "CUDA graphs need a CUDA GPU, this run is on a CPU"
    return None


def trainer(config: Config, model_config: ModelConfig, precision: str, seq: int, batch_size: int,
            device: str, lr: float) -> Trainer | str:
    """A fresh model of seed :data:`SEED` with ``config``'s kernels, in a Trainer; or the reason
    it cannot run here (the registry's words)."""
    if config.compiled and (why := requirements.unmet("compile")):
        return "torch.compile: " + "; ".join(why)
    if why := graph_unmet(config, device):
        return why
    model = Transformer(model_config, seed=SEED).to(device)
    probe = Trainer(model, config.precision or precision, lr=lr, compiled=config.compiled,
                    compile_mode=config.compile_mode, capturable=config.graphed)
    norm_dtype = next(model.parameters()).dtype
    try:
        model.use(config.providers, batch=batch_size, seq=seq, dtype=probe.compute_dtype,
                  norm_dtype=norm_dtype)
    except KernelNotSupported as why:
        return str(why)
    return probe


def _tag(precision: str, seq: int, batch_size: int) -> str:
    return f"{precision} S={seq} B={batch_size}"


def _replays_a_graph(config: Config) -> bool:
    """Whether the step is a CUDA graph's replay (ours, or torch.compile's reduce-overhead)."""
    return config.graphed or config.compile_mode == "reduce-overhead"


def measure(config: Config, model_config: ModelConfig, precision: str, seq: int,
            batch_size: int, device: str, lr: float, min_time_s: float = 1.0) -> dict:
    """One configuration at one shape: ``{"ms", "peak MiB", "parts" (ms per part), "gaps ms"}``
    or ``{"skipped": reason}``."""
    if device == "cuda":  # what earlier configurations left (torch.compile's caches) is not ours
        gc.collect()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        # a replayed CUDA graph allocates nothing: its activations live in the graph's private
        # pool, allocated while it was captured; so a graphed step's peak counts from here
        torch.cuda.reset_peak_memory_stats()
    found = trainer(config, model_config, precision, seq, batch_size, device, lr)
    if isinstance(found, str):
        return {"skipped": found}
    tokens, targets = batch(model_config.vocab, batch_size, seq, 0, SEED, device)
    run_step = stepper(config, found, tokens, targets)
    # (on a CPU the interpreter takes a second a step: a few steps are enough to check the path)
    step = timing.benchmark(run_step, tokens, targets, name=f"step {config.key}",
                            min_time_s=min_time_s, warmup=3 if device == "cuda" else 1,
                            reps=None if device == "cuda" else 3, device=device)
    row = {"ms": step.median}
    if device == "cuda":
        torch.cuda.synchronize()
        if not _replays_a_graph(config):
            torch.cuda.reset_peak_memory_stats()
        run_step(tokens, targets)
        torch.cuda.synchronize()
        row["peak MiB"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    row["parts"], row["gaps ms"] = {}, None
    # the interpreter's kernels are Python, not ATen ops: a CPU profile sees only PyTorch's
    # (and records every Python call of the interpreter); so only the GPU's, or eager's
    if device == "cuda" or config.providers == EAGER:
        from course_utils.profiling import profile

        prof = profile(run_step, tokens, targets, name=f"10_step_{config.key}_S{seq}",
                       show=False, reps=2, warmup=1, device=device)
        row["parts"] = breakdown.by_category(prof)
        row["gaps ms"] = breakdown.launch_gaps(step.median, prof) if device == "cuda" else None
    if config.key == "eager":
        row["S×S MiB"] = breakdown.saved_square_bytes(found, tokens, targets) / 2**20
    del found, run_step
    if device == "cuda":
        torch._dynamo.reset()  # a compiled model's graphs hold its weights: let them go
        gc.collect()
        torch.cuda.empty_cache()
    return row


def stepper(config: Config, found: Trainer, tokens: torch.Tensor, targets: torch.Tensor):
    """``step(tokens, targets)`` of ``config``: the trainer's own, or its step captured in a CUDA
    graph from this batch's shape."""
    if not config.graphed:
        return found.step
    from kernels.model.graphed import GraphedStep

    return GraphedStep(found, tokens, targets)


def loss_curves(model_config: ModelConfig, precision: str, seq: int, batch_size: int,
                device: str, lr: float, steps: int, keys: tuple[str, ...] = LOSS_KEYS
                ) -> dict[str, list[float] | str]:
    """``{key: [loss of each step]}`` from the same seed and data (a reason where it cannot run)."""
    curves = {}
    for key in keys:
        found = trainer(BY_KEY[key], model_config, precision, seq, batch_size, device, lr)
        if isinstance(found, str):
            curves[key] = found
            continue
        losses, run_step = [], None
        for i in range(steps):
            tokens, targets = batch(model_config.vocab, batch_size, seq, i, SEED, device)
            if run_step is None:  # (captured from the first batch, its warm-up undone)
                run_step = stepper(BY_KEY[key], found, tokens, targets)
            losses.append(run_step(tokens, targets))
        curves[key] = [float(x) for x in losses]
    return curves


def final_loss(curve: list[float]) -> float:
    """The loss a run ends at: the mean of its last :data:`LOSS_TAIL` steps (one step's loss
    depends on its batch)."""
    return statistics.fmean(curve[-LOSS_TAIL:])


def run(quick: bool = False) -> list[results.Record | results.Note]:
    device = "cuda" if env.HAS_CUDA and not env.TRITON_INTERPRET else "cpu"
    model_config, precision, shapes, lr = setting(device)
    if quick:
        shapes = shapes[:1]
    records: list[results.Record | results.Note] = []
    table, skipped = [], {}
    for seq, batch_size in shapes:
        tag = _tag(precision, seq, batch_size)
        rows = {}
        for config in CONFIGS:
            if config.compiled and quick and device == "cpu":
                skipped[config.label] = "--quick on a CPU: compiling takes longer than the run"
                continue
            rows[config.key] = measure(config, model_config, precision, seq, batch_size,
                                       device, lr, min_time_s=0.2 if quick else 1.0)
        eager = rows["eager"]
        for key, row in rows.items():
            if "skipped" in row:
                skipped[BY_KEY[key].label] = row["skipped"]
                continue
            table.append({"config": BY_KEY[key].label, "S": seq, "B": batch_size,
                          "step ms": row["ms"], "vs eager": eager.get("ms", 0) / row["ms"],
                          "peak MiB": row.get("peak MiB"),
                          **{p: ms for p, ms in row["parts"].items()},
                          "gaps ms": row["gaps ms"]})
            records += _records(key, row, eager, tag)
    steps = LOSS_STEPS if device == "cuda" else CPU_LOSS_STEPS // (3 if quick else 1)
    seq, batch_size = shapes[0]
    curves = loss_curves(model_config, precision, seq, batch_size, device, lr, steps,
                         GPU_LOSS_KEYS if device == "cuda" else LOSS_KEYS)
    records += _loss_records(curves, _tag(precision, seq, batch_size))
    skipped.update({BY_KEY[k].label: why for k, why in curves.items() if isinstance(why, str)})
    print(stamped_table(table, title=f"One training step of {_name(model_config)}, {precision} "
                                     "(forward, backward, AdamW): ms and where it goes"))
    for line in verdicts([r for r in records if isinstance(r, results.Record)]):
        print(line)
    if skipped:
        text = "Skipped here: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())
        print(text)
        records.append(results.Note(LESSON, text))
    return records


def _name(model_config: ModelConfig) -> str:
    return "GPT-2 small" if model_config == GPT2_SMALL else "the tiny model"


def _records(key: str, row: dict, eager: dict, tag: str) -> list[results.Record]:
    found = [results.Record(LESSON, f"step {key} {tag}", round(row["ms"], 3), "ms",
                            peer=round(eager["ms"], 3), peer_what="eager step, same run")]
    if row.get("peak MiB") is not None:
        found.append(results.Record(LESSON, f"peak memory {key} {tag}", round(row["peak MiB"], 1),
                                    "MiB", peer=round(eager["peak MiB"], 1),
                                    peer_what="eager step's peak, same run"))
    if row.get("S×S MiB") is not None:
        found.append(results.Record(LESSON, f"saved S×S tensors {key} {tag}",
                                    round(row["S×S MiB"], 3), "MiB"))
    for part, ms in row["parts"].items():
        found.append(results.Record(LESSON, f"profile {key} {part} {tag}", round(ms, 4), "ms"))
    if row["gaps ms"] is not None:
        found.append(results.Record(LESSON, f"profile {key} launch gaps {tag}",
                                    round(row["gaps ms"], 4), "ms"))
    return found


def _loss_records(curves: dict, tag: str) -> list[results.Record]:
    found = []
    eager = curves.get("eager")
    for key, curve in curves.items():
        if isinstance(curve, str):
            continue
        for i in range(LOSS_EVERY, len(curve) + 1, LOSS_EVERY):
            found.append(results.Record(LESSON, f"loss {key} step={i} {tag}",
                                        round(curve[i - 1], 5), "loss"))
        peer = {} if isinstance(eager, str) or eager is None else {
            "peer": round(final_loss(eager), 5), "peer_what": "eager, same seed and data"}
        found.append(results.Record(LESSON, f"final loss {key} after {len(curve)} steps {tag}",
                                    round(final_loss(curve), 5), "loss", **peer))
    return found

