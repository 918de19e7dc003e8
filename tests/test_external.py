"""Models loaded through TransformerLens (tinylens.external): our own model exported and re-imported by the
loader every external model goes through gives the native path's measurements; missing models stop with
a message that says what to do."""

import numpy as np
import pytest
import torch

pytest.importorskip("transformer_lens.model_bridge")

from tinylens.circuits.composition import score_table  # noqa: E402
from tinylens.core.corpus import CharTokenizer  # noqa: E402
from tinylens.dynamics.measure import measure_checkpoint  # noqa: E402
from tinylens.dynamics.probes import MeasureSettings, make_probes  # noqa: E402
from tinylens.export import export  # noqa: E402
from tinylens.external import (  # noqa: E402
    BridgeSubject,
    ExternalModelUnavailable,
    check_available,
    load_bridge,
    measure_checkpoints,
    tokenize_text,
)
from tinylens.model import ModelConfig, Transformer  # noqa: E402
from tinylens.weights import save_model  # noqa: E402

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\nAll: Speak, speak.\n" * 8
STEP = 7
STEPS = (0, 4, 16, 64)  # the built suites' checkpoints: the phase finder needs 3 or more after step 0


@pytest.fixture(scope="module")
def ours_and_imported(tmp_path_factory):
    """Our model (random weights, trained-looking scale), exported to <dir>/step7 and loaded back by the loader."""
    tmp = tmp_path_factory.mktemp("external")
    tokenizer = CharTokenizer.fit(TEXT)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=tokenizer.vocab_size, d_model=16, n_layer=3, n_head=2, block_size=16,
                                    dropout=0.0)).eval()
    with torch.no_grad():  # break the init's symmetry between LayerNorm gains so folding matters
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    save_model(tmp / "model", model)
    tokenizer.save(tmp / "model/tokenizer.json")
    export(tmp / "model", tmp / f"exported/step{STEP}")
    return model, tokenizer, load_bridge(str(tmp / "exported"), STEP), str(tmp / "exported")


def settings():
    return MeasureSettings(val_windows=8, train_windows=4, energy_windows=8, icl_positions=[2, 15],
                           icl_bands=[[1, 3], [10, 15]],
                           repeat={"length": 4, "copies": 4, "sequences": 3, "exclude": 1},
                           unigram_direction={"restarts": 2, "steps": 20}, seed=0)


def test_the_imported_model_measures_as_the_native_path(ours_and_imported):
    model, tokenizer, bridge, _ = ours_and_imported
    ids = tokenize_text(bridge, TEXT)
    assert np.array_equal(ids, tokenizer.encode(TEXT))  # the model's own tokenizer: here ours, exported
    probes = make_probes(ids[:500], ids[500:], tokenizer.vocab_size, 16, settings())
    native_row, native_heads = measure_checkpoint(model, probes, settings())
    row, heads = measure_checkpoint(BridgeSubject(bridge), probes, settings())
    for name in ("train_loss", "val_loss", "icl_score", "kl_model_unigram", "kl_unigram_model", "ie", "ie_prefix",
                 "loss_by_position"):
        np.testing.assert_allclose(row[name], native_row[name], rtol=0, atol=1e-5, err_msg=name)
    # the unigram direction is an L-BFGS minimum: the same start, a float32 path through another module
    assert row["unigram_direction_kl"] == pytest.approx(native_row["unigram_direction_kl"], abs=1e-4)
    assert set(heads) == set(native_heads)
    for name, value in heads.items():
        torch.testing.assert_close(value.double(), native_heads[name].double(), rtol=0, atol=1e-5, msg=name)


def assert_same_scores(imported, native):
    for key in ("seed", "step", "layernorm", "basis", "kind", "layer_a", "head_a", "layer_b", "head_b"):
        assert list(imported[key]) == list(native[key]), key
    for key in ("score", "baseline_mean", "baseline_std"):
        np.testing.assert_allclose(imported[key], native[key], rtol=0, atol=1e-5, err_msg=key)
    assert np.ptp(native["score"]) > 0.05  # scores that differ between pairs: the comparison can fail


