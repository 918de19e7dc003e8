"""Weight-only circuits (method.md §9): composition between attention heads, and why it is hard.

Modules: ``composition`` (Q-, K-, V-composition scores of every head pair, residual and token
basis, LayerNorm ignored or folded, random-head baselines), ``symmetry`` (the invertible
change of residual basis that leaves the LayerNorm-free model unchanged, and what it does to
the scores and to the real model), ``training`` (composition over saved checkpoints, across
seeds), ``schemas`` (the Parquet tables), ``summary`` (the headline numbers of
metrics/circuits.json) and ``plots`` (the figures).
"""
