"""Benchmark runner (placeholder).

The benchmark table (ratios against torch CPU measured in the same run) is the subject of
issue #7 and is not written yet; this script says so instead of printing made-up numbers.
"""

import sys

if __name__ == "__main__":
    print("make bench: benchmarks are not implemented yet (tracked as issue #7).")
    sys.exit(0)