def test_the_imported_model_has_the_native_composition_scores(ours_and_imported):
    """What rule external_measure writes (tinylens.external.measure_checkpoints: circuit_weights of the bridge)
    for our exported model: the last checkpoint's table (Q/K/V, both bases, LayerNorm ignored and folded) and
    K-composition over the checkpoints are the native scores, the tables our own circuits family writes."""
    model, _, _, folder = ours_and_imported
    m = measure_checkpoints(folder, [STEP], "step{step}", TEXT, 0.8, 16, 1, settings(), samples=16, baseline_seed=3,
                            progress=False)
    native = score_table(model, seed=0, step=STEP, samples=16, baseline_seed=3)
    assert_same_scores(m["scores"], native)
    k_ignored = (np.asarray(native["kind"]) == "K") & (np.asarray(native["layernorm"]) == "ignored")
    assert_same_scores(m["over_training"], {k: np.asarray(v)[k_ignored] for k, v in native.items()})


def test_a_missing_checkpoint_or_an_unreachable_hub_model_stops_with_what_to_do(tmp_path, monkeypatch):
    (tmp_path / "step0").mkdir()
    check_available(str(tmp_path), [0])
    with pytest.raises(ExternalModelUnavailable, match=r"lacks checkpoint folders .*step5: each checkpoint"):
        check_available(str(tmp_path), [0, 5])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    with pytest.raises(ExternalModelUnavailable, match=r"model 'EleutherAI/pythia-70m': revisions step0, step1000 "
                                                       r"are not in the local Hugging Face cache.*huggingface-cli "
                                                       r"download EleutherAI/pythia-70m --revision step0.*local copy"):
        check_available("EleutherAI/pythia-70m", [0, 1000])


