"""The supporting-analyses family end to end, on the outputs of the shared `test`-preset run."""

import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

from tinylens import published
from tinylens.core.activations import load_block
from tinylens.core.search import cumulative, load_summary, threshold_edges
from tinylens.core.strings import load_prompts
from tinylens.interventions import run
from tinylens.supporting.inputs import load_subspaces
from tinylens.supporting.schemas import ablation_schema, criterion_schema, load_subspace_tokens
from tinylens.supporting.subspaces import token_subspaces
from tinylens.tables import read_columns
from tinylens.weights import load_model

from conftest import TEST_SEEDS

pytestmark = pytest.mark.workflow

SEEDS = TEST_SEEDS
FIGURES = ("ablation", "final_layernorm", "ffwd_endpoint", "vector_sums", "token_subspaces", "criterion",
           "attention_vs_ffwd", "robustness")


@pytest.fixture(scope="module")
def metrics(finished_run):
    return json.loads((finished_run / "metrics/supporting.json").read_text())


def test_metrics_put_the_paper_beside_ours(metrics):
    assert set(metrics) >= {"headline", "ablation", "criterion", "token_subspaces", "final_layernorm", "ffwd_endpoint"}
    rows = metrics["ablation"]["comparison"]["corpus"]
    assert [r["block"] for r in rows] == [0, 1, 2, 3, 4, 5]  # 0-based, as every metrics file
    assert [r["paper_drop_ffwd"] for r in rows] == [published.ABLATION["drop_ffwd"][b] for b in range(6)]
    for r in rows:
        assert 0 <= r["one_token_drop_sa"] <= 1 and 0 <= r["full_drop_ffwd"] <= 1
        lo, hi = r["one_token_drop_sa_seed_range"]
        assert lo <= r["one_token_drop_sa"] <= hi
    crit = metrics["criterion"]["comparison"]["corpus"]
    assert [r["block"] for r in crit] == [5, 4, 3, 2, 1, 0]
    assert crit[0]["paper_end_of_model"] == 81.78 and crit[1]["paper_same_stage"] == 50.71
    for r in crit:
        assert 0 <= r["end_of_model_abs"] <= 100 and 0 < r["end_of_model_chance_exact"] < 50
    # same-stage subspaces exist for blocks 6..3 (stages 6..3 are learned), not for blocks 2 and 1
    assert [("same_stage_abs" in r) for r in crit] == [True, True, True, True, False, False]
    stages = metrics["token_subspaces"]["stages"]
    assert set(stages) == {"6", "5", "4", "3"}
    assert metrics["token_subspaces"]["a_at_ln_f_input"]["sigma_ratio"] == stages["6"]["by_token"]["a"]["sigma_ratio"]
    layernorm = metrics["final_layernorm"]["modes"]["corpus"]["scaling"]
    assert set(layernorm) == {"0.1", "10", "100"}
    assert all(v["max_residual_deviation"] < 1e-4 for v in layernorm.values())
    assert len(metrics["headline"]) > 40


def pick(table, context, variant, mode):
    return table["hellinger"][(table["context"] == context) & (table["variant"] == variant) & (table["mode"] == mode)]


