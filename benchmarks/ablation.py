"""Ablation distances: ours against every edited run starting from the tokens, in one run.

- ours: ``tinylens.supporting.ablation.ablation_distances``: the residual entering each block is
  recorded once, and the run with block ``b``'s term dropped starts there (the blocks before ``b``
  compute what they computed unedited);
- from the tokens: the same distances with every edited run starting at the embedding (what the
  rule did before), written out here with the same intervention API.

The two must agree bit for bit (checked). A randomly initialised model of the preset's shape
(the weights do not change the cost), prompts of 10 random tokens (the searched strings' length),
CPU time of each, alternating ``--repeats`` times.

    python benchmarks/ablation.py                       # paper shape: d_model 384, 6 blocks
    python benchmarks/ablation.py --d-model 64 --n-head 4 --prompts 2048
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from tinylens.interventions import hook_name, run
from tinylens.measures import hellinger, softmax
from tinylens.model import ModelConfig, Transformer
from tinylens.supporting.ablation import CONTEXTS, VARIANTS, ablation_distances, continue_one_token


@torch.no_grad()
def from_the_tokens(model: Transformer, tokens: torch.Tensor, batch_size: int = 2048) -> dict:
    """The distances with every edited run starting at the embedding."""
    n_layer = model.config.n_layer
    out = {(c, v): np.zeros((len(tokens), n_layer)) for c in CONTEXTS for v in VARIANTS}
    for lo in range(0, len(tokens), batch_size):
        ids = tokens[lo : lo + batch_size]
        base = run(model, ids, record=["blocks.*.block_output"], last_only=True)
        q = softmax(base.logits)
        for b in range(n_layer):
            output = hook_name(b, "block_output")
            q_alone = softmax(continue_one_token(model, base[output], b + 1))
            for variant, edit in VARIANTS.items():
                edited = run(model, ids, edits=edit(b), record=[output], last_only=True)
                out[("full", variant)][lo : lo + len(ids), b] = hellinger(softmax(edited.logits), q).numpy()
                alone = softmax(continue_one_token(model, edited[output], b + 1))
                out[("one_token", variant)][lo : lo + len(ids), b] = hellinger(alone, q_alone).numpy()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=384)
    parser.add_argument("--n-head", type=int, default=6)
    parser.add_argument("--n-layer", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="the rule runs with one")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=65, block_size=32, d_model=args.d_model, n_layer=args.n_layer,
                                    n_head=args.n_head, dropout=0.0)).eval()
    tokens = torch.randint(0, 65, (args.prompts, 10))
    cpu = {"ours": [], "from the tokens": []}
    for _ in range(args.repeats):
        for name, fn in (("ours", ablation_distances), ("from the tokens", from_the_tokens)):
            start = time.process_time()
            result = fn(model, tokens)
            cpu[name].append(time.process_time() - start)
            if name == "ours":
                ours = result
            elif not all(np.array_equal(ours[k], result[k]) for k in ours):
                raise SystemExit("the two ways disagree")
    best = {name: min(t) for name, t in cpu.items()}
    print(f"d_model {args.d_model}, {args.n_layer} blocks, {args.prompts} prompts of 10 tokens, "
          f"{args.threads} thread(s), best of {args.repeats} (CPU s): ours {best['ours']:.2f} "
          f"({1e3 * best['ours'] / args.prompts:.1f} ms per prompt), from the tokens {best['from the tokens']:.2f}; "
          f"ours / from the tokens = {best['ours'] / best['from the tokens']:.2f}; identical distances")


if __name__ == "__main__":
    main()
