"""Ye et al. (2024): how much the two score functions disagree, recomputed from the release.

    python data/reviews/ye_rankings.py <directory of the upstream release>

Per task (sizes and accuracies averaged over the three prompts):

* ``tau(lac,aps)``: Kendall's tau_b between the models' LAC and APS mean set sizes, and the
  number of model pairs the two scores order in opposite directions;
* the range of realised test-half coverage per score, over every model and prompt;
* ``spearman(acc,size)``: Spearman's correlation between accuracy and size under LAC, APS
  and their average;
* ``inversions``: model pairs in which the more accurate model has the larger mean size,
  under LAC, APS and the average, and the totals over tasks.

See ``_ye.py`` for the conventions and the note on pickle files.
"""

import sys

import _ye
import numpy as np

from standarderror.uncertainty import coverage as cv
from standarderror.uncertainty.ranks import kendall_tau

SIZES = (("lac", "lac_size"), ("aps", "aps_size"), ("avg", "average_size"))


def main(argv):
    data = _ye.start(argv)
    totals = {name: [0, 0] for name, _ in SIZES}
    for task, d in data.items():
        res = _ye.evaluate(d)
        models = list(res)
        acc = np.array([res[m]["accuracy"] for m in models])
        size = {name: np.array([res[m][key] for m in models]) for name, key in SIZES}
        print(f"\n## {task}")
        print(f"{'model':<28}{'accuracy':>10}{'rank_lac':>10}{'rank_aps':>10}{'rank_avg':>10}")
        ranks = {name: cv.ranking(size[name]) for name, _ in SIZES}
        for i, m in enumerate(models):
            print(f"{m:<28}{acc[i]:>10.4f}{ranks['lac'][i]:>10.1f}{ranks['aps'][i]:>10.1f}"
                  f"{ranks['avg'][i]:>10.1f}")
        k = kendall_tau(size["lac"], size["aps"])
        print(f"{task} tau(lac,aps)={k['tau']:.4f} discordant={k['discordant']} pairs={k['pairs']}")
        for score in ("lac", "aps"):
            runs = [r[f"{score}_coverage"] for m in models for r in res[m]["runs"]]
            print(f"{task} coverage({score}) min={min(runs):.4f} max={max(runs):.4f}")
        print(f"{task} spearman(acc,size) " + " ".join(
            f"{name}={cv.spearman(acc, size[name]):.4f}" for name, _ in SIZES))
        inv = {name: cv.inversions(acc, size[name]) for name, _ in SIZES}
        print(f"{task} inversions " + " ".join(f"{name}={inv[name]['count']}" for name, _ in SIZES)
              + f" pairs={inv['lac']['pairs']}")
        for name, _ in SIZES:
            totals[name][0] += inv[name]["count"]
            totals[name][1] += inv[name]["pairs"]
    print("\n## all tasks")
    print("all inversions " + " ".join(f"{name}={totals[name][0]}" for name, _ in SIZES)
          + f" pairs={totals['lac'][1]}")


if __name__ == "__main__":
    main(sys.argv)