def test_attention_against_feed_forward_follows_from_the_dumps(finished_run, metrics):
    from tinylens.supporting.schemas import CONTRIBUTIONS_SCHEMA

    cols = read_columns(finished_run / "supporting/block_contributions.parquet", CONTRIBUTIONS_SCHEMA)
    prompts = load_prompts(finished_run / "strings/prompts_heldout.parquet")
    on_eval = np.asarray(prompts["split"]) == "eval"
    d = json.loads((finished_run / "models/seed1337/config.json").read_text())["n_embed"]
    dump = finished_run / "activations/seed1337/prompts_heldout"
    sel = (np.asarray(cols["mode"]) == "heldout") & (cols["block"] == 3)
    assert sel.sum() == on_eval.sum()
    x, sa, ffwd = (load_block(dump, 3, k, d)[on_eval].astype(np.float64) for k in ("block_input", "sa_out", "ffwd_out"))
    np.testing.assert_allclose(cols["norm_ratio"][sel], np.linalg.norm(ffwd, axis=1) / np.linalg.norm(sa, axis=1))
    out = x + sa + ffwd
    direct = (ffwd * out).sum(1) / np.linalg.norm(ffwd, axis=1) / np.linalg.norm(out, axis=1)
    np.testing.assert_allclose(cols["cos_ffwd_out"][sel], direct, atol=1e-9)
    section = metrics["attention_vs_ffwd"]
    assert section["ffwd_parameter_share"]["paper"]["percent"] == 65.71
    block4 = section["modes"]["heldout"][3]
    assert block4["ffwd_longer"]["share"] == pytest.approx(np.mean(cols["norm_ratio"][sel] > 1), abs=1e-6)


def test_the_ablation_variants_agree_for_the_last_block_on_every_prompt(finished_run):
    for seed in SEEDS:
        t = read_columns(finished_run / f"supporting/ablation/seed{seed}.parquet", ablation_schema(6))
        assert len(t["mode"]) == (120 + 120 + 60) * 4  # corpus, heldout, paper prompts x 2 contexts x 2 variants
        for variant in ("drop_sa", "drop_ffwd"):
            for mode in ("corpus", "heldout", "paper"):
                full, alone = (pick(t, context, variant, mode) for context in ("full", "one_token"))
                np.testing.assert_allclose(alone[:, 5], full[:, 5], atol=1e-9)
                assert np.abs(alone[:, 0] - full[:, 0]).max() > 1e-3


def test_learned_subspaces_are_what_the_tables_say(finished_run):
    model = load_model(finished_run / "models/seed1337")
    for stage in (6, 3):
        path = finished_run / f"supporting/subspaces/stage{stage}.safetensors"
        found_stage, tensors = load_subspaces(path, 65, model.config.d_model)
        assert found_stage == stage
        sub = token_subspaces(tensors["samples"])
        np.testing.assert_allclose(np.abs(np.einsum("td,td->t", sub.direction, tensors["direction"])), 1.0, atol=1e-4)
        table = load_subspace_tokens(finished_run / f"supporting/subspaces/stage{stage}.parquet")
        np.testing.assert_allclose(table["sigma_ratio"], sub.sigma_ratio, rtol=1e-4)
        assert np.array_equal(table["converged"], (table["stopped_step"] >= 0) | (table["plateau_step"] >= 0))
        assert np.array_equal(tensors["converged"] > 0.5, table["converged"])
        with torch.no_grad():
            samples = torch.from_numpy(tensors["samples"]).reshape(-1, model.config.d_model)
            logits = run(model, resid=samples[:, None], start=stage, last_only=True).logits
            nll = torch.nn.functional.cross_entropy(logits, torch.arange(65).repeat_interleave(10), reduction="none")
        np.testing.assert_allclose(nll.view(65, 10).mean(1).numpy(), table["joint_nll"], rtol=1e-3, atol=1e-6)


def test_prompts_with_an_unconverged_top_token_are_flagged_and_left_out(finished_run):
    tokens = load_subspace_tokens(finished_run / "supporting/subspaces/stage6.parquet")
    unconverged = {t for t, c in zip(tokens["token"], tokens["converged"]) if not c}
    table = read_columns(finished_run / "supporting/criterion_corpus.parquet", criterion_schema())
    end = table["subspaces"] == "end_of_model"
    expected = [bool(set(top) & unconverged) for top in np.asarray(table["top_tokens"])[end]]
    assert table["unconverged"][end].tolist() == expected
    summary = json.loads((finished_run / "supporting/criterion_corpus.json").read_text())
    for b, entry in summary["blocks"].items():
        sel = end & (table["block"] == int(b))
        assert entry["end_of_model"]["excluded_unconverged"] == int((table["unconverged"] & ~table["empty"])[sel].sum())
        assert entry["end_of_model"]["used"] == int((~table["unconverged"] & ~table["empty"])[sel].sum())


