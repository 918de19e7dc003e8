import copy

import pytest

from tinylens.config import ConfigError, active_preset, all_seeds, train_config, validate_config


@pytest.fixture
def schema(repo):
    return repo / "config/schema.yaml"


def test_shipped_config_is_valid(config, schema):
    validate_config(config, schema)
    assert config["preset"] == "small"
    assert all_seeds(config) == [1337, 1442, 88, 99999]


def test_every_shipped_preset_is_valid(config, schema):
    for name in config["presets"]:
        validate_config({**config, "preset": name}, schema)


def test_unknown_key_is_named_with_a_suggestion(config, schema):
    bad = copy.deepcopy(config)
    bad["presets"]["small"]["train"]["batchsize"] = 8
    with pytest.raises(ConfigError, match=r"unknown config key 'presets\.small\.train\.batchsize' \(did you mean 'batch_size'\?\)"):
        validate_config(bad, schema)


def test_top_level_typo_is_named(config, schema):
    with pytest.raises(ConfigError, match="unknown config key 'corpus_ulr'"):
        validate_config({**config, "corpus_ulr": "x"}, schema)


def test_wrong_type_names_key_and_expected_type(config, schema):
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["model"]["n_embed"] = "big"
    with pytest.raises(ConfigError, match=r"'presets\.test\.model\.n_embed' must be of type integer, got 'big' \(str\)"):
        validate_config(bad, schema)


def test_bad_checksum_and_device_are_rejected(config, schema):
    with pytest.raises(ConfigError, match="corpus_sha256"):
        validate_config({**config, "corpus_sha256": "abc"}, schema)
    with pytest.raises(ConfigError, match="device"):
        validate_config({**config, "device": "tpu"}, schema)


def test_unknown_preset_lists_the_choices(config, schema):
    with pytest.raises(ConfigError, match="'preset' is 'huge'.*test, small, paper"):
        validate_config({**config, "preset": "huge"}, schema)


def test_cross_field_constraints(config, schema):
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["model"]["n_head"] = 3
    with pytest.raises(ConfigError, match="n_embed' \\(32\\) must be divisible"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["train"]["checkpoint_steps"] = [10_000]
    with pytest.raises(ConfigError, match="checkpoint_steps"):
        validate_config(bad, schema)


def test_paper_schedule_is_method_section_2(config):
    paper = active_preset({**config, "preset": "paper"})
    cfg = train_config(paper["train"], seed=1337)
    assert cfg.batch_size == 64 and paper["model"]["block_size"] == 256
    assert [(p.until, p.lr) for p in cfg.phases] == [(3500, 3e-4), (4500, 3e-5)]
    assert cfg.eval_interval == 500 and cfg.eval_iters == 200


def test_paper_short_is_the_paper_data_path_with_short_training(config):
    """paper_short differs from paper only in the training budget and the CPU layout of the jobs."""
    paper, short = config["presets"]["paper"], config["presets"]["paper_short"]
    assert short["model"] == paper["model"] and short["corpus_chars"] == paper["corpus_chars"]
    layout = {"dump_batch_size", "dump_threads", "search_shards", "search_threads"}
    assert {k: v for k, v in short["analysis"].items() if k not in layout} == \
        {k: v for k, v in paper["analysis"].items() if k not in layout}
    assert short["train"]["phases"][-1]["until"] <= 500 and short["train"]["resources"]["gpu"] == 0
    for name, preset in config["presets"].items():  # a 16 GB machine trains every CPU preset
        if not preset["train"]["resources"]["gpu"]:
            assert preset["train"]["resources"]["mem_mb"] <= 8192, name
