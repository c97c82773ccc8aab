"""Ye et al. (2024), Table 1 recomputed from the released logits, split by score function.

    python data/reviews/ye_table1.py <directory of the upstream release>

For every task and model: accuracy, and for LAC and APS the realised coverage and mean set
size on the test half, each averaged over the three prompts; ``avg_size`` is the mean of the
two sizes, the quantity the paper's Table 1 reports and ranks by. See ``_ye.py`` for the
conventions and for why these scripts unpickle files only from the directory you pass.
"""

import sys

import _ye


def main(argv):
    data = _ye.start(argv)
    for task, d in data.items():
        res = _ye.evaluate(d)
        print(f"\n## {task}")
        print(f"{'model':<28}{'accuracy':>10}{'lac_cov':>10}{'lac_size':>10}"
              f"{'aps_cov':>10}{'aps_size':>10}{'avg_size':>10}")
        for model, r in res.items():
            print(f"{model:<28}{r['accuracy']:>10.4f}{r['lac_coverage']:>10.4f}{r['lac_size']:>10.4f}"
                  f"{r['aps_coverage']:>10.4f}{r['aps_size']:>10.4f}{r['average_size']:>10.4f}")


if __name__ == "__main__":
    main(sys.argv)
