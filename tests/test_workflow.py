"""End to end: the real Snakemake workflow on the `test` preset, on the shared corpus copy."""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tinylens.core.corpus import CharTokenizer
from tinylens.core.training_log import LOSS_COLUMNS, METRICS_KEYS
from tinylens.interventions import record_activations
from tinylens.model import Transformer
from tinylens.model_config import load_config
from tinylens.weights import load_weights

from conftest import TEST_SEEDS, run_snakemake, snakemake_cmd

pytestmark = pytest.mark.workflow

SEEDS = TEST_SEEDS






def test_every_model_beats_the_unigram_entropy(finished_run, corpus_path, test_preset):
    text = corpus_path.read_text()[: test_preset["corpus_chars"]]
    _, counts = np.unique(np.frombuffer(text.encode(), dtype=np.uint8), return_counts=True)
    p = counts / counts.sum()
    unigram = float(-(p * np.log(p)).sum())
    assert 3.0 < unigram < 3.5
    for seed in SEEDS:
        metrics = json.loads((finished_run / f"models/seed{seed}/metrics.json").read_text())
        assert metrics["val_loss"] < unigram - 0.5, (seed, metrics["val_loss"], unigram)
        assert metrics["seed"] == seed
    summary = json.loads((finished_run / "metrics/training.json").read_text())
    assert set(summary["models"]) == {str(s) for s in SEEDS}


def test_metrics_json_has_the_keys_the_readme_documents(finished_run, repo):
    readme = (repo / "docs/analyses.md").read_text(encoding="utf-8")
    section = readme.split("<!-- metrics-keys -->")[1]
    documented = re.findall(r"^\| `(\w+)` \|", section, flags=re.M)
    assert documented, "docs/analyses.md lost its metrics.json key table"
    assert tuple(documented) == METRICS_KEYS
    for seed in SEEDS:
        metrics = json.loads((finished_run / f"models/seed{seed}/metrics.json").read_text())
        assert list(metrics) == documented


def schedule(test_preset, seed=1337):
    from tinylens.config import train_config

    return list(train_config(test_preset["train"], seed).save_steps)


def test_every_checkpoint_loads_and_the_last_is_the_model(finished_run, test_preset):
    assert schedule(test_preset)[:3] == [0, 5, 7] and len(schedule(test_preset)) >= 10  # log-spaced: dense early
    for seed in SEEDS:
        expected_steps = schedule(test_preset, seed)  # 1442: spaced to its own last step
        model_dir = finished_run / f"models/seed{seed}"
        cfg = load_config(model_dir / "config.json")
        checkpoints = sorted((model_dir / "checkpoints").glob("step_*.safetensors"))
        assert [int(p.stem.split("_")[1]) for p in checkpoints] == expected_steps
        for path in checkpoints:
            load_weights(Transformer(cfg), path)
        final, model = load_file(checkpoints[-1]), load_file(model_dir / "model.safetensors")
        assert all(torch.equal(final[k], model[k]) for k in model)
        first = load_file(checkpoints[0])
        assert not torch.equal(first["lm_head.weight"], model["lm_head.weight"])


def test_loss_csv_has_an_estimate_every_eval_interval(finished_run, test_preset):
    train = test_preset["train"]
    lines = (finished_run / "models/seed1337/loss.csv").read_text().splitlines()
    assert tuple(lines[0].split(",")) == LOSS_COLUMNS
    steps = [int(line.split(",")[0]) for line in lines[1:]]
    assert steps == list(range(0, train["phases"][-1]["until"] + 1, train["eval_interval"]))


def test_every_sample_decodes_from_the_prompt(finished_run, config):
    vocab = set(CharTokenizer.load(finished_run / "data/tokenizer.json").vocab)
    prompt, n = config["sample"]["prompt"], config["sample"]["num_chars"]
    texts = []
    for seed in SEEDS:
        text = (finished_run / f"samples/seed{seed}.txt").read_text().removesuffix("\n")
        assert text.startswith(prompt) and len(text) == len(prompt) + n
        assert set(text) <= vocab
        texts.append(text)
    assert len(set(texts)) == len(SEEDS)


def test_figures_are_real_images(finished_run):
    import matplotlib.image as mpimg

    for name in ("loss_curves", "hellinger_histogram", "threshold_sweep", "case_studies"):
        image = mpimg.imread(finished_run / f"figures/{name}.png")
        assert image.shape[0] > 300 and image.shape[1] > 500, name
        assert image[..., :3].std() > 0.05, name  # not a blank canvas


