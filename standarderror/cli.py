"""The command line: ``python -m standarderror measure --model DIR --task TASK`` (also
installed as the console script ``standarderror``).

Examples::

    python -m standarderror measure --model tiny --task calibration
    python -m standarderror measure --model ./my-model --task conformal --out results/
    python -m standarderror measure --model ./my-model --task spectral --device cuda
    python -m standarderror export-tiny /tmp/tiny-gpt2   # our model, as a GPT-2 directory

Each run writes ``<task>.json`` (results, model, tokenizer, versions, seeds) and PNG figures
into ``--out`` and prints a short summary. Exit status 2 with a one-line message on bad
input (a missing model directory, a directory without weights, text the tokenizer cannot
represent, a window too long for the model).
"""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m standarderror",
                                description="The book's measurements on your own model.")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="calibration, conformal sets or eigenvalue calibration",
                       description="Run one measurement on a model and write JSON + figures.")
    m.add_argument("--model", required=True,
                   help="'tiny' (our committed model), a transformers directory or a hub name")
    m.add_argument("--task", required=True, choices=("calibration", "conformal", "spectral"))
    m.add_argument("--out", default="measurements", help="output directory (default: %(default)s)")
    m.add_argument("--device", default="auto", help="cpu, cuda, ... (default: auto)")
    m.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    m.add_argument("--allow-download", action="store_true",
                   help="let transformers download a hub model (default: local files only)")
    m.add_argument("--seed", type=int, default=0, help="seed of the questions / windows")
    m.add_argument("--no-progress", action="store_true", help="no progress bars")
    c = m.add_argument_group("calibration")
    c.add_argument("--text", help="a UTF-8 text file to measure on (default: our held-out plays)")
    c.add_argument("--count", type=int, default=10, help="batches of windows (default: 10)")
    c.add_argument("--size", type=int, default=16, help="windows per batch (default: 16)")
    c.add_argument("--block", type=int, default=None,
                   help="tokens per window (default: 64, or the model's window if smaller)")
    f = m.add_argument_group("conformal")
    f.add_argument("--questions", type=int, default=720, help="six-option questions (720)")
    f.add_argument("--alpha", type=float, default=0.1, help="miscoverage level (0.1)")
    s = m.add_argument_group("spectral")
    s.add_argument("--dev", type=int, default=300, help="development questions (300)")
    s.add_argument("--test", type=int, default=1700, help="test questions (1700)")
    s.add_argument("--m-dev", type=int, default=100, help="answers per dev question (100)")
    s.add_argument("--m-test", type=int, default=20, help="answers per test question (20)")
    s.add_argument("--max-tokens", type=int, default=16, help="token limit of an answer (16)")
    e = sub.add_parser("export-tiny", help="write our tiny model as a transformers GPT-2 directory")
    e.add_argument("directory")
    e.add_argument("--step", type=int, default=None, help="checkpoint step (default: final)")
    return p


def main(argv=None) -> int:
    """Run one command (``measure`` or ``export-tiny``) and return the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name; ``None`` reads ``sys.argv``.

    Returns
    -------
    int
        0 on success; 2 with a one-line message on standard error when the input is bad (a
        missing model directory, a directory without weights, text the tokenizer cannot
        represent, a window too long for the model).
    """
    args = _parser().parse_args(argv)
    try:
        if args.command == "export-tiny":
            from standarderror.llm import export

            print(export.to_gpt2(args.directory, step=args.step))
            return 0
        from pathlib import Path

        from standarderror.llm import interface, measure

        lm = interface.load_model(args.model, device=args.device, dtype=args.dtype,
                                  local_only=not args.allow_download) \
            if args.model != "tiny" else interface.TinyLM()
        progress = not args.no_progress
        if args.task == "calibration":
            text = Path(args.text).read_text("utf-8") if args.text else None
            kw = dict(text=text, count=args.count, size=args.size, seed=args.seed,
                      block=args.block)
        elif args.task == "conformal":
            kw = dict(count=args.questions, seed=args.seed, alpha=args.alpha)
        else:
            kw = dict(dev=args.dev, test=args.test, m_dev=args.m_dev, m_test=args.m_test,
                      seed=args.seed, max_tokens=args.max_tokens)
        result = measure.run(args.task, lm, progress=progress, **kw)
    except (FileNotFoundError, ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    paths = measure.write(result, args.out)
    print(measure.summary(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
