"""docs/bad-inputs.md shows the messages the code gives today (checked exactly, line by line)."""

import copy
from pathlib import Path

import numpy as np
import pytest

from tinylens.config import ConfigError, resolve_preset, validate_config
from tinylens.logs import log_to


def _bad(config, **changes):
    bad = copy.deepcopy(config)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = bad
        for key in parents:
            node = node.setdefault(key, {})  # in a preset: written over what it inherits
        node[last] = value
    return bad


CASES = {
    "typo": {"corpus_ulr": "/data/input.txt"},
    "type": {"substring_length": "ten"},
    "grid": {"threshold_grid": {"start": 0.70, "step": 0.01, "count": 40}},
    "off grid": {"threshold_grid": {"start": 0.70, "step": 0.02, "count": 15}},
    "verify": {"presets__test__analysis__verify_prompts": 0},
}


@pytest.mark.parametrize("case", CASES)
def test_the_catalogue_shows_todays_config_messages(repo, config, case):
    doc = (repo / "docs/bad-inputs.md").read_text(encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        validate_config(_bad(config, **CASES[case]), repo / "config/schema.yaml")
    lines = [line for line in str(err.value).splitlines() if line.startswith("  - ")]
    assert lines and all(line in doc for line in lines), lines


# --- the library's messages, as the console shows them (tinylens.logs.log_to), in a project directory ---


def _resume_changed_lr(config):
    import json

    import torch

    from tinylens.config import model_config, train_config
    from tinylens.train import check_resume_fingerprint, run_fingerprint

    train = resolve_preset(config, "test")["train"]
    faster = {**train, "phases": [{**train["phases"][0], "lr": 1e-3}, *train["phases"][1:]]}
    model = model_config(resolve_preset(config, "test")["model"], 65)
    ids = np.arange(100, dtype=np.uint8)
    before, after = (run_fingerprint(model, train_config(t, 1337), ids, ids, torch.device("cpu")) for t in (train, faster))
    check_resume_fingerprint({"fingerprint": json.dumps(before, sort_keys=True)}, after,
                             Path("results/test/models/seed1337.partial/resume.pt"))


def _resume_other_threads(config):
    import json

    import torch

    from tinylens.config import model_config, train_config
    from tinylens.train import check_resume_fingerprint, run_fingerprint

    model = model_config(resolve_preset(config, "test")["model"], 65)
    cfg, ids, before = train_config(resolve_preset(config, "test")["train"], 1337), np.arange(100, dtype=np.uint8), {}
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            before[n] = run_fingerprint(model, cfg, ids, ids, torch.device("cpu"))
    finally:
        torch.set_num_threads(threads)
    check_resume_fingerprint({"fingerprint": json.dumps(before[1], sort_keys=True)}, before[2],
                             Path("results/test/models/seed1337.partial/resume.pt"))


def _dump_of_other_prompts(config):
    from tinylens.core.activations import STRINGS_KEY, load_logits, strings_digest
    from tinylens.core.schemas import logits_schema
    from tinylens.tables import table_writer

    directory = Path("results/test/activations/seed1337/prompts_corpus")
    heldout, corpus = ([f"{mode}{i:04d}"[-10:].rjust(10) for i in range(120)] for mode in ("heldout", "corpus"))
    with table_writer(directory / "logits.parquet", logits_schema(65), metadata={STRINGS_KEY: strings_digest(heldout)}) as write:
        write({"logits": np.zeros((120, 65), np.float32)})
    load_logits(directory, 65, strings=corpus)


def _truncated_shard(config):
    from tinylens.core.search import load_summary, write_summary

    shard = Path("results/test/search/corpus/shard_1-of-2.parquet")
    write_summary(shard, np.arange(60, dtype=np.int32), np.zeros((60, 6, 30), np.uint32),
                  np.zeros((60, 6, 30, 65), np.uint32))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    load_summary([shard], 6, 30, 65)


def _shard_of_another_run(config):
    from tinylens.core.approx import summary_for_prompts
    from tinylens.core.search import write_summary

    shard = Path("results/test/search/corpus/shard_1-of-2.parquet")
    write_summary(shard, np.arange(60, dtype=np.int32), np.zeros((60, 6, 30), np.uint32),
                  np.zeros((60, 6, 30, 65), np.uint32))
    summary_for_prompts([shard], np.arange(120), 6, 30, 65)


def _foreign_weights(config):
    from tinylens.config import model_config
    from tinylens.model import Transformer
    from tinylens.weights import load_model, save_config, save_model

    directory = Path("results/test/models/seed1337")
    save_model(directory, Transformer(model_config(resolve_preset(config, "small")["model"], 65)))
    save_config(directory / "config.json", model_config(resolve_preset(config, "test")["model"], 65))
    load_model(directory)


def _random_bytes_as_weights(config):
    from tinylens.config import model_config
    from tinylens.weights import load_model, save_config

    directory = Path("results/test/models/seed1337")
    directory.mkdir(parents=True)
    save_config(directory / "config.json", model_config(resolve_preset(config, "test")["model"], 65))
    (directory / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(1000))
    load_model(directory)


def _checksum_mismatch(config, corpus):
    from tinylens.core.corpus import fetch_corpus

    fetch_corpus(str(corpus), "results/test/data/corpus.txt", "ab" * 32)


def _offline(config, monkeypatch):
    import socket
    import urllib.error
    import urllib.request

    from tinylens.core.corpus import fetch_corpus

    def no_network(*args, **kwargs):
        raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    fetch_corpus(config["corpus_url"], "results/test/data/corpus.txt", config["corpus_sha256"])


def _no_local_copy(config):
    from tinylens.core.corpus import fetch_corpus

    fetch_corpus("/data/nowhere/input.txt", "results/test/data/corpus.txt", config["corpus_sha256"])


LIBRARY_CASES = {
    "changed schedule on resume": (_resume_changed_lr, "train_seed1337"),
    "another thread count on resume": (_resume_other_threads, None),
    "a prompt dump of another mode": (_dump_of_other_prompts, "tune_approximation_corpus"),
    "truncated Parquet": (_truncated_shard, "tune_approximation_corpus"),
    "shard of another run": (_shard_of_another_run, None),
    "foreign weights file": (_foreign_weights, "sample_seed1337"),
    "not a safetensors file": (_random_bytes_as_weights, None),
    "checksum mismatch": (_checksum_mismatch, "download_corpus"),
    "offline download": (_offline, "download_corpus"),
    "no local copy": (_no_local_copy, None),
}


@pytest.mark.parametrize("case", LIBRARY_CASES)
def test_the_catalogue_shows_todays_library_messages(repo, config, case, tmp_path, monkeypatch, capsys, request):
    """Each message exactly as the console shows it, and the `(full log: ...)` line where the catalogue shows one."""
    doc = (repo / "docs/bad-inputs.md").read_text(encoding="utf-8")
    make, log = LIBRARY_CASES[case]
    monkeypatch.chdir(tmp_path)
    args = {"checksum mismatch": lambda: [request.getfixturevalue("corpus_path")],
            "offline download": lambda: [monkeypatch]}.get(case, lambda: [])()
    with pytest.raises((ValueError, RuntimeError)):  # CorpusError is a RuntimeError
        with log_to(f"results/test/logs/{log or 'job'}.log"):
            make(config, *args)
    console = capsys.readouterr().err
    if case == "checksum mismatch":  # the catalogue shows the corpus copy where it was tried
        console = console.replace(str(args[0]), "/work/shared/data/tinyshakespeare/input.txt")
    lines = console.splitlines()
    assert lines[0].startswith("tinylens: ") and lines[-1].startswith("(full log: ")
    if log is None:  # the catalogue leaves this line out
        lines = lines[:-1]
    missing = [line for line in lines if line not in doc.splitlines()]
    assert not missing, missing


@pytest.mark.parametrize("check", ["no dvc.lock", "result-changing --config"])
def test_the_catalogue_shows_todays_restore_messages(repo, check, tmp_path):
    from tinylens.restore import RestoreError, check_config, check_lock

    doc = (repo / "docs/bad-inputs.md").read_text(encoding="utf-8").splitlines()
    with pytest.raises(RestoreError) as err:
        check_lock("test", tmp_path) if check == "no dvc.lock" else check_config(["seeds={original: 1}"])
    assert f"tinylens restore: {err.value}" in doc
