"""Named results of the page that measures any model (``lectures/own_model.md``).

Each function returns a frozen dataclass. Its number fields are what the page quotes (and
pins, under the field's name); anything else it returns, for a printed table, is held in
fields that are not numbers, so it is not pinned. The measurements themselves are
:mod:`standarderror.experiments.measure`'s; these functions read their results (the dicts
that :func:`~standarderror.experiments.measure.calibration`,
:func:`~standarderror.experiments.measure.conformal` and
:func:`~standarderror.experiments.measure.spectral` return), so every number is the
measurement's own, bit for bit.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field

import numpy as np
import torch
from safetensors.torch import load_file

from ..llm import interface
from . import measure
from . import multiple_choice as mc


def largest_gap(model_a, model_b, x) -> float:
    """The largest absolute difference between two models' next-token log-probabilities on
    the windows ``x`` (:meth:`~standarderror.llm.interface.LanguageModel.window_logprobs`)."""
    return np.abs(model_a.window_logprobs(x) - model_b.window_logprobs(x)).max()


@dataclass(frozen=True)
class NearMiss:
    """The export with the tanh approximation of GELU declared: the largest log-probability
    difference from the native model (``wrong_gap``)."""

    wrong_gap: float


def near_miss(native, directory, x) -> NearMiss:
    """Copy the exported GPT-2 ``directory``, declare ``gelu_new`` as its activation, load it
    and compare it with ``native`` on ``x``. The copy is ``wrong-gelu`` beside ``directory``."""
    wrong = shutil.copytree(directory, f"{os.path.dirname(str(directory))}/wrong-gelu")
    with open(f"{wrong}/config.json") as f:
        config = json.load(f)
    config["activation_function"] = "gelu_new"
    with open(f"{wrong}/config.json", "w") as f:
        f.write(json.dumps(config))
    gap = largest_gap(native, interface.HFModel(wrong, device="cpu"), x)
    return NearMiss(wrong_gap=gap)


@dataclass(frozen=True)
class CalibrationRun:
    """The calibration measurement at T = 1: accuracy (``acc``) and ECE (``ece_t1``) on
    ``n_pred`` predictions with ``ece_bins`` bins; the fitted temperature (``t_fit``); the
    predictions per block of log-probabilities (``block_rows``), and how many windows of
    ``window_tokens`` tokens fit one block at a vocabulary of ``vocab_tokens``
    (``big_windows``). ``rows``: the table's rows by temperature."""

    acc: float
    ece_t1: float
    n_pred: int
    ece_bins: int
    t_fit: float
    block_rows: int
    big_windows: int
    rows: dict = field(repr=False)


