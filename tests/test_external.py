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
            composition={"baseline_samples": 8, "baseline_seed": 0, "top_pairs": 2})
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