def test_nothing_unfinished_is_left_and_a_rerun_plans_nothing(finished_run, repo, test_config):
    assert not list(finished_run.rglob("*.partial")) and not list(finished_run.rglob(".tmp-*"))
    proc = run_snakemake(repo, finished_run.parent.parent, "-n", config=test_config)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_every_output_has_the_mode_the_umask_gives(finished_run):
    umask = os.umask(0)
    os.umask(umask)
    expected = 0o666 & ~umask
    files = [p for p in finished_run.rglob("*") if p.is_file()]
    assert len(files) > 100
    wrong = sorted({(str(p.relative_to(finished_run)), oct(stat.S_IMODE(p.stat().st_mode))) for p in files
                    if stat.S_IMODE(p.stat().st_mode) != expected})
    assert not wrong, f"expected {oct(expected)}: {wrong[:10]}"


@pytest.mark.parametrize("deleted, rule", [
    ("search/heldout/shard_1-of-2.parquet", "search_shard"),
    ("activations/seed1442/prompts_corpus/block3.parquet", "dump_activations"),
    ("models/seed1442/checkpoints", "train_model"),
])
def test_a_deleted_intermediate_is_noticed_by_the_default_target(finished_run, repo, test_config, tmp_path,
                                                                 deleted, rule):
    """What a failed or interrupted job, or a user, can leave: one intermediate gone, everything after it present."""
    path = finished_run / deleted
    moved = tmp_path / "moved"
    shutil.move(path, moved)
    try:
        proc = run_snakemake(repo, finished_run.parent.parent, "-n", config=test_config)
        out = proc.stdout + proc.stderr
        assert re.search(rf"^{rule}\s+1$", out, flags=re.M), out[-2000:]
        assert f"results/test/{deleted}" in out
    finally:
        shutil.move(moved, path)


def test_every_job_stayed_within_the_memory_it_declares(finished_run, repo, test_config):
    """The declared mem_mb of every job against the peak its benchmark record measured."""
    proc = run_snakemake(repo, finished_run.parent.parent, "-n", "--forceall", config=test_config)
    declared = {}
    for job in re.split(r"\n(?=(?:local)?rule \w+:)", proc.stdout + proc.stderr):
        bench, mem = re.search(r"benchmark: (\S+)", job), re.search(r"\bmem_mb=(\d+)", job)
        if bench and mem:
            declared[bench.group(1)] = int(mem.group(1))
    records = sorted((finished_run / "benchmarks").glob("*.tsv"))
    assert len(records) >= 30 and len(declared) == len(records), (len(declared), len(records))
    for record in records:
        peak_mb = float(record.read_text().splitlines()[-1].split("\t")[2])  # max_rss
        assert peak_mb <= declared[f"results/test/benchmarks/{record.name}"], (record.name, peak_mb)


def test_killed_training_resumes_to_identical_weights(finished_run, repo, tmp_path, test_config, test_preset):
    target = "results/test/models/seed1337/model.safetensors"
    work = tmp_path / "results/test/models/seed1337.partial"
    steps = schedule(test_preset)
    kill_at = next(s for s in steps if s >= 100)  # the first checkpoint past a third of the run
    before = steps[steps.index(kill_at) - 1]
    proc = subprocess.Popen(snakemake_cmd(repo, tmp_path, target, config=test_config),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (work / f"checkpoints/step_{kill_at:06d}.safetensors").exists():
        assert proc.poll() is None and time.monotonic() < deadline, f"training never reached step {kill_at}"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of snakemake and the training job
    proc.wait()
    assert not (tmp_path / target).exists(), "training finished before it could be interrupted"
    assert (work / "resume.pt").exists()

    # what a writer killed mid-write leaves (the kill above may or may not have hit one)
    from tinylens import atomic

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"results/test/data/.tmp-train.npy.{atomic._host()}.{dead.pid}.abcdefgh"
    stale.write_bytes(b"half a checkpoint")
    run_snakemake(repo, tmp_path, "--unlock", config=test_config)
    run_snakemake(repo, tmp_path, target, config=test_config)
    assert not list((tmp_path / "results").rglob(".tmp-*"))
    log = (tmp_path / "results/test/logs/train_seed1337.log").read_text()
    # killed after the checkpoint's weights, before or after its resume state
    assert re.search(rf"resuming .* from step ({before}|{kill_at}) of 300", log)
    resumed, uninterrupted = load_file(tmp_path / target), load_file(finished_run / "models/seed1337/model.safetensors")
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in uninterrupted)
    assert (tmp_path / "results/test/models/seed1337/loss.csv").read_text().count("\n") == \
        (finished_run / "models/seed1337/loss.csv").read_text().count("\n")
    assert not work.exists()