def calibration_run(cal: dict, *, vocab_tokens: int = 32_000,
                    window_tokens: int = 64) -> CalibrationRun:
    """Read :func:`~standarderror.experiments.measure.calibration`'s result ``cal``."""
    rows = {r["temperature"]: r for r in cal["table"]}
    return CalibrationRun(
        acc=rows[1.0]["accuracy"], ece_t1=rows[1.0]["ece"], n_pred=cal["rows"],
        ece_bins=cal["settings"]["bins"], t_fit=cal["fitted"]["temperature"],
        block_rows=cal["memory"]["block_rows"],
        big_windows=interface.MAX_ELEMENTS // (vocab_tokens * window_tokens), rows=rows)


def table_matches(cal: dict, reference: dict, *, ece_tolerance: float = 1e-5) -> bool:
    """Whether every row of the measured temperature table has the accuracy of the reference
    table's row (exactly) and its ECE (to ``ece_tolerance``)."""
    return all(a["accuracy"] == b["accuracy"] and abs(a["ece"] - b["ece"]) < ece_tolerance
               for a, b in zip(cal["table"], reference["rows"]))


@dataclass(frozen=True)
class Intervals:
    """The calibration measurement's intervals at T = 1 from ``draws`` resampled windows at
    ``level``: accuracy (``acc_lo``, ``acc_hi``) and ECE (``ece_lo``, ``ece_hi``); the ECE
    floor (``floor``) and bits per byte (``bpb``). The first band of positions: accuracy,
    its interval's top, ECE and floor (``first_*``); the last band, from ``last_from`` to
    ``last_to``: accuracy and its interval's bottom (``last_*``)."""

    acc_lo: float
    acc_hi: float
    ece_lo: float
    ece_hi: float
    floor: float
    bpb: float
    first_acc: float
    first_hi: float
    last_acc: float
    last_lo: float
    first_ece: float
    first_floor: float
    draws: int
    level: float
    last_from: int
    last_to: int


def intervals(cal: dict) -> Intervals:
    """The intervals, floor and bands of positions of ``cal``."""
    iv, floor, pb = cal["intervals"], cal["ece_floor"], cal["per_byte"]
    first, last = cal["positions"][0], cal["positions"][-1]
    return Intervals(
        acc_lo=iv["accuracy"][0], acc_hi=iv["accuracy"][1], ece_lo=iv["ece"][0],
        ece_hi=iv["ece"][1], floor=floor["mean"], bpb=pb["bits_per_byte"],
        first_acc=first["accuracy"], first_hi=first["intervals"]["accuracy"][1],
        last_acc=last["accuracy"], last_lo=last["intervals"]["accuracy"][0],
        first_ece=first["ece"], first_floor=first["ece_floor"]["mean"],
        draws=cal["settings"]["draws"], level=cal["settings"]["interval_level"],
        last_from=last["band"][0], last_to=last["band"][1])


@dataclass(frozen=True)
class Bfloat16Gap:
    """A bfloat16 network with a float32 head against the float32 model on the same windows:
    the largest log-probability difference (``gap16``) on ``n_x`` predictions. ``moved``:
    ``{"argmax": count, "predictions": count}``, the argmaxes that changed (a count that
    moves with the CPU's kernels, so it is not a quoted number)."""

    gap16: float
    n_x: int
    moved: dict = field(repr=False)


def bfloat16_gap(half, full, x) -> Bfloat16Gap:
    """Compare ``half`` (a bfloat16 model) with ``full`` on the windows ``x``."""
    lp16, lp32 = half.window_logprobs(x), full.window_logprobs(x)
    moved = int((lp16.argmax(-1) != lp32.argmax(-1)).sum())
    return Bfloat16Gap(gap16=np.abs(lp16 - lp32).max(), n_x=x.size,
                       moved={"argmax": moved, "predictions": lp32.shape[0] * lp32.shape[1]})


@dataclass(frozen=True)
class ConformalRun:
    """The conformal measurement: accuracy on the ``mc_test`` test questions (``mc_acc``);
    LAC and APS coverage and mean size; the whole-word ECE over all ``mc_n`` questions
    (``w_ece``), its interval (``w_lo``, ``w_hi``) and floor (``w_floor``); the characters of
    context per question (``mc_context``)."""

    mc_acc: float
    mc_test: int
    lac_cov: float
    lac_size: float
    aps_cov: float
    aps_size: float
    w_ece: float
    w_lo: float
    w_hi: float
    w_floor: float
    mc_n: int
    mc_context: int


def conformal_run(conf: dict) -> ConformalRun:
    """Read :func:`~standarderror.experiments.measure.conformal`'s result ``conf``."""
    word = conf["word_calibration"]
    return ConformalRun(
        mc_acc=conf["accuracy"], mc_test=conf["questions"] - conf["calibration"],
        lac_cov=conf["lac"]["coverage"], lac_size=conf["lac"]["mean_size"],
        aps_cov=conf["aps"]["coverage"], aps_size=conf["aps"]["mean_size"],
        w_ece=word["ece"], w_lo=word["intervals"]["ece"][0], w_hi=word["intervals"]["ece"][1],
        w_floor=word["ece_floor"]["mean"], mc_n=word["questions"], mc_context=mc.CONTEXT)


@dataclass(frozen=True)
class SpectralRun:
    """The spectral measurement: the fitted matrix temperature (``sp_t``) and its interval over
    refits (``sp_lo``, ``sp_hi``), the greedy answer's accuracy (``sp_acc``) and the sampled
    answers cut at the length limit (``sp_cut``)."""

    sp_t: float
    sp_acc: float
    sp_cut: int
    sp_lo: float
    sp_hi: float


def spectral_run(spec: dict) -> SpectralRun:
    """Read :func:`~standarderror.experiments.measure.spectral`'s result ``spec``."""
    return SpectralRun(sp_t=spec["temperature"], sp_acc=spec["accuracy"],
                       sp_cut=spec["unterminated"], sp_lo=spec["temperature_interval"][0],
                       sp_hi=spec["temperature_interval"][1])


@dataclass(frozen=True)
class SubwordRun:
    """The random Llama against the tiny model. Sizes: the Llama's parameters and vocabulary
    (``llama_params``, ``llama_vocab``) and the tiny model's vocabulary (``tiny_vocab``). Its
    conformal run: the share of options of more than one token (``multi``) and the options with
    a token across the context's boundary (``merged``). Its calibration run: bits per byte
    (``l_bpb``) and its interval (``l_bpb_lo``, ``l_bpb_hi``) on ``l_rows`` predictions, bytes
    per token (``l_bytes``), and the NLL per token on the first and the last band of positions
    (``l_first``, ``l_last``)."""

    llama_params: int
    llama_vocab: int
    tiny_vocab: int
    multi: float
    merged: int
    l_bpb: float
    l_bpb_lo: float
    l_bpb_hi: float
    l_bytes: float
    l_first: float
    l_last: float
    l_rows: int


def subword_run(llama, tiny_model, conf: dict, cal: dict) -> SubwordRun:
    """The sizes of the two models, the options of ``conf`` (the Llama's conformal run) and
    the per-byte loss and bands of ``cal`` (its calibration run)."""
    pb, bands = cal["per_byte"], cal["positions"]
    return SubwordRun(
        llama_params=llama.parameters, llama_vocab=llama.vocab_size,
        tiny_vocab=tiny_model.vocab_size, multi=conf["option_tokens"]["multi_token_share"],
        merged=conf["merged"], l_bpb=pb["bits_per_byte"], l_bpb_lo=pb["interval"][0],
        l_bpb_hi=pb["interval"][1], l_bytes=pb["bytes"] / cal["rows"],
        l_first=bands[0]["nll"], l_last=bands[-1]["nll"], l_rows=cal["rows"])


class Counting(interface.HFModel):
    """A loaded :class:`~standarderror.llm.interface.HFModel` that counts the tokens that go
    through its forward pass (``tokens``)."""

    def __init__(self, base):
        self.__dict__.update(base.__dict__)
        self.tokens = 0

    def logits(self, ids, last=None):
        self.tokens += ids.numel()
        return super().logits(ids, last)


@dataclass(frozen=True)
class CostEstimate:
    """Seconds of GPU arithmetic each default measurement would take for a model of
    ``est_params`` billion parameters (``est_gb`` GB of bfloat16 weights) at ``est_tflops``
    TFLOP/s, from about two floating-point operations per parameter per token:
    calibration (``est_cal``), conformal (``est_conf``), spectral (``est_spec``).
    ``tokens``: the tokens each runs through the model."""

    est_cal: float
    est_conf: float
    est_spec: float
    est_params: float
    est_gb: float
    est_tflops: float
    tokens: dict = field(repr=False)


def cost_estimate(model, *, params: float = 7e9, speed: float = 200e12) -> CostEstimate:
    """Count the tokens per question of the conformal task (on 120 questions) and per sampled
    question of the spectral one (10 + 10 questions, 20 answers each) on ``model``, and scale
    them to each measurement's defaults (10,240 calibration predictions, 720 questions, 300
    development and 1700 test questions)."""
    counter = Counting(model)
    measure.conformal(counter, count=120, progress=False)
    per_question = counter.tokens / 120
    counter.tokens = 0
    measure.spectral(counter, dev=10, test=10, answers=20, progress=False)
    per_sampled_question = counter.tokens / 20     # 20 answers each, and greedy decoding
    flops_per_token = 2 * params
    tokens = {"calibration": 10_240,               # the default: 160 windows of 64 tokens
              "conformal": 720 * per_question,      # the default: 720 questions
              # the defaults: 300 dev and 1700 test questions, 20 answers each
              "spectral": (300 + 1700) * per_sampled_question}
    estimate = {k: v * flops_per_token / speed for k, v in tokens.items()}
    return CostEstimate(est_cal=estimate["calibration"], est_conf=estimate["conformal"],
                        est_spec=estimate["spectral"], est_params=params / 1e9,
                        est_gb=2 * params / 1e9,        # bfloat16: 2 bytes each
                        est_tflops=speed / 1e12, tokens=tokens)


@dataclass(frozen=True)
class ValidationAccuracy:
    """The accuracy at T = 1 of a calibration run on the validation plays."""

    val_acc: float


def validation_accuracy(cal: dict) -> ValidationAccuracy:
    """The accuracy at T = 1 of ``cal``'s table."""
    return ValidationAccuracy(val_acc={r["temperature"]: r for r in cal["table"]}[1.0]["accuracy"])


def refusals(directory) -> list[str]:
    """Three directories the loader must refuse, and its messages: a copy of the exported
    GPT-2 ``directory`` that asks for remote code (``auto_map`` and an ``evil.py`` that would
    write ``RAN`` in the working directory on import), a copy whose weights are a pickle
    (``pytorch_model.bin``), and the hub name ``gpt2`` (not in the local cache). Each message
    has the temporary directory's path replaced by ``<tmp>``; a source that loads gives none."""
    tmp = os.path.dirname(str(directory))
    evil = shutil.copytree(directory, f"{tmp}/evil")
    with open(f"{evil}/config.json") as f:
        config = json.load(f)
    config.update(model_type="evilnet", auto_map={"AutoModelForCausalLM": "evil.Model"})
    with open(f"{evil}/config.json", "w") as f:
        f.write(json.dumps(config))
    with open(f"{evil}/evil.py", "w") as f:
        f.write("open('RAN', 'w')  # would run on import\n")
    pickled = shutil.copytree(directory, f"{tmp}/pickled")
    torch.save(load_file(f"{pickled}/model.safetensors"), f"{pickled}/pytorch_model.bin")
    os.remove(f"{pickled}/model.safetensors")
    messages = []
    for source in (evil, pickled, "gpt2"):
        try:
            interface.HFModel(source, device="cpu")
        except (ValueError, FileNotFoundError) as exc:
            messages.append("refused: " + str(exc).replace(tmp, "<tmp>"))
    return messages
