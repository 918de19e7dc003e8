"""Superposition in toy models (method.md §11, after Elhage et al. 2022): the family's maths.

Modules: ``model`` (the batched toy model, Adam, the stratified expected
loss), ``geometry`` (norms, feature dimensionality D_i and D*, polygons,
fractions), ``phase_change`` (the pentagon/two-digon starts, loss
crossings), ``dynamics`` (plateaus and jumps of D_i over training),
``regimes`` (the n = 2, m = 1 phase diagram, trained and analytic),
``experiments`` (the four batched sweeps), ``schemas`` (Parquet tables),
``summary`` (the headline numbers, the source beside ours) and ``plots``
(figures).

Dimension names in shapes: ``models`` (one per setting and seed, trained
as one stack), ``features`` (n), ``hidden`` (m < n), ``batch``,
``snapshots`` (saved training steps).
"""