def test_config_typo_stops_before_any_job(repo, tmp_path, test_config):
    proc = run_snakemake(repo, tmp_path, config=[*test_config, "corpus_ulr=/x"], check=False)
    assert proc.returncode != 0
    assert "unknown config key 'corpus_ulr' (did you mean 'corpus_url'?)" in proc.stderr
    proc = run_snakemake(repo, tmp_path, config=[*test_config, "device=3"], check=False)
    assert proc.returncode != 0 and "config key 'device'" in proc.stderr
    assert not (tmp_path / "results").exists()


def test_checksum_mismatch_stops_the_run_and_keeps_nothing(repo, tmp_path, test_config):
    proc = run_snakemake(repo, tmp_path, config=[*test_config, "corpus_sha256=" + "ab" * 32], check=False)
    assert proc.returncode != 0
    assert "checksum mismatch" in proc.stderr
    data = tmp_path / "results/test/data"
    assert not data.exists() or not any(data.iterdir())
    assert not (tmp_path / "results/test/models").exists()


def test_paper_preset_plans_four_training_jobs(repo, tmp_path):
    proc = run_snakemake(repo, tmp_path, "-n", config=["preset=paper"])
    out = proc.stdout + proc.stderr
    assert re.search(r"^train_model\s+4$", out, flags=re.M), out[-2000:]
    assert "results/paper/models/seed1337/model.safetensors" in out
    assert re.search(r"^sample\s+4$", out, flags=re.M)
    # every job declares its memory and time (data-sized ones are known once their inputs exist)
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(.*?)(?=^\S|\Z)", out, flags=re.M | re.S)
    assert len({rule for rule, _ in jobs}) >= 17
    for rule, body in jobs:
        if rule != "all":
            resources = re.search(r"resources: (.*)", body).group(1)
            assert re.search(r"\bmem_mb=(\d+|<TBD>)", resources) and re.search(r"\bruntime=(\d+|<TBD>)", resources), \
                (rule, resources)


# --- the core reproduction: strings, dumps, search, approximation, evaluation, figures ---


def test_strings_are_every_unique_substring_of_the_used_text(finished_run, corpus_path, test_preset, config):
    from tinylens.core.strings import load_strings

    n = config["substring_length"]
    text = corpus_path.read_text()[: test_preset["corpus_chars"]]
    table = load_strings(finished_run / "strings/strings.parquet", 65)
    assert table.strings == sorted({text[i : i + n] for i in range(len(text) - n + 1)})
    assert int(table.next_counts.sum()) == len(text) - n


def test_dumps_equal_a_direct_forward_of_the_model(finished_run):
    from tinylens.core.activations import load_block, load_logits
    from tinylens.core.strings import load_prompts, load_strings
    from tinylens.weights import load_model

    model = load_model(finished_run / "models/seed1337")
    tokenizer = CharTokenizer.load(finished_run / "models/seed1337/tokenizer.json")
    strings = load_strings(finished_run / "strings/strings.parquet", 65).strings
    prompts = load_prompts(finished_run / "strings/prompts_heldout.parquet")["string"]
    rng = np.random.default_rng(0)
    for name, texts in (("strings", strings), ("prompts_heldout", prompts)):
        rows = rng.choice(len(texts), 5, replace=False)
        ids = torch.tensor(np.stack([tokenizer.encode(texts[i]) for i in rows]).astype(np.int64))
        with torch.no_grad():
            logits, acts = record_activations(model, ids, positions="last")
        directory = finished_run / f"activations/seed1337/{name}"
        for b in range(model.config.n_layer):
            dumped = load_block(directory, b, "ffwd_out", model.config.d_model)[rows]
            np.testing.assert_allclose(dumped, acts["ffwd_out"][b].numpy(), atol=1e-5)
        np.testing.assert_allclose(load_logits(directory, 65)[rows], logits.numpy(), atol=1e-4)


