"""Attention as a dynamical system (method.md §10; source 001 states these as hypotheses).

Topic modules, plain functions on tensors and arrays:

``spectra``       each head's attention matrix S as a causal random walk: row-stochasticity,
                  eigenvalues = diagonal, the self-attention weight, absorption of the backward
                  walk at position 0, and the odds-ratio split of the score variance.
``trajectories``  a token's residual stream at every depth: the logit lens (rank, probability,
                  KL to the final distribution, entropy) and the cosine with the next token's
                  unembedding and embedding rows.
``tuned_lens``    one affine translator per depth in front of ``ln_f`` + ``lm_head``.
``probes``        speaker passages of the play, depth-wise pooled features, a logistic-regression
                  probe and a nearest-class-mean classifier (the attractor reading).
``schemas``       the family's table schemas (torch-free, for summaries and figures).
``summary``       the headline numbers of metrics/attention.json, with the sources' claims.
``plots``         the family's figures.

Depth ``d`` indexes the residual stream: 0 is the embedding output (the input of block 1),
``d`` in 1..n_layer is the output of block ``d`` (``n_layer`` = the input of ``ln_f``).
Blocks and heads are indexed from 0 in files and from 1 in figures.
"""
