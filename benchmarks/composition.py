"""Composition scores of every head pair: factored (ours) against the dense products, in one run.

- ours: ``tinylens.circuits.composition.composition_scores``: QR factors of the outer matrices
  reduce each pair to a ``d_head x d_head`` product, and all pairs of one earlier layer are one
  matrix product;
- dense: ``W_OV = W_V W_O`` and ``W_QK = W_Q W_K^T`` materialised at ``d_model x d_model`` for
  every head, then ``||L R||_F / (||L||_F ||R||_F)`` with a ``d_model^3`` product per pair (what
  a direct reading of the formula does). Timed on the first ``--dense-pairs`` pairs and
  projected to all of them.

Both in float64 on a randomly initialised model of the preset's shape (the weights do not change
the cost); the scores of the timed pairs are compared.

    python benchmarks/composition.py                    # paper shape: d_model 384, 6 x 6 heads
    python benchmarks/composition.py --d-model 64 --n-head 4 --threads 1
"""

from __future__ import annotations

import argparse
import time

import torch

from tinylens.circuits.composition import KINDS, basis_of, composition_scores, head_factors
from tinylens.model import ModelConfig, Transformer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=384)
    parser.add_argument("--n-head", type=int, default=6)
    parser.add_argument("--n-layer", type=int, default=6)
    parser.add_argument("--dense-pairs", type=int, default=40, help="pairs per kind timed the dense way")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=65, block_size=8, d_model=args.d_model, n_layer=args.n_layer,
                                    n_head=args.n_head, dropout=0.0)).eval()
    f = head_factors(model, basis_of(model, "residual", "ignored"))
    later = torch.as_tensor(f.layer[None, :] > f.layer[:, None])
    pairs = torch.nonzero(later).tolist()

    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        ours = {k: composition_scores(f, k) for k in KINDS}
        times.append(time.perf_counter() - start)
    t_ours = min(times)

    start = time.perf_counter()
    ov = f.ov_in @ f.ov_out                          # [heads d d]
    qk = f.q @ f.k.transpose(-1, -2)
    t_materialise = time.perf_counter() - start
    timed = pairs[: args.dense_pairs]
    worst = 0.0
    start = time.perf_counter()
    for kind in KINDS:
        for a, b in timed:
            right = {"Q": qk[b], "K": qk[b].T, "V": ov[b]}[kind]
            s = torch.linalg.norm(ov[a] @ right) / (torch.linalg.norm(ov[a]) * torch.linalg.norm(right))
            worst = max(worst, abs(float(s) - float(ours[kind][a, b])))
    t_dense = (time.perf_counter() - start) / len(timed) * len(pairs) + t_materialise

    print(f"shape: d_model {args.d_model}, {args.n_layer} x {args.n_head} heads, {len(pairs)} pairs x 3 kinds, "
          f"{args.threads} threads")
    print(f"ours (factored, all pairs):        {t_ours:.3f} s (best of {args.repeats})")
    print(f"dense (d_model^3 per pair), projected from {len(timed)} pairs per kind: {t_dense:.1f} s")
    print(f"dense / ours: {t_dense / t_ours:.0f}x; largest score difference on the timed pairs: {worst:.1e}")


if __name__ == "__main__":
    main()