def test_search_was_verified_by_prompt_id(finished_run, test_preset):
    from tinylens.core.strings import load_prompts

    report = json.loads((finished_run / "metrics/search_verification.json").read_text())
    n = test_preset["analysis"]["verify_prompts"]
    samples = []
    for mode in ("corpus", "heldout"):
        ids = load_prompts(finished_run / f"strings/prompts_{mode}.parquet")["prompt_id"]
        assert report[mode]["equal"] and report[mode]["mismatched_prompt_ids"] == {}
        assert report[mode]["prompts"] == len(ids) == 120 and report[mode]["prompts_checked"] == n < 120
        checked = report[mode]["checked_ids"]
        assert len(set(checked)) == n and set(checked) <= set(ids) and checked != sorted(ids)[:n]
        samples.append(checked)
        assert report[mode]["blocks"] == 6 and report[mode]["strings"] > 50_000
    assert samples[0] != samples[1]  # each mode its own random draw


def test_approximation_recomputed_from_raw_activations(finished_run):
    """Independent of the search: cosines of raw dumps, strings above the tuned thresholds, summed counts."""
    from tinylens.core.activations import load_block, load_logits
    from tinylens.core.approx import hellinger, softmax
    from tinylens.core.strings import load_prompts, load_strings

    tuned = json.loads((finished_run / "approx/heldout/tuned.json").read_text())
    table = load_strings(finished_run / "strings/strings.parquet", 65)
    prompts = load_prompts(finished_run / "strings/prompts_heldout.parquet")
    evaluation = pq_read(finished_run / "evaluation/heldout/hellinger.parquet")
    q = softmax(load_logits(finished_run / "activations/seed1337/prompts_heldout", 65))
    rows = [i for i, s in enumerate(prompts["split"]) if s == "eval"][:5]
    combined = np.zeros((len(rows), 65))
    for b, (t, w) in enumerate(zip(tuned["thresholds"], tuned["weights"])):
        s = load_block(finished_run / "activations/seed1337/strings", b, "ffwd_out", 32).astype(np.float64)
        p = load_block(finished_run / "activations/seed1337/prompts_heldout", b, "ffwd_out", 32)[rows].astype(np.float64)
        cos = (p @ s.T) / np.outer(np.linalg.norm(p, axis=1), np.linalg.norm(s, axis=1))
        above = (cos > t) & table.in_train[None, :]
        combined += w * (above.astype(np.float64) @ table.next_counts_train.astype(np.float64))
    approx = combined / combined.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(hellinger(approx, q[rows]), np.asarray(evaluation["hellinger_approx"])[rows], atol=1e-9)


def pq_read(path):
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pydict()


def test_hellinger_metrics_have_both_modes_and_the_noise_floor(finished_run):
    summary = json.loads((finished_run / "metrics/hellinger.json").read_text())
    for mode in ("corpus", "heldout"):
        approx = summary["modes"][mode]["approximation"]
        assert set(approx) == {"mean", "std", "min", "max", "q25", "median", "q75", "n"}
        assert 0 <= approx["min"] <= approx["q25"] <= approx["median"] <= approx["q75"] <= approx["max"] <= 1
        assert approx["n"] == 60
        verbatim = summary["modes"][mode]["verbatim_in_train"]
        groups = [verbatim["approximation_in_train"]["n"], verbatim["approximation_not_in_train"]["n"]]
        assert sum(groups) == 60 and verbatim["share"] == pytest.approx(groups[0] / 60, abs=1e-6)
        assert set(summary["modes"][mode]["alternates"]) == {str(s) for s in SEEDS[1:]}
        # tuned on the tuning prompts, it must beat the paper's hand-tuned values there
        tuned = json.loads((finished_run / f"approx/{mode}/tuned.json").read_text())
        assert tuned["mean_hellinger"]["tune"] <= tuned["paper_values"]["mean_hellinger"]["tune"]
        assert summary["headline"][f"{mode}_approximation_mean"] == approx["mean"]


REPORT_FIGURES = {"loss_curves": "Training", "hellinger_histogram": "Approximation",
                  "threshold_sweep": "Approximation", "case_studies": "Approximation"}


