"""The induction-head phase change, shown (method.md §8b; seed 004 after Olsson et al. 2022).

Small attention-only transformers are trained from scratch on TinyShakespeare windows, a fraction
of them repeated at a random period; every checkpoint is measured inside the training job on
fixed probes, and the phase change is found by code with statistics. The modules in the order a
run flows:

    data.py      the training mixture and the fixed probes (repeat periods outside the training's)
    model.py     the attention-only transformer (its attention patterns returned)
    run.py       one run: train, measuring every scheduled checkpoint -> rows of curves and heads
    detect.py    curves -> the phase-change window and its statistical tests, the loss bump, phases
    schemas.py   the Parquet schemas of the rows (torch-free)
    summary.py   the tables read back, each run's verdict, the JSON
    plots.py     the figures

The same detection on checkpoints someone else trained (an external model, method.md §13):

    integrity.py every checkpoint's weights hashed as loaded; the steps that repeat weights, left out
    onset.py     alias-free probe periods, per-period prefix matching, the verdict at every period
"""
