"""The paper's supporting analyses: why the block-by-block approximation works (method.md §7).

One module per topic, each plain functions on tensors and arrays; every model
run goes through :mod:`tinylens.interventions`, every distance and cosine
through :mod:`tinylens.measures`:

- ``ablation``: drop a block's attention or feed-forward output (appendix IV),
  in two variants: our full-context one and the paper's one-token
  continuation (method.md §12).
- ``layernorm``: the final LayerNorm ignores the scale of its input
  (appendix III), and how its output norm follows the cosine of two inputs.
- ``vector_sums``: the feed-forward-only endpoint ``x_1 + sum_b ffwd_b``
  against the real final residual, and the to-scale 2-D tip-to-tail drawing.
- ``subspaces``: vectors learned to produce one token when fed as a
  one-position residual stream at a stage (appendix V); their SVD.
- ``criterion``: the paper's "aggregate performance" test of whether a
  block's feed-forward output points at the tokens its approximation
  predicts, with the chance level two ways.
- ``schemas``: every table's Parquet schema and the readers of the tables (no torch: the
  figure jobs import only this and ``plots``).
- ``summary``: the per-table summaries and the metrics JSON's sections, the paper beside ours.
- ``plots``: this family's figures.

Indexing: blocks and stages are 0-based in code, files and tables (block ``b``
is method.md's block ``b + 1``; stage ``s`` is the residual stream entering
block ``s``, and stage ``n_layer`` the input of ``ln_f``, method.md's
``x_{s+1}``); figures and captions count blocks from 1 as the paper does.
"""