def build_hf_checkpoints(folder, kind, tokenizer, steps=STEPS):
    """A tiny GPT-NeoX (rotary, parallel attention) or GPT-2 style model with random weights saved as Hugging
    Face checkpoints ``<folder>/step<N>/`` with a character tokenizer: a stand-in for a hub model's suite."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM

    from tinylens.export import hf_tokenizer

    hf = hf_tokenizer(tokenizer)
    for step in steps:
        torch.manual_seed(step)
        if kind == "neox":
            model = GPTNeoXForCausalLM(GPTNeoXConfig(
                vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=32, rotary_pct=0.5, bos_token_id=0, eos_token_id=0))
        else:
            model = GPT2LMHeadModel(GPT2Config(vocab_size=tokenizer.vocab_size, n_embd=16, n_layer=2, n_head=2,
                                               n_positions=32, bos_token_id=0, eos_token_id=0))
        model.save_pretrained(folder / f"step{step}")
        hf.save_pretrained(folder / f"step{step}")


@pytest.mark.workflow
def test_gpt_neox_and_gpt2_checkpoints_run_through_the_rules(repo, tmp_path, corpus_path):
    """Two local model suites through the rules: the GPT-NeoX-style one through `snakemake external_models`
    (tables, the metrics of our seeds' dynamics and circuits families, every figure), the GPT-2-style one to its
    tables (the summaries and figures read the same tables whatever the architecture); and a hub model that is
    not available here stops the plan, naming it."""
    import json
    import subprocess
    import sys

    import polars as pl
    import yaml

    from tinylens.circuits.composition import KINDS
    from tinylens.circuits.schemas import SCORES_SCHEMA
    from tinylens.circuits.summary import SYMMETRY_NOT_RUN
    from tinylens.circuits.training import VARIANTS, variant_name
    from tinylens.dynamics.schemas import HEADS_SCHEMA
    from tinylens.tables import read_table

    text = corpus_path.read_text(encoding="utf-8")[:20000]
    tokenizer = CharTokenizer.fit(corpus_path.read_text(encoding="utf-8"))
    entry = yaml.safe_load((repo / "config/config.yaml").read_text())["external_models"]["pythia-70m"]
    models = {}
    for kind in ("neox", "gpt2"):
        build_hf_checkpoints(tmp_path / kind, kind, tokenizer)
        models[f"tiny-{kind}"] = dict(
            entry, model=str(tmp_path / kind), steps=list(STEPS), tokens_per_step=512, corpus_chars=len(text),
            context=24, dynamics=dict(entry["dynamics"], threads=1, measure=dict(
                entry["dynamics"]["measure"], val_windows=8, train_windows=4, energy_windows=4, icl_positions=[2, 20],
                icl_bands=[[1, 4], [14, 22]],
                repeat={"length": 5, "copies": 4, "sequences": 4, "exclude": 2},
                unigram_direction={"restarts": 1, "steps": 5})),
            composition={"baseline_samples": 8, "baseline_seed": 0, "top_pairs": 2},
            onset=dict(entry["onset"], probe_periods=[5, 7], sequences=4, exclude=2))
    extra = tmp_path / "external.yaml"
    extra.write_text(yaml.safe_dump({"external": ["tiny-neox"], "external_models": models}))
    run = tmp_path / "run/results/test/external"
    cmd = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(tmp_path / "run"),
           "--cores", "2", "external_models", "results/test/external/tiny-gpt2/model/config.json",  # its tables
           "--configfile", str(extra), "--config", "preset=test", f"corpus_url={corpus_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    scores = {}
    for name in models:
        out = run / name
        heads = read_table(out / "dynamics/seed0/heads.parquet", HEADS_SCHEMA)
        assert heads.num_rows == len(STEPS) * 2 * 2 and sorted(set(heads["step"].to_pylist())) == list(STEPS)
        over = read_table(out / "circuits/seed0/over_training.parquet", SCORES_SCHEMA)
        assert sorted(set(over["step"].to_pylist())) == list(STEPS)
        # the circuits family's table of the last checkpoint: every pair, Q/K/V, both bases, LayerNorm ignored/folded
        scores[name] = pl.from_arrow(read_table(out / "circuits/seed0/scores.parquet", SCORES_SCHEMA))
        assert scores[name].height == len(VARIANTS) * len(KINDS) * 2 * 2 and set(scores[name]["step"]) == {STEPS[-1]}
    out = run / "tiny-neox"
    summary = json.loads((out / "metrics/dynamics.json").read_text())
    assert summary["seeds"]["0"]["checkpoints"] == len(STEPS) and summary["original_seed"] == 0
    # random weights at every step: four distinct checkpoints, no onset
    assert summary["seeds"]["0"]["integrity"]["distinct_weights"] == len(STEPS)
    assert not summary["seeds"]["0"]["onset"]["phase_change_detected"]
    # the circuits family's metrics: the keys of our own models'
    circuits = json.loads((out / "metrics/circuits.json").read_text())
    assert set(circuits) == {"source", "original_seed", "shape", "top_pairs", "baselines", "across_seeds",
                             "symmetry", "symmetry_result", "over_training"}
    assert circuits["shape"] == {"d_model": 16, "n_layer": 2, "n_head": 2, "pairs": 4,
                                 "gaussian_1_over_sqrt_d_model": 0.25}
    for key in ("top_pairs", "baselines", "across_seeds"):
        assert {v: sorted(k) for v, k in circuits[key].items()} == {
            variant_name(*v): sorted(KINDS) for v in VARIANTS}, key
    best = scores["tiny-neox"].filter((pl.col("basis") == "token") & (pl.col("layernorm") == "folded")
                                      & (pl.col("kind") == "V"))
    assert circuits["top_pairs"]["token/folded"]["V"][0]["score"] == pytest.approx(
        best.sort(pl.col("score") - pl.col("baseline_mean"), descending=True)["score"][0], abs=1e-12)
    assert circuits["symmetry"] == {} and circuits["symmetry_result"] == {"not_run": SYMMETRY_NOT_RUN}
    assert set(circuits["over_training"]["0"]) == {"residual/ignored", "token/ignored"}
    assert sorted(p.name for p in (run / "tiny-neox/figures").glob("*.png")) == sorted(
        f"{f}.png" for f in ("dynamics_energy_kl", "dynamics_icl_score", "dynamics_loss_by_position",
                             "dynamics_head_scores", "dynamics_energy_depth", "composition_heatmaps",
                             "composition_over_training"))
    offline = subprocess.run([*cmd[:cmd.index("external_models") + 1], *cmd[-5:], "external=[pythia-70m]", "-n"],
                             capture_output=True, text=True,
                             env={**__import__("os").environ, "HF_HUB_OFFLINE": "1",
                                  "HF_HOME": str(tmp_path / "empty-cache")})
    said = offline.stdout + offline.stderr
    assert offline.returncode != 0
    assert "model 'EleutherAI/pythia-70m'" in said and "huggingface-cli download" in said


# --- suites a researcher can trust: the integrity gate, the induction-head onset, bounded disk, the extra --------

ONSET_STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CIRCUIT_AT = 64  # the first checkpoint whose weights hold the circuit


def circuit_gpt2(tokenizer, seed: int, previous_token: bool, induction: bool, positions: int = 64):
    """A 2-layer GPT-2-style model whose weights are random (the initialisation, drawn with ``seed``) unless set
    by hand: attention only (the MLPs zero), the unembedding untied. The residual stream holds one-hot slots:
    the token [0, V), the position [V, V+P), the previous token [V+P, 2V+P), the predicted token [2V+P, 3V+P).

    - ``previous_token``: layer 0 head 0 attends from each position to the one before it (query: the
      position, key: the position + 1) and writes the token it finds into the previous-token slot;
    - ``induction``: layer 1 head 0 attends from each position to those whose previous token is its own token
      (query: the token slot, key: the previous-token slot), i.e. to the token after each earlier occurrence
      of the current one, and writes that token into the predicted-token slot, the only slot the unembedding
      reads: an induction head.

    Every other weight is the initialisation times 0.02, so two checkpoints of one suite never hold the same
    weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    v, p, n_head = tokenizer.vocab_size, positions, 4
    d_head = max(v, p, -(-(3 * v + p) // n_head))
    d = n_head * d_head
    token, position, previous, predicted = 0, v, v + p, 2 * v + p
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=v, n_embd=d, n_layer=2, n_head=n_head, n_positions=p, n_inner=4,
                                       tie_word_embeddings=False, bos_token_id=0, eos_token_id=0))
    if not (previous_token or induction):
        return model
    t, i = torch.arange(v), torch.arange(p - 1)
    with torch.no_grad():
        for name, w in model.named_parameters():
            w.mul_(0.02)
            if "ln_" in name:
                w.copy_(torch.ones_like(w) if name.endswith("weight") else torch.zeros_like(w))
            if ".mlp." in name:
                w.zero_()
        wte, wpe = model.transformer.wte.weight, model.transformer.wpe.weight
        wte[t, token + t] += 1.0
        wpe[torch.arange(p), position + torch.arange(p)] += 1.0

        def head(layer, q, k, v_, o, scale):
            """Head 0 of ``layer``: (rows read, d_head columns written) of Q, K and V; (d_head rows, slot) of O."""
            attn = model.transformer.h[layer].attn
            w_qkv, w_o = attn.c_attn.weight, attn.c_proj.weight  # [d 3d], [d d]: x @ W
            for part, (rows, cols) in enumerate((q, k, v_)):
                w_qkv[:, part * d : part * d + d_head] = 0
                w_qkv[rows, part * d + cols] = 1.0
                attn.c_attn.bias[part * d : part * d + d_head] = 0
            w_o[:d_head] = 0
            w_o[o[0], o[1]] = scale

        if previous_token:
            head(0, (position + i + 1, i), (position + i, i), (token + t, t), (t, previous + t), 1 / 12)
        if induction:
            head(1, (token + t, t), (previous + t, t), (token + t, t), (t, predicted + t), 1 / 10)
            model.lm_head.weight[:] = 0
            model.lm_head.weight[t, predicted + t] = 0.6
    return model


def build_circuit_suite(folder, tokenizer, induction: bool, steps=ONSET_STEPS, circuit_at=CIRCUIT_AT):
    """Hugging Face checkpoints ``<folder>/step<N>/``: random weights before ``circuit_at``; from it on a
    previous-token head and, with ``induction``, an induction head (:func:`circuit_gpt2`)."""
    from tinylens.export import hf_tokenizer

    hf = hf_tokenizer(tokenizer)
    for step in steps:
        built = step >= circuit_at
        circuit_gpt2(tokenizer, step, previous_token=built, induction=built and induction).save_pretrained(
            folder / f"step{step}")
        hf.save_pretrained(folder / f"step{step}")


def onset_entry(entry: dict, folder, text: str, **overrides) -> dict:
    """An external_models entry for a built suite, small enough for a test: context 48, 128 validation windows
    (the ICL score's standard error about 0.03 nats), probes at periods 7, 11 and 23."""
    return dict(
        entry, model=str(folder), steps=list(ONSET_STEPS), tokens_per_step=1000, corpus_chars=len(text), context=48,
        dynamics=dict(entry["dynamics"], threads=1, phases=dict(entry["dynamics"]["phases"], smooth_decades=0.05),
                      measure=dict(entry["dynamics"]["measure"], val_windows=128, train_windows=8, energy_windows=4,
                                   icl_positions=[2, 40], icl_bands=[[1, 8], [32, 46]],
                                   repeat={"length": 8, "copies": 4, "sequences": 8, "exclude": 2},
                                   unigram_direction={"restarts": 1, "steps": 5})),
        composition={"baseline_samples": 8, "baseline_seed": 0, "top_pairs": 2},
        onset=dict(entry["onset"], probe_periods=[7, 11, 23], sequences=16, exclude=2,
                   detect=dict(entry["onset"]["detect"], smooth_decades=0.05)),
        **overrides)


@pytest.fixture(scope="module")
def onset_run(repo, tmp_path_factory, corpus_path):
    """Two built suites through the rules: ``corrupt``, whose induction circuit appears at step 64, with step 2 a
    copy of step 1 and step 8 a copy of the final step 512; ``never``, which gets a previous-token head at step
    64 but never an induction head. The first through `external_models` (every output), the second to its
    metrics. Returns (run folder, the snakemake process, the command, the config file, the entries)."""
    import shutil
    import subprocess
    import sys

    import yaml

    tmp = tmp_path_factory.mktemp("onset")
    text = corpus_path.read_text(encoding="utf-8")[:30000]
    tokenizer = CharTokenizer.fit(corpus_path.read_text(encoding="utf-8"))
    build_circuit_suite(tmp / "corrupt", tokenizer, induction=True)
    for copy, of in ((2, 1), (8, ONSET_STEPS[-1])):
        shutil.rmtree(tmp / f"corrupt/step{copy}")
        shutil.copytree(tmp / f"corrupt/step{of}", tmp / f"corrupt/step{copy}")
    build_circuit_suite(tmp / "never", tokenizer, induction=False)
    entry = yaml.safe_load((repo / "config/config.yaml").read_text())["external_models"]["pythia-70m"]
    models = {name: onset_entry(entry, tmp / name, text) for name in ("corrupt", "never")}
    extra = tmp / "external.yaml"
    extra.write_text(yaml.safe_dump({"external": ["corrupt"], "external_models": models}))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(tmp / "run"), "--cores", "2",
           "external_models", "results/test/external/never/metrics/dynamics.json",
           "--configfile", str(extra), "--config", "preset=test", f"corpus_url={corpus_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return tmp / "run/results/test/external", proc, cmd, extra, models


def dynamics_of(run, name: str) -> dict:
    import json

    return json.loads((run / name / "metrics/dynamics.json").read_text())


@pytest.mark.workflow
def test_the_gate_reports_the_duplicated_step_and_the_early_final_weights(onset_run):
    run, proc, *_ = onset_run
    seed = dynamics_of(run, "corrupt")["seeds"]["0"]
    report = seed["integrity"]
    assert report["repeats_previous"] == [{"step": 2, "same_as": 1}]
    assert report["identical_to_final"] == [{"step": 8, "final_step": ONSET_STEPS[-1]}]
    assert report["repeats_earlier"] == [] and report["left_out"] == [2, 8] and not report["kept"]
    assert report["distinct_weights"] == len(ONSET_STEPS) - 2
    assert report["sha256"]["1"] == report["sha256"]["2"] != report["sha256"]["4"]
    assert 2 not in report["detection_steps"] and 8 not in report["detection_steps"]
    # left out of §8's phases and window as well as §8b's onset
    assert seed["checkpoints"] == len(ONSET_STEPS) - 2 and seed["onset"]["checkpoints"] == len(ONSET_STEPS) - 2
    # a warning on the console, not only in the log
    assert ("tinylens: warning: external model corrupt" in proc.stderr
            and "step 8 holds the final checkpoint's weights (step 512)" in proc.stderr)


@pytest.mark.workflow
def test_the_onset_is_found_at_the_checkpoint_the_circuit_was_set_at(onset_run):
    """The circuit is in the weights from step 64 on (random at 32): the window must hold the step between those
    two checkpoints and no other checkpoint, in tokens too, every test passing at every probe period."""
    run, *_ = onset_run
    onset = dynamics_of(run, "corrupt")["seeds"]["0"]["onset"]
    w = onset["window"]
    assert onset["phase_change_detected"], onset["tests"]
    assert 16 < w["start"] <= 32 and CIRCUIT_AT <= w["end"] < 128 and w["peak"] in (32, CIRCUIT_AT)
    assert w["start_tokens"] == round(w["start"] * 1000) and w["peak_tokens"] == w["peak"] * 1000
    assert onset["tested_at_step"] == 128  # the first checkpoint at or after the window's end
    assert (onset["best_head"]["layer"], onset["best_head"]["head"]) == (1, 0)  # the head set by hand
    per_period = onset["tests"]["prefix_matching"]["per_period"]
    assert sorted(per_period, key=int) == ["7", "11", "23"] and all(t["pass"] for t in per_period.values())
    assert all(t["pass"] for t in onset["tests"].values())


@pytest.mark.workflow
def test_a_suite_that_never_gets_the_circuit_has_no_onset(onset_run):
    run, *_ = onset_run
    seed = dynamics_of(run, "never")["seeds"]["0"]
    onset = seed["onset"]
    assert seed["integrity"]["flagged"] == []
    assert not onset["phase_change_detected"]
    assert not any(t["pass"] for t in onset["tests"]["prefix_matching"]["per_period"].values())
    assert not onset["tests"]["second_copy_loss_drop"]["pass"]


@pytest.mark.workflow
def test_the_window_is_drawn_and_the_findings_say_what_was_found(onset_run):
    from matplotlib.colors import same_color
    from matplotlib.patches import Rectangle

    from tinylens.dynamics.plots import make_head_scores
    from tinylens.dynamics.summary import load_curves

    run, *_ = onset_run
    out = run / "corrupt"
    assert sorted(p.name for p in (out / "figures").glob("*.png")) == sorted(
        f"{f}.png" for f in ("dynamics_energy_kl", "dynamics_icl_score", "dynamics_loss_by_position",
                             "dynamics_head_scores", "dynamics_energy_depth", "composition_heatmaps",
                             "composition_over_training"))
    summary = dynamics_of(run, "corrupt")
    seed, w = summary["seeds"]["0"], summary["seeds"]["0"]["onset"]["window"]
    curves = load_curves(out / "dynamics/seed0/checkpoints.parquet", out / "dynamics/seed0/heads.parquet", 2, 4, 48)
    fig = make_head_scores(curves, seed, "0", summary["headline"]["prefix_matching_uniform_baseline"])
    spans = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert [(s.get_x(), s.get_x() + s.get_width()) for s in spans] == [pytest.approx((w["start"], w["end"]))]
    # the onset's window, not §8's (which lies close by here): moved, it moves; undetected, none is drawn
    moved = {**seed, "onset": {**seed["onset"], "window": {**w, "start": 3.0, "end": 5.0}}}
    fig = make_head_scores(curves, moved, "0", 0.1)
    assert [(s.get_x(), s.get_x() + s.get_width()) for s in fig.axes[0].patches] == [(3.0, 5.0)]
    assert seed["phase_change_detected"]  # §8's verdict: a window it would draw
    fig = make_head_scores(curves, {**seed, "onset": {**seed["onset"], "phase_change_detected": False}}, "0", 0.1)
    assert not fig.axes[0].patches
    left_out = [x.get_xdata()[0] for x in fig.axes[0].get_lines() if same_color(x.get_color(), "tab:red")]
    assert left_out == [2, 8]  # the checkpoints repeating weights, dotted
    text = (out / "findings.md").read_text(encoding="utf-8")
    assert "# Findings on the external model `corrupt`" in text
    assert ("2 of 11 checkpoints repeat weights (their content hashes as loaded): step 2 holds the same weights as "
            "step 1, the checkpoint before it; step 8 holds the final checkpoint's weights (step 512). They are left "
            "out of phase and window detection.") in text
    assert "On the 9 checkpoints used, induction heads form between steps" in text
    assert "An induction head forms (final prefix-matching score above" in text  # §8's sentence, for one model
    assert "The symmetry test is not run" in text and "skipped" not in text


@pytest.mark.workflow
def test_keeping_the_duplicates_puts_them_back_into_detection(onset_run):
    """integrity.keep_duplicates: true: the flagged checkpoints are still reported, and §8's phases and §8b's onset
    are found on every checkpoint, the duplicated step and step 8's early final weights included."""
    import shutil
    import subprocess

    import yaml

    run, _, cmd, extra, models = onset_run
    copy = extra.parent / "kept"  # a copy of the run, so the other tests read the gated one whatever their order
    shutil.copytree(extra.parent / "run", copy / "run", symlinks=True)
    run = copy / "run/results/test/external"
    kept = {**models, "corrupt": {**models["corrupt"], "integrity": {"keep_duplicates": True}}}
    config = copy / "kept.yaml"
    config.write_text(yaml.safe_dump({"external": ["corrupt"], "external_models": kept}))
    proc = subprocess.run([*cmd[: cmd.index("-d") + 1], str(copy / "run"), "--cores", "2",
                           "results/test/external/corrupt/metrics/dynamics.json", "--configfile", str(config),
                           *cmd[cmd.index("--config"):]], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    seed = dynamics_of(run, "corrupt")["seeds"]["0"]
    assert seed["integrity"]["kept"] and seed["integrity"]["flagged"] == [2, 8] and seed["integrity"]["left_out"] == []
    assert seed["checkpoints"] == seed["onset"]["checkpoints"] == len(ONSET_STEPS)
    assert "They are kept in phase and window detection" in proc.stderr


def test_streaming_holds_at_most_two_checkpoints_on_disk(tmp_path, monkeypatch, caplog):
    """stream: fetch, measure and drop one checkpoint at a time. The hub is served offline from a built suite
    (snapshot_download copies a checkpoint's folder into the folder asked for, and takes its time); a thread counts the
    checkpoint folders in the scratch folder while the suite is measured. The weights measured are the suite's."""
    import shutil
    import threading
    import time

    import huggingface_hub

    tokenizer = CharTokenizer.fit(TEXT)
    steps = (0, 4, 16, 64, 256)
    build_hf_checkpoints(tmp_path / "suite", "gpt2", tokenizer, steps=steps)
    served = []

    def snapshot_download(repo_id, revision, local_files_only=False, local_dir=None, **kwargs):
        if local_files_only:
            raise FileNotFoundError(f"{repo_id}@{revision} is not in this test's cache")
        shutil.copytree(tmp_path / "suite" / revision, local_dir)
        time.sleep(0.2)  # a download takes a while, its folder on disk meanwhile
        served.append(revision)
        return str(local_dir)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    scratch, counts, done = tmp_path / "stream", [], threading.Event()

    def count():
        while not done.is_set():
            counts.append(len([p for p in scratch.iterdir() if p.is_dir()]) if scratch.is_dir() else 0)
            time.sleep(0.005)

    watcher = threading.Thread(target=count)
    watcher.start()
    try:
        with caplog.at_level("INFO", logger="tinylens.sources"):
            streamed = measure_checkpoints("someone/suite", steps, "step{step}", TEXT, 0.8, 16, 1, settings(), 4, 0,
                                           progress=False, stream=scratch)
    finally:
        done.set()
        watcher.join()
    assert served == [f"step{s}" for s in steps]
    assert max(counts) == 2  # the one measured and the next, fetched meanwhile; never the suite
    assert not scratch.exists()  # and nothing left behind
    said = [r.getMessage() for r in caplog.records if "fetched checkpoint folder(s) on disk" in r.getMessage()]
    assert len(said) == len(steps) and all(int(m.split("; ")[1].split()[0]) <= 2 for m in said)
    local = measure_checkpoints(str(tmp_path / "suite"), steps, "step{step}", TEXT, 0.8, 16, 1, settings(), 4, 0,
                                progress=False)
    assert streamed["onset"]["weights_sha256"] == local["onset"]["weights_sha256"]
    np.testing.assert_allclose(streamed["checkpoints"]["val_loss"], local["checkpoints"]["val_loss"], rtol=0, atol=1e-9)


def test_planning_without_the_tl_extra_stops_with_one_line_naming_it(repo, tmp_path):
    """A new user's install (`pip install -e .`, no extra): the packages of the `tl` extra cannot be imported
    (an import hook refuses them). The default run still plans; `external_models` stops while planning with
    one line naming the extra and its install command, not a ModuleNotFoundError."""
    import os
    import subprocess
    import sys

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import sys\n"
        "BLOCKED = ('huggingface_hub', 'transformer_lens', 'transformers')\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r} (refused by the test)', name=name)\n"
        "sys.meta_path.insert(0, Refuse())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), os.environ["PYTHONPATH"]])}
    probe = subprocess.run([sys.executable, "-c", "import huggingface_hub"], capture_output=True, text=True, env=env)
    assert probe.returncode != 0 and "refused by the test" in probe.stderr  # the hook is active
    base = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(tmp_path / "run"), "-n"]
    default = subprocess.run([*base, "--config", "preset=test"], capture_output=True, text=True, env=env)
    assert default.returncode == 0, default.stderr[-3000:]
    proc = subprocess.run([*base, "external_models", "--config", "preset=test", "external=[pythia-70m]"],
                          capture_output=True, text=True, env=env)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0
    (line,) = [x for x in said.splitlines() if "`tl` extra" in x]
    assert line.strip() == ("MissingExtra: external models need the `tl` extra (huggingface_hub, transformers, "
                            'transformer_lens not installed): pip install -e ".[tl]"')
    assert "ModuleNotFoundError" not in said
