"""Ye et al. (2024): does temperature move the size ranking? Recomputed from the release.

    python data/reviews/ye_temperature.py <directory of the upstream release>

Dividing every model's logits by the same T changes no answer (accuracy is printed for each
T as a check), but it changes the sets. Per task, with sizes averaged over the three prompts:

* ``T=0.5 vs T=2``: Kendall's tau between the size rankings at the two temperatures and the
  number of models whose rank changes, for LAC, APS and their average;
* ``fitted vs T=1``: the same comparison after fitting each model's temperature (per prompt)
  by maximum likelihood on the calibration half and recomputing on the test half.

See ``_ye.py`` for the conventions and the note on pickle files.
"""

import sys

import _ye
import numpy as np

from standarderror.uncertainty import coverage as cv
from standarderror.uncertainty.ranks import kendall_tau

SIZES = (("lac", "lac_size"), ("aps", "aps_size"), ("avg", "average_size"))


def compare(task, label, first, second):
    models = list(first)
    parts = []
    for name, key in SIZES:
        a = np.array([first[m][key] for m in models])
        b = np.array([second[m][key] for m in models])
        changed = int((cv.ranking(a) != cv.ranking(b)).sum())
        parts.append(f"tau_{name}={kendall_tau(a, b)['tau']:.4f} changed_{name}={changed}")
    print(f"{task} {label} " + " ".join(parts) + f" models={len(models)}")


def main(argv):
    data = _ye.start(argv)
    for task, d in data.items():
        print(f"\n## {task}")
        at = {t: _ye.evaluate(d, t) for t in (0.5, 1.0, 2.0)}
        fit = _ye.evaluate(d, _ye.fitted)
        print(f"{'model':<28}{'acc_T0.5':>10}{'acc_T1':>10}{'acc_T2':>10}"
              f"{'avg_T0.5':>10}{'avg_T1':>10}{'avg_T2':>10}{'avg_fit':>10}{'T_fit':>10}")
        for m in at[1.0]:
            print(f"{m:<28}" + "".join(f"{at[t][m]['accuracy']:>10.4f}" for t in at)
                  + "".join(f"{at[t][m]['average_size']:>10.4f}" for t in at)
                  + f"{fit[m]['average_size']:>10.4f}{np.mean(fit[m]['temperatures']):>10.4f}")
        same = all(at[t][m]["accuracy"] == at[1.0][m]["accuracy"] for t in at for m in at[t])
        print(f"{task} accuracy_unchanged={int(same)}")
        compare(task, "T=0.5_vs_T=2", at[0.5], at[2.0])
        compare(task, "fitted_vs_T=1", at[1.0], fit)


if __name__ == "__main__":
    main(sys.argv)
