"""Ye et al. (2024): how much of the released coverage is the fallback for empty sets.

    python data/reviews/ye_fallback.py <directory of the upstream release>

Ye et al.'s script gives an empty prediction set the top option. For every task and model
(each number averaged over the three prompts, on the test half):

* ``lac_empty``, ``aps_empty``: the share of test sets that are empty before that fallback;
* ``aps_cov_nofb``, ``aps_cov``: APS coverage without and with it (the second is Table 1's);
* ``aps_ones``: the share of APS calibration scores whose float32 running sum reached one or
  more (ties at one, from saturated probabilities or a true option ranked last);
* ``saturated``: the share of test questions whose float32 top probability is exactly one.

See ``_ye.py`` for the conventions and the note on pickle files.
"""

import sys

import _ye
import numpy as np

from standarderror.uncertainty import coverage as cv

KEYS = ("lac_empty", "aps_empty", "aps_cov_nofb", "aps_cov", "aps_ones", "saturated")


def one_run(z, y, cal):
    p = cv.ye_softmax(z)
    test = ~cal
    out = {}
    for score in ("lac", "aps"):
        kw = dict(alpha=_ye.ALPHA, score=score, rule="ye")
        bare = cv.conformal_sets(p[cal], y[cal], p[test], nonempty=False, **kw)
        full = cv.conformal_sets(p[cal], y[cal], p[test], **kw)
        out[f"{score}_empty"] = float((~bare["sets"].any(axis=1)).mean())
        if score == "aps":
            rows = np.arange(test.sum())
            out["aps_cov_nofb"] = float(bare["sets"][rows, y[test]].mean())
            out["aps_cov"] = float(full["sets"][rows, y[test]].mean())
            out["aps_ones"] = float((bare["scores_cal"] >= 1).mean())
    out["saturated"] = float((p[test].max(axis=1) == 1).mean())
    return out


def main(argv):
    data = _ye.start(argv)
    for task, d in data.items():
        print(f"\n## {task}")
        print(f"{'model':<28}" + "".join(f"{k:>13}" for k in KEYS))
        for model in sorted(d["logits"]):
            runs = [one_run(z, d["y"], d["calibration"]) for z in d["logits"][model].values()]
            mean = {k: float(np.mean([r[k] for r in runs])) for k in KEYS}
            print(f"{model:<28}" + "".join(f"{mean[k]:>13.4f}" for k in KEYS))


if __name__ == "__main__":
    main(sys.argv)
