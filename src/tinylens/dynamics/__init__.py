"""Training dynamics over checkpoints (method.md §8): every checkpoint of every seed is a data point.

Modules, in the order a measurement flows:

- :mod:`~tinylens.dynamics.probes`: the fixed inputs every checkpoint is measured on (validation
  and train windows at full context, repeated random-token sequences, the unigram);
- :mod:`~tinylens.dynamics.energy`: the interaction energy of a sequence's token states;
- :mod:`~tinylens.dynamics.heads`: per-head scores (prefix matching, copying in two forms,
  previous-token and duplicate-token detection);
- :mod:`~tinylens.dynamics.measure`: one checkpoint -> one row of metrics and one row per head,
  through :func:`tinylens.interventions.run`;
- :mod:`~tinylens.dynamics.schemas`: the Parquet schemas of those rows;
- :mod:`~tinylens.dynamics.phases`: curves over log-step -> the phase-change window, the
  critical points of the interaction energy and of the KL to the unigram, the three phases;
- :mod:`~tinylens.dynamics.summary`: the curves read back, each seed's phases, metrics/dynamics.json;
- :mod:`~tinylens.dynamics.plots`: the figures.
"""
