"""The induction-head phase change, shown (method.md §8b; seed 004 after Olsson et al. 2022).

Small attention-only transformers are trained from scratch on TinyShakespeare windows, a fraction
of them repeated at a random period (or on random tokens, the second dataset), several seeds per
setting; every checkpoint is measured inside the training job on fixed probes, and the phase change
is found by code with statistics. The modules in the order a run flows:

    data.py      the training mixture and the fixed probes (alias-free repeat periods)
    model.py     the attention-only transformer (its attention patterns returned, a head zeroed)
    mechanism.py previous-token scores, K-composition with its random baseline, each head's ablation
    run.py       one seed: train, measuring every scheduled checkpoint -> rows of curves, heads, pairs
    detect.py    curves -> the window, its tests per probe period, the mechanism's tests, the rule,
                 alias checks, the loss's non-convex stretches (plain functions on arrays)
    schemas.py   the Parquet schemas of the rows (torch-free)
    summary.py   the tables read back, each run's verdict, the JSON
    plots.py     the figures

The same detection on checkpoints someone else trained (an external model, method.md §13):

    integrity.py every checkpoint's weights hashed as loaded; the steps that repeat weights, left out
    onset.py     alias-free probe periods, per-period prefix matching, the verdict at every period
"""