def test_the_criterion_table_follows_from_the_search_and_the_subspaces(finished_run, config):
    """Recomputed here from the core's search summary, the tuned thresholds, the prompt dumps and the
    subspace file, with exact fractions and plain Python sorting."""
    mode = "corpus"
    edges = threshold_edges(**config["threshold_grid"])
    shards = sorted((finished_run / f"search/{mode}").glob("shard_*.parquet"))
    ids, _, counts = load_summary(shards, 6, len(edges), 65)
    above = cumulative(counts, axis=2)
    split = np.asarray(load_prompts(finished_run / f"strings/prompts_{mode}.parquet")["split"])
    tuned = json.loads((finished_run / f"approx/{mode}/tuned.json").read_text())
    table = read_columns(finished_run / f"supporting/criterion_{mode}.parquet", criterion_schema())
    _, end = load_subspaces(finished_run / "supporting/subspaces/stage6.safetensors", 65, 32)
    checked = 0
    for block in (0, 5):
        k_index = int(np.argmin(np.abs(edges - tuned["thresholds"][block])))
        ffwd = load_block(finished_run / f"activations/seed1337/prompts_{mode}", block, "ffwd_out", 32)
        for i in np.nonzero(split == "eval")[0][:15]:
            c = [int(x) for x in above[i, block, k_index]]
            total = sum(c)
            row = np.nonzero((table["prompt_id"] == ids[i]) & (table["block"] == block)
                             & (table["subspaces"] == "end_of_model"))[0]
            assert len(row) == 1
            if total == 0:
                assert table["empty"][row[0]]
                continue
            order = sorted(range(65), key=lambda t: (-c[t], t))
            cum, kept = 0, []
            for t in order:  # truncate: the fewest holding > 99%
                kept.append(t)
                cum += c[t]
                if Fraction(cum, total) > Fraction(99, 100):
                    break
            cum, top = 0, []
            for t in kept:  # top_n: the fewest holding > 90%, of the unrenormalised truncation
                top.append(t)
                cum += c[t]
                if Fraction(cum, total) > Fraction(9, 10):
                    break
            v = ffwd[i].astype(np.float64)
            cos = end["direction"] @ v / (np.linalg.norm(end["direction"], axis=1) * np.linalg.norm(v))
            by_abs = sorted(range(65), key=lambda t: (-abs(cos[t]), t))[:32]
            assert table["top_n"][row[0]] == len(top)
            assert table["holds_abs"][row[0]] == all(t in by_abs for t in top)
            checked += 1
    assert checked >= 20


def test_every_figure_is_an_image_in_the_report_category(finished_run, repo, test_config, tmp_path):
    import matplotlib.image as mpimg

    for name in FIGURES:
        image = mpimg.imread(finished_run / f"figures/{name}.png")
        assert image.shape[0] > 300 and image.shape[1] > 500, name
    report = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d",
                           str(finished_run.parent.parent), "--report", str(report), "--config", *test_config],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = report.read_text(errors="ignore")
    assert "Supporting analyses" in html
    for name in FIGURES:
        assert f"{name}.png" in html


def test_the_family_target_plans_only_this_family(finished_run, repo, test_config):
    from conftest import run_snakemake

    gone = finished_run / "metrics/supporting.json"
    saved, mtime = gone.read_bytes(), gone.stat().st_mtime_ns
    gone.unlink()
    try:
        proc = run_snakemake(repo, finished_run.parent.parent, "-n", "supporting", config=test_config)
        out = proc.stdout + proc.stderr
        assert "supporting_metrics" in out and "plot_criterion" in out
        for core in ("train_model", "dump_activations", "search_shard", "tune_approximation", "token_subspaces"):
            assert f"rule {core}" not in out and f"\n{core} " not in out, core
    finally:  # as it was, its time included: the shared run stays up to date for the tests after this one
        gone.write_bytes(saved)
        os.utime(gone, ns=(mtime, mtime))