def test_report_embeds_every_figure_with_its_caption_and_category(finished_run, repo, test_config, tmp_path):
    import base64

    workdir = finished_run.parent.parent
    report = tmp_path / "report.html"
    # exactly the README's command (no --cores)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(workdir),
                           "--report", str(report), "--config", *test_config], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = report.read_text(errors="ignore")
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html, re.S).group(1))
    categories = json.loads(re.search(r"var categories = (\{.*?\});\n", html, re.S).group(1))
    figures = sorted((finished_run / "figures").glob("*.png"))
    shown = sorted(k for k in results if k.endswith(".png"))
    assert shown == [f"results/test/figures/{p.name}" for p in figures]  # every figure of the run
    for path in figures:
        entry = results[f"results/test/figures/{path.name}"]
        # the figure itself, byte for byte, with a caption
        assert entry["data_uri"].split("base64,", 1)[1] == base64.b64encode(path.read_bytes()).decode()
        assert len(entry["caption"].split()) > 10, path.name
    for name, category in REPORT_FIGURES.items():
        key = f"results/test/figures/{name}.png"
        # the caption is report/core/<figure>.rst's, the figure in its category, made by its plot rule
        caption = (repo / f"report/core/{name}.rst").read_text(encoding="utf-8").split()
        assert " ".join(caption[:6]) in " ".join(results[key]["caption"].split()), name
        assert results[key]["job_properties"]["rule"] == f"plot_{name}"
        assert key in [f for group in categories[category].values() for f in group]


def test_a_missing_search_shard_is_the_only_search_job_rerun(finished_run, repo, test_config):
    """What a run killed during the search leaves: one shard finished, one not, nothing downstream."""
    workdir = finished_run.parent.parent
    gone = [finished_run / "search/corpus/shard_2-of-2.parquet", finished_run / "approx/corpus/tuned.json"]
    saved = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in gone}
    for path in gone:
        path.unlink()
    try:
        proc = run_snakemake(repo, workdir, "-n", "results/test/approx/corpus/tuned.json", config=test_config)
        out = proc.stdout + proc.stderr
        assert re.search(r"^search_shard\s+1$", out, flags=re.M), out[-1500:]
        assert "output: results/test/search/corpus/shard_2-of-2.parquet" in out
        assert not re.search(r"^(train_model|dump_activations)\s", out, flags=re.M)
    finally:
        for path, (data, mtime) in saved.items():  # as they were, times included: the run stays up to date
            path.write_bytes(data)
            os.utime(path, ns=(mtime, mtime))


def test_every_benchmark_record_belongs_to_a_named_target(finished_run, repo, test_config):
    """benchmarks/workflow_times.py (the README's per-target times) maps every job to its target."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("workflow_times", repo / "benchmarks/workflow_times.py")
    workflow_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(workflow_times)
    targets, jobs, span = workflow_times.summarize(finished_run)
    assert {target for target, _, _ in jobs} == {"core", "supporting", "circuits", "superposition", "dynamics",
                                                 "attention", "comparison", "findings", "phase_change"}
    assert len(jobs) == len(list((finished_run / "benchmarks").glob("*.tsv"))) and span > 0
    assert sum(t["jobs"] for t in targets.values()) == len(jobs)
    search_jobs = [name for target, name, _ in jobs if name.startswith("search_")]
    assert search_jobs and all(target == "core" for target, name, _ in jobs if name in search_jobs)
    # --log: each job's declared memory, read from Snakemake's output of the run
    log = run_snakemake(repo, finished_run.parent.parent, "-n", "--forceall", config=test_config)
    declared = workflow_times.declared_memory(log.stdout + log.stderr)
    assert set(declared) == {name for _, name, _ in jobs} and min(declared.values()) > 0
    written = workflow_times.output_megabytes(log.stdout + log.stderr, finished_run.parent.parent)
    assert set(written) == set(declared)
    model = finished_run / "models/seed1337/model.safetensors"
    assert written["train_seed1337"] >= model.stat().st_size / 1e6 > 0


def test_the_variant_models_are_the_original_with_one_option_changed(finished_run, test_preset):
    """models/tied and models/rmsnorm (method.md §14): the original seed's training (the test preset's variants'
    phases), one option each in config.json, a tied unembedding loaded as the embedding itself; and the findings
    of the run state no verdict its quoted p contradicts."""
    from tinylens.weights import load_model
    from tinylens.wording import disagreements

    for name, option in (("tied", {"tie_embeddings": True}), ("rmsnorm", {"norm": "rmsnorm"})):
        folder = finished_run / "models" / name
        config = json.loads((folder / "config.json").read_text())
        original = json.loads((finished_run / "models/seed1337/config.json").read_text())
        assert config == {**original, **option}
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["seed"] == 1337 and metrics["steps"] == test_preset["variants"]["phases"][-1]["until"]
        model = load_model(folder)
        assert (model.lm_head.weight is model.tok_emb.weight) == (name == "tied")
    assert disagreements((finished_run / "findings.md").read_text(encoding="utf-8")) == []
