import os

# Tests run on the CPU with a fixed thread count so timings and reductions are comparable.
os.environ.setdefault("OMP_NUM_THREADS", "2")
