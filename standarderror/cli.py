"""The command line: ``python -m standarderror measure --model DIR --task TASK`` (also
installed as the console script ``standarderror``).

Examples::

    python -m standarderror measure --model tiny --task calibration
    python -m standarderror measure --model ./my-model --task conformal --out results/
    python -m standarderror measure --model ./my-model --task spectral --device cuda
    python -m standarderror export-tiny /tmp/tiny-gpt2   # our model, as a GPT-2 directory
    # a served model, its tokenizer beside it; vLLM's offline engine on a GPU
    python -m standarderror measure --backend openai --base-url http://127.0.0.1:8000 \\
        --model NAME --tokenizer ./my-model --task calibration
    python -m standarderror measure --backend vllm --model ./my-model --task conformal

Each run writes ``<task>.json`` (results, model, tokenizer, versions, seeds) and PNG figures
into ``--out`` and prints a short summary. Every argument is checked before anything
expensive runs (``--out`` first); bad input of any kind (a missing or malicious model
directory, pickled weights, a hub name without ``--allow-download``, text the tokenizer
cannot represent, an option that does not apply to the task) ends with a one-line message
on standard error and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from standarderror import _checks

#: Options of each task (destination names); giving one to another task is an error.
TASK_OPTIONS = {
    "calibration": ("text", "count", "size", "block"),
    "conformal": ("questions", "alpha"),
    "spectral": ("dev", "test", "answers", "max_tokens"),
}
#: Defaults of the task options (``None`` in the parser, so that "given" can be told).
DEFAULTS = {"count": 10, "size": 16, "block": None, "text": None, "questions": 720,
            "alpha": 0.1, "dev": 300, "test": 1700, "answers": 20, "max_tokens": 16}


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage and exits; we want one line
        raise UsageError(f"{message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m standarderror",
                description="The book's measurements on your own model.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    m = sub.add_parser("measure", help="calibration, conformal sets or eigenvalue calibration",
                       description="Run one measurement on a model and write JSON + figures.")
    m.add_argument("--model", required=True,
                   help="'tiny' (our committed model), a transformers directory or a hub name; "
                        "with --backend openai, the name the server serves")
    m.add_argument("--backend", default="transformers",
                   choices=("transformers", "openai", "vllm"),
                   help="transformers (in this process, default), openai (an "
                        "OpenAI-compatible /v1/completions server: llama.cpp, vLLM, ...) or "
                        "vllm (vLLM's offline engine in this process, on a GPU)")
    m.add_argument("--task", required=True, choices=("calibration", "conformal", "spectral"))
    m.add_argument("--out", default="measurements", help="output directory (default: %(default)s)")
    m.add_argument("--device", default=None, help="cpu, cuda, ... (default: auto)")
    m.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                   help="dtype of the network (default: float32); the output projection "
                        "runs in float32 always")
    m.add_argument("--allow-download", action="store_true",
                   help="let a hub name be downloaded (default: local files only, offline)")
    m.add_argument("--seed", type=int, default=0, help="seed of the questions / windows")
    m.add_argument("--no-progress", action="store_true", help="no progress bars")
    o = m.add_argument_group("served model (--backend openai; --top-logprobs and --window "
                             "also for --backend vllm)")
    o.add_argument("--base-url", help="the server, http(s)://host:port")
    o.add_argument("--tokenizer", help="a local transformers tokenizer directory of the "
                                       "served model")
    o.add_argument("--api-key-env", help="the environment variable holding the API key "
                                         "(never written anywhere)")
    o.add_argument("--concurrency", type=int, help="requests in flight at once (4)")
    o.add_argument("--top-logprobs", type=int,
                   help="top log-probabilities asked per position (20); the rest of each "
                        "row is approximated and the results say so")
    o.add_argument("--window", type=int, help="the server's context length (default: the "
                                              "tokenizer's model_max_length)")
    c = m.add_argument_group("calibration")
    c.add_argument("--text", help="a UTF-8 text file to measure on (default: our test plays, "
                                  "held out for our model only: for a pretrained model use "
                                  "text written after its training cutoff)")
    c.add_argument("--count", type=int, help="batches of windows (default: 10)")
    c.add_argument("--size", type=int, help="windows per batch (default: 16)")
    c.add_argument("--block", type=int,
                   help="tokens per window (default: 64, or the model's window if smaller)")
    f = m.add_argument_group("conformal")
    f.add_argument("--questions", type=int, help="six-option questions (720)")
    f.add_argument("--alpha", type=float, help="miscoverage level (0.1)")
    s = m.add_argument_group("spectral")
    s.add_argument("--dev", type=int, help="development questions (300)")
    s.add_argument("--test", type=int, help="test questions (1700)")
    s.add_argument("--answers", type=int,
                   help="answers per question, the same for fitting and testing (20)")
    s.add_argument("--max-tokens", type=int, help="token limit of an answer (16)")
    e = sub.add_parser("export-tiny", help="write our tiny model as a transformers GPT-2 directory")
    e.add_argument("directory")
    e.add_argument("--step", type=int, default=None, help="checkpoint step (default: final)")
    return p


def _at_least(args, name: str, low: int) -> None:
    v = getattr(args, name)
    if v < low:
        raise UsageError(f"--{name.replace('_', '-')} must be at least {low}, got {v}")


def check(args) -> dict:
    """Validate a parsed ``measure`` command; returns the task's keyword arguments.

    Raises :class:`UsageError` for an option that does not apply (a task option given to
    another task; ``--dtype``, ``--device`` or ``--allow-download`` with ``--model tiny``)
    and for values out of range.
    """
    for task, names in TASK_OPTIONS.items():
        if task == args.task:
            continue
        for name in names:
            if getattr(args, name) is not None:
                raise UsageError(f"--{name.replace('_', '-')} applies to --task {task} only, "
                                 f"not to --task {args.task}")
    served = ("base_url", "tokenizer", "api_key_env", "concurrency", "top_logprobs", "window")
    if args.backend == "vllm":
        for name in ("base_url", "tokenizer", "api_key_env", "concurrency", "device"):
            if getattr(args, name) is not None:
                raise UsageError(f"--{name.replace('_', '-')} does not apply to --backend "
                                 "vllm (vLLM runs the model on its GPU)")
        if args.model == "tiny":
            raise UsageError("--backend vllm needs a model directory (export ours with "
                             "export-tiny)")
        for name in ("top_logprobs", "window"):
            if getattr(args, name) is not None:
                _at_least(args, name, 1)
    elif args.backend == "openai":
        for name in ("dtype", "device"):
            if getattr(args, name) is not None:
                raise UsageError(f"--{name} does not apply to --backend openai (the server "
                                 "runs the model)")
        if args.allow_download:
            raise UsageError("--allow-download does not apply to --backend openai")
        for name in ("base_url", "tokenizer"):
            if getattr(args, name) is None:
                raise UsageError(f"--backend openai needs --{name.replace('_', '-')}")
        for name in ("concurrency", "top_logprobs", "window"):
            if getattr(args, name) is not None:
                _at_least(args, name, 1)
    else:
        for name in served:
            if getattr(args, name) is not None:
                raise UsageError(f"--{name.replace('_', '-')} applies to --backend openai "
                                 "only")
    if args.model == "tiny" and args.backend == "transformers":
        for name in ("dtype", "device"):
            if getattr(args, name) is not None:
                raise UsageError(f"--{name} does not apply to --model tiny (our model runs "
                                 "on the CPU in float32 through its own path)")
        if args.allow_download:
            raise UsageError("--allow-download does not apply to --model tiny")
    for name in TASK_OPTIONS[args.task]:
        if getattr(args, name) is None:
            setattr(args, name, DEFAULTS[name])
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    if args.task == "calibration":
        _at_least(args, "count", 1)
        _at_least(args, "size", 1)
        if args.block is not None:
            _at_least(args, "block", 1)
        if args.text is not None:
            try:  # a regular file, not a FIFO or a device (opened without blocking)
                _checks.open_regular(args.text, "--text").close()
            except (OSError, ValueError) as exc:
                raise UsageError(str(exc)) from None
        return dict(text=Path(args.text) if args.text else None, count=args.count,
                    size=args.size, seed=args.seed, block=args.block)
    if args.task == "conformal":
        _at_least(args, "questions", 2)
        if not 0 < args.alpha < 1:
            raise UsageError(f"--alpha must lie strictly between 0 and 1, got {args.alpha}")
        return dict(count=args.questions, seed=args.seed, alpha=args.alpha)
    _at_least(args, "dev", 2)
    _at_least(args, "test", 2)
    _at_least(args, "answers", 2)
    if args.answers > _checks.MAX_ANSWERS:
        raise UsageError(f"--answers must be at most {_checks.MAX_ANSWERS:,}, got "
                         f"{args.answers:,}")
    _at_least(args, "max_tokens", 1)
    return dict(dev=args.dev, test=args.test, answers=args.answers, seed=args.seed,
                max_tokens=args.max_tokens)


def check_out(out) -> Path:
    """``--out`` must name a directory this process can write (created if missing): checked
    before any measurement, by writing and removing a probe file in it. An empty name is
    refused (it would mean the working directory)."""
    if not str(out).strip():
        raise UsageError(f"--out must name a directory, got {str(out)!r}; pass --out . for "
                         "the working directory")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".standarderror-probe-{id(path)}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--out {out} is not writable: {exc.strerror or exc}") from None
    return path


def _error(message) -> int:
    from standarderror.llm.interface import _one_line

    print(f"error: {_one_line(message)}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    """Run one command (``measure`` or ``export-tiny``) and return the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name; ``None`` reads ``sys.argv``.

    Returns
    -------
    int
        0 on success; 2 with a one-line message on standard error when the input is bad
        (any argument, model directory or text file the measurement cannot use); 1 when the
        results could not be written.
    """
    try:
        args = _parser().parse_args(argv)
        if args.command == "export-tiny":
            from standarderror.llm import export

            print(export.to_gpt2(args.directory, step=args.step))
            return 0
        kw = check(args)
        out = check_out(args.out)
        from standarderror.experiments import measure
        from standarderror.llm import interface

        if args.backend == "openai":
            from standarderror.llm.interface import served

            lm = served.ServedModel(args.base_url, args.model, tokenizer=args.tokenizer,
                                    api_key=served.api_key_from(args.api_key_env),
                                    top_logprobs=args.top_logprobs or 20,
                                    window=args.window, concurrency=args.concurrency or 4,
                                    log=out / f"{args.task}.requests.jsonl")
        elif args.backend == "vllm":
            from standarderror.llm.interface.vllm_offline import VLLMModel

            lm = VLLMModel(args.model, dtype=args.dtype or "float32",
                           top_logprobs=args.top_logprobs, window=args.window, seed=args.seed)
        elif args.model == "tiny":
            lm = interface.TinyLM()
        else:
            lm = interface.load_model(args.model, device=args.device or "auto",
                                      dtype=args.dtype or "float32",
                                      local_only=not args.allow_download)
        result = measure.run(args.task, lm, progress=not args.no_progress, **kw)
    except (UsageError, FileNotFoundError, ValueError, RuntimeError, OSError,
            MemoryError) as exc:
        return _error(exc)
    except BaseException as exc:  # a Rust extension's panic (the tokenizers library's)
        from standarderror.llm.interface.directory import rust_panic

        if not rust_panic(exc):
            raise
        return _error(f"{type(exc).__name__}: {exc}")
    try:
        paths = measure.write(result, out)
    except OSError as exc:
        print(f"error: the results could not be written to {out}: {exc}", file=sys.stderr)
        return 1
    print(measure.summary(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
