# Prints tests/data/cpython_random_sample.txt: what CPython's
# random.Random(seed).sample(range(n), k) returns on three consecutive calls
# from one generator, for seeds and sizes that cover both of sample's
# branches, multi-word seeds and negative seeds. Regenerate with
#   python3 tests/data/cpython_random_sample.py > tests/data/cpython_random_sample.txt
import random
import sys

print(f"# CPython {sys.version.split()[0]}: seed n k | three consecutive samples, ';'-separated")
seeds = [0, 1, 42, 1234, -1234, 2**32, 2**32 + 7, 2**40 + 5, 2**63 - 1]
shapes = [(1, 1), (5, 5), (21, 5), (22, 5), (30, 6), (86, 6), (100, 6), (7473, 5), (7473, 8),
          (1319, 40), (1000000, 3)]
for seed in seeds:
    for n, k in shapes:
        rng = random.Random(seed)
        draws = [rng.sample(range(n), k) for _ in range(3)]
        print(seed, n, k, "|", ";".join(",".join(map(str, d)) for d in draws))
