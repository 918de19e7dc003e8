import copy
import json
import re

import pytest
import yaml

from tinylens.config import (
    ConfigError,
    active_preset,
    all_seeds,
    resolve_preset,
    seed_train_settings,
    train_config,
    validate_config,
)


@pytest.fixture
def schema(repo):
    return repo / "config/schema.yaml"


def test_shipped_config_is_valid(config, schema):
    validate_config(config, schema)
    assert config["preset"] == "small"
    assert all_seeds(config) == [1337, 1442, 88]  # presets.small.alternate_seeds: 2


def test_a_preset_may_train_only_the_first_alternates(config, schema):
    assert all_seeds({**config, "preset": "test"}) == [1337, 1442]  # presets.test.alternate_seeds: 1
    assert all_seeds({**config, "preset": "paper"}) == [1337, 1442, 88, 99999]  # null: all of them
    assert all_seeds(_with(config, "presets.small.alternate_seeds", 0)) == [1337]
    assert all_seeds(_with(config, "presets.small.alternate_seeds", None)) == [1337, 1442, 88, 99999]
    with pytest.raises(ConfigError, match=r"'presets\.small\.alternate_seeds'"):
        validate_config(_with(config, "presets.small.alternate_seeds", -1), schema)


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
    bad["presets"]["test"]["model"]["d_model"] = "big"
    with pytest.raises(ConfigError, match=r"'presets\.test\.model\.d_model' must be of type integer, got 'big' \(str\)"):
        validate_config(bad, schema)


def test_bad_checksum_and_device_are_rejected(config, schema):
    with pytest.raises(ConfigError, match="corpus_sha256"):
        validate_config({**config, "corpus_sha256": "abc"}, schema)
    with pytest.raises(ConfigError, match="device"):
        validate_config({**config, "device": "tpu"}, schema)


def test_unknown_preset_lists_the_choices(config, schema):
    with pytest.raises(ConfigError, match="'preset' is 'huge'.*small, test, paper, paper_short"):
        validate_config({**config, "preset": "huge"}, schema)


def test_cross_field_constraints(config, schema):
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["model"]["n_head"] = 3
    with pytest.raises(ConfigError, match="d_model' \\(32\\) must be divisible"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["train"]["checkpoints"]["first"] = 10_000
    with pytest.raises(ConfigError, match=r"checkpoints\.first' \(10000\) must be below the last step \(300\)"):
        validate_config(bad, schema)


def test_paper_schedule_is_method_section_2(config):
    paper = active_preset({**config, "preset": "paper"})
    cfg = train_config(paper["train"], seed=1337)
    assert cfg.batch_size == 64 and paper["model"]["block_size"] == 256
    assert [(p.until, p.lr) for p in cfg.phases] == [(3500, 3e-4), (4500, 3e-5)]
    assert cfg.eval_interval == 500 and cfg.eval_iters == 200


def test_paper_preset_trains_as_the_original_code(config):
    """method.md §12: float32, the original batch draw, alternate 1442 taken at 5,000 steps, the rest at 4,500."""
    paper = active_preset({**config, "preset": "paper"})["train"]
    steps = {seed: train_config(paper, seed).max_steps for seed in all_seeds({**config, "preset": "paper"})}
    assert steps == {1337: 4500, 1442: 5000, 88: 4500, 99999: 4500}
    cfg = train_config(paper, 1442)
    assert [(p.until, p.lr) for p in cfg.phases] == [(3500, 3e-4), (5000, 3e-5)]
    # the other seeds' checkpoints (the same steps for every seed), then its own last step
    assert cfg.save_steps == (*train_config(paper, 1337).save_steps, 5000)
    assert cfg.precision == "float32" and cfg.batch_sampling == "original"
    # the laptop presets keep our own settings
    for name in ("test", "small"):
        cfg = train_config(resolve_preset(config, name)["train"], 1337)
        assert (cfg.precision, cfg.batch_sampling) == ("mixed", "separate")
    # only the named seed's settings differ, so changing one seed's step retrains only that model
    assert seed_train_settings(paper, 88) == seed_train_settings(paper, 1337)
    assert seed_train_settings(paper, 1442) != seed_train_settings(paper, 1337)


@pytest.mark.parametrize("value, message", [
    ({"1443": 5000}, r"'presets\.test\.train\.final_step_by_seed' names seeds \['1443'\], which are not the original "
                     r"or an alternate seed \(1337, 1442\)"),
    ({"1442": 250}, r"'presets\.test\.train\.final_step_by_seed\.1442' \(250\) must lie after the end of the phase "
                    r"before the last \(250\)"),
    ({"1442": 4}, r"'presets\.test\.train\.checkpoints\.first' \(5\) must be below seed 1442's last step \(4, "),
    ({"x": 5}, r"'presets\.test\.train\.final_step_by_seed'"),
])
def test_final_step_by_seed_is_checked(config, schema, value, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(_with(config, "presets.test.train.final_step_by_seed", value), schema)


def test_precision_and_batch_sampling_are_named_choices(config, schema):
    with pytest.raises(ConfigError, match=r"'presets\.paper\.train\.precision': 'bf16' is not one of"):
        validate_config(_with(config, "presets.paper.train.precision", "bf16"), schema)
    with pytest.raises(ConfigError, match=r"'presets\.paper\.train\.batch_sampling'"):
        validate_config(_with(config, "presets.paper.train.batch_sampling", "global"), schema)


def _with(config, path, value):
    """``config`` with the key at dotted ``path`` set (in a preset: written into it, over what it inherits)."""
    bad = copy.deepcopy(config)
    *parents, last = path.split(".")
    node = bad
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return bad


@pytest.mark.parametrize("grid, message", [
    ({"start": 0.70, "step": 0.05, "count": 8}, r"'threshold_grid' .* gives edges 0\.7\.\.1\.05; every edge .* "
                                                r"must lie in \(0, 1\]: with this start and step use count <= 7"),
    ({"start": 0.0, "step": 0.01, "count": 30}, r"'threshold_grid' .* gives edges 0\.\.0\.29;"),
    ({"start": 1.0, "step": 0.01, "count": 2}, r"edges 1\.\.1\.01; .* use count <= 1"),
])
def test_threshold_grid_edges_must_lie_in_zero_one(config, schema, grid, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(_with(config, "threshold_grid", grid), schema)


def test_a_grid_ending_exactly_at_one_is_valid(config, schema):
    validate_config(_with(config, "threshold_grid", {"start": 0.70, "step": 0.01, "count": 31}), schema)


def test_paper_thresholds_must_lie_on_the_grid(config, schema):
    # a grid from 0.70 by 0.02 misses 0.95, 0.85, 0.81 and 0.89 of the paper's thresholds
    bad = _with(config, "threshold_grid", {"start": 0.70, "step": 0.02, "count": 15})
    with pytest.raises(ConfigError, match=r"'paper_baseline\.thresholds' has \[0\.95, 0\.85, 0\.81, 0\.89\], which are not "
                                          r"edges of 'threshold_grid' \(0\.7, 0\.72, \.\.\., 0\.98\)"):
        validate_config(bad, schema)
    with pytest.raises(ConfigError, match=r"'paper_baseline\.thresholds' has \[0\.955\]"):
        validate_config(_with(config, "paper_baseline.thresholds", [0.955, 0.94, 0.85, 0.76, 0.81, 0.89]), schema)


def test_paper_weights_are_non_negative_one_per_threshold_and_not_all_zero(config, schema):
    with pytest.raises(ConfigError, match=r"'paper_baseline\.weights\.2'.*minimum of 0"):
        validate_config(_with(config, "paper_baseline.weights", [0.01, 0.01, -0.1, 1.5, 6, 0.01]), schema)
    with pytest.raises(ConfigError, match=r"'paper_baseline\.thresholds' \(6 values\) and 'paper_baseline\.weights' "
                                          r"\(5 values\)"):
        validate_config(_with(config, "paper_baseline.weights", [0.01, 0.01, 0.1, 1.5, 6]), schema)
    with pytest.raises(ConfigError, match=r"'paper_baseline\.weights' \[0, 0, 0, 0, 0, 0\] must have a positive"):
        validate_config(_with(config, "paper_baseline.weights", [0, 0, 0, 0, 0, 0]), schema)


def test_verify_prompts_must_check_at_least_one_and_at_most_all(config, schema):
    with pytest.raises(ConfigError, match=r"'presets\.test\.analysis\.verify_prompts': 0 is less than the minimum of 1"):
        validate_config(_with(config, "presets.test.analysis.verify_prompts", 0), schema)
    with pytest.raises(ConfigError, match=r"'presets\.test\.analysis\.verify_prompts' \(500\) exceeds "
                                          r"'presets\.test\.analysis\.n_prompts' \(120\)"):
        validate_config(_with(config, "presets.test.analysis.verify_prompts", 500), schema)


def test_paper_prompt_count_is_checked_like_the_other_modes(config, schema):
    with pytest.raises(ConfigError, match=r"'presets\.test\.analysis\.search_shards' \(2\) is more than "
                                          r"'presets\.test\.analysis\.paper_prompts' \(1\)"):
        validate_config(_with(config, "presets.test.analysis.paper_prompts", 1), schema)
    with pytest.raises(ConfigError, match=r"'presets\.test\.analysis\.verify_prompts' \(40\) exceeds "
                                          r"'presets\.test\.analysis\.paper_prompts' \(30\)"):
        validate_config(_with(config, "presets.test.analysis.paper_prompts", 30), schema)
    with pytest.raises(ConfigError, match=r"'presets\.test\.analysis\.paper_prompts': 0 is less than the minimum"):
        validate_config(_with(config, "presets.test.analysis.paper_prompts", 0), schema)


def test_shards_and_splits_are_checked_against_the_prompt_count(config, schema):
    with pytest.raises(ConfigError, match=r"'presets\.test\.analysis\.search_shards' \(200\) is more than "
                                          r"'presets\.test\.analysis\.n_prompts' \(120\)"):
        validate_config(_with(config, "presets.test.analysis.search_shards", 200), schema)
    validate_config(_with(config, "presets.test.analysis.search_shards", 7), schema)  # 120 / 7: uneven is fine
    with pytest.raises(ConfigError, match=r"'presets\.test\.analysis\.tune_fraction' \(0\.001\) of n_prompts \(120\) "
                                          r"leaves 0 tuning and 120 evaluation prompts"):
        validate_config(_with(config, "presets.test.analysis.tune_fraction", 0.001), schema)


def test_case_study_prompts_must_have_the_substring_length(config, schema):
    with pytest.raises(ConfigError, match=r"'case_study_prompts' has \['And only'\], which are not "
                                          r"'substring_length' = 10 characters long"):
        validate_config(_with(config, "case_study_prompts", ["And only l", "And only"]), schema)


def test_the_suffix_baseline_reads_at_most_the_prompts_length(config, schema):
    with pytest.raises(ConfigError, match=r"'controls.suffix_lengths' \(11\) is longer than 'substring_length' = 10"):
        validate_config(_with(config, "controls.suffix_lengths", 11), schema)
    validate_config(_with(config, "controls.suffix_lengths", 10), schema)


def test_every_problem_is_listed_at_once(config, schema):
    bad = _with(_with(config, "threshold_grid", {"start": 0.9, "step": 0.1, "count": 5}),
                "presets.small.analysis.search_shards", 5000)
    with pytest.raises(ConfigError) as err:
        validate_config(bad, schema)
    assert "'threshold_grid'" in str(err.value) and "'presets.small.analysis.search_shards'" in str(err.value)


def test_paper_short_is_the_paper_data_path_with_short_training(config):
    """paper_short differs from paper only in the training budget, the CPU layout of the jobs and the
    strings' activation kinds (only the one the search reads)."""
    paper, short = resolve_preset(config, "paper"), resolve_preset(config, "paper_short")
    assert short["model"] == paper["model"] and short["corpus_chars"] == paper["corpus_chars"]
    layout = {"dump_batch_size", "dump_threads", "search_shards", "search_threads", "string_kinds"}
    assert {k: v for k, v in short["analysis"].items() if k not in layout} == \
        {k: v for k, v in paper["analysis"].items() if k not in layout}
    assert short["train"]["phases"][-1]["until"] <= 500 and short["train"]["resources"]["gpu"] == 0
    for name in config["presets"]:  # a 16 GB machine trains every CPU preset
        preset = resolve_preset(config, name)
        if not preset["train"]["resources"]["gpu"]:
            assert preset["train"]["resources"]["mem_mb"] <= 8192, name
    assert short["analysis"]["string_kinds"] == ["ffwd_out"]


# --- presets that extend others (tinylens.config.resolve_preset) ---


def test_every_preset_resolves_to_the_values_it_had_when_each_was_written_in_full(repo, config):
    """tests/data/presets_resolved.json: every preset as config/config.yaml wrote it out in full before presets
    could extend one another. Resolved, each is exactly that, value for value and type for type (1 is not 1.0)."""
    written = json.loads((repo / "tests/data/presets_resolved.json").read_text(encoding="utf-8"))
    assert sorted(config["presets"]) == sorted(written)
    for name, expected in written.items():
        # the one key renamed since: model.n_embed is model.d_model, in the same place
        expected["model"] = {("d_model" if k == "n_embed" else k): v for k, v in expected["model"].items()}
        resolved = resolve_preset(config, name)
        assert json.dumps(resolved, sort_keys=True) == json.dumps(expected, sort_keys=True), name
        # ... and in each section every mapping keeps its order: rules hand sections to scripts as params, and
        # Snakemake reruns a job whose params read differently (a preset's sections are only read by name)
        for section in expected:
            assert json.dumps(resolved[section]) == json.dumps(expected[section]), f"{name}.{section}"


def _presets(**presets):
    return {"preset": next(iter(presets)), "presets": presets}


def test_a_child_is_merged_over_its_parent_mapping_by_mapping():
    config = _presets(
        base={"model": {"n_layer": 6, "n_head": 4}, "phases": [1, 2], "corpus_chars": None, "seed": 0,
              "runs": {"a": {"seed": 0}, "b": {"seed": 1}}},
        child={"extends": "base", "model": {"n_head": 2}, "phases": [3], "corpus_chars": 1000,
               "runs": {"c": {"seed": 2}}, "new": {"x": 1}},
    )
    assert resolve_preset(config, "child") == {
        "model": {"n_layer": 6, "n_head": 2},  # mappings merge key by key
        "phases": [3],  # a list replaces the parent's, it is not appended to
        "corpus_chars": 1000, "seed": 0,
        "runs": {"a": {"seed": 0}, "b": {"seed": 1}, "c": {"seed": 2}},
        "new": {"x": 1},
    }
    assert list(resolve_preset(config, "child")) == ["model", "phases", "corpus_chars", "seed", "runs", "new"]
    config["presets"]["child"] = {"first": 0, "extends": "base", "seed": 1, "model": {"n_layer": 2, "d": 1}}
    assert list(resolve_preset(config, "child")) == ["model", "phases", "corpus_chars", "first", "seed", "runs"]
    assert list(resolve_preset(config, "child")["model"]) == ["n_layer", "n_head", "d"]  # where it is written
    config["presets"]["child"] = {"extends": "base", "phases": [3], "corpus_chars": 1000, "new": {"x": 1}}
    assert resolve_preset(config, "base") == config["presets"]["base"]
    resolve_preset(config, "child")["model"]["n_layer"] = 99  # a copy: the written presets stay as written
    assert config["presets"]["base"]["model"]["n_layer"] == 6
    config["presets"]["child"]["corpus_chars"] = None  # null replaces too (corpus_chars: null = all of it)
    assert resolve_preset(config, "child")["corpus_chars"] is None


def test_replace_states_a_mapping_in_full_instead_of_merging_it():
    config = _presets(base={"runs": {"a": {"seed": 0}, "b": {"seed": 1}}, "model": {"n_head": 4}},
                      child={"extends": "base", "replace": ["runs"], "runs": {"c": {"seed": 2}}})
    assert resolve_preset(config, "child") == {"runs": {"c": {"seed": 2}}, "model": {"n_head": 4}}
    config["presets"]["child"]["replace"] = ["model"]
    with pytest.raises(ConfigError, match=r"'presets\.child\.replace' names 'model', which is not a mapping both "
                                          r"'presets\.child' and the preset it extends \('base'\) state"):
        resolve_preset(config, "child")
    config["presets"]["base"]["replace"] = ["runs"]
    with pytest.raises(ConfigError, match=r"'presets\.base\.replace' needs 'presets\.base\.extends'"):
        resolve_preset(config, "base")


def test_a_chain_resolves_from_its_root():
    config = _presets(a={"x": 1, "y": {"p": 1, "q": 1}}, b={"extends": "a", "y": {"p": 2}},
                      c={"extends": "b", "y": {"q": 3}, "z": 0})
    assert resolve_preset(config, "c") == {"x": 1, "y": {"p": 2, "q": 3}, "z": 0}
    assert resolve_preset({**config, "preset": "b"}) == {"x": 1, "y": {"p": 2, "q": 1}}


def test_a_cycle_or_an_unknown_parent_is_named():
    config = _presets(a={"extends": "b"}, b={"extends": "c"}, c={"extends": "a"})
    with pytest.raises(ConfigError, match=r"'presets\.c\.extends' is 'a', which makes a cycle \(a -> b -> c -> a\)"):
        resolve_preset(config, "a")
    with pytest.raises(ConfigError, match=r"'presets\.a\.extends' is 'a', which makes a cycle \(a -> a\)"):
        resolve_preset(_presets(a={"extends": "a"}), "a")
    with pytest.raises(ConfigError, match=r"'presets\.test\.extends' is 'smal', which is not a preset \(did you mean "
                                          r"'small'\?\); name one of: small"):
        resolve_preset(_presets(test={"extends": "smal"}, small={}), "test")
    with pytest.raises(ConfigError, match=r"'preset' is 'huge', which is not defined under 'presets'"):
        resolve_preset(_presets(small={}), "huge")


def test_a_preset_is_validated_as_resolved_and_each_problem_named_where_it_is_written(config, schema):
    assert "n_head" not in config["presets"]["paper_short"].get("model", {})  # it inherits the paper's model
    # a typo in a preset that extends another: named in that preset, with the key it meant
    with pytest.raises(ConfigError, match=r"unknown config key 'presets\.test\.train\.batchsiz' \(did you mean "
                                          r"'batch_size'\?\)"):
        validate_config(_with(config, "presets.test.train.batchsiz", 8), schema)
    # a typo in a parent: named once, in the parent, not again in the three presets that inherit it
    with pytest.raises(ConfigError) as err:
        validate_config(_with(config, "presets.small.attention.sequence", 8), schema)
    assert re.findall(r"unknown config key '[^']*'", str(err.value)) == [
        "unknown config key 'presets.small.attention.sequence'"]
    with pytest.raises(ConfigError, match=r"'presets\.paper_short\.model\.n_head' must be of type integer"):
        validate_config(_with(config, "presets.paper_short.model.n_head", "six"), schema)
    # what JSON Schema cannot say is checked on the resolved preset: paper_short's n_head is the paper's 6
    with pytest.raises(ConfigError, match=r"'presets\.paper_short\.model\.d_model' \(100\) must be divisible by "
                                          r"'presets\.paper_short\.model\.n_head' \(6\)"):
        validate_config(_with(config, "presets.paper_short.model.d_model", 100), schema)
    # a preset must resolve to a whole one: every key stated by it or by a preset it extends
    no_parent = copy.deepcopy(config)
    del no_parent["presets"]["test"]["extends"], no_parent["presets"]["test"]["replace"]
    with pytest.raises(ConfigError, match=r"config key 'presets\.test' is missing: 'train_fraction' is a required"):
        validate_config(no_parent, schema)
    with pytest.raises(ConfigError, match=r"'presets\.test\.extends' is 'smal', which is not a preset \(did you "
                                          r"mean 'small'\?\)"):
        validate_config(_with(config, "presets.test.extends", "smal"), schema)
    with pytest.raises(ConfigError, match=r"'presets\.test\.replace' names 'phase_change\.run', which is not a "
                                          r"mapping both"):
        validate_config(_with(config, "presets.test.replace", ["phase_change.run"]), schema)


def test_every_family_checks_its_own_section_for_every_preset(config, schema):
    """Each family's schemas.py says what the schema cannot (check_config), and validate_config asks every family
    of the registry (tinylens.families), for every preset, before any job is planned."""
    from tinylens.config import family_checks

    assert [check.__module__ for check in family_checks()] == [
        "tinylens.supporting.schemas", "tinylens.dynamics.schemas", "tinylens.phase_change.schemas",
        "tinylens.superposition.schemas"]
    # one problem of each family's, in a preset that is not the one being run
    bad = _with(config, "presets.test.superposition.dimensionality.hidden", 25)
    bad = _with(bad, "presets.paper.phase_change.reference", "main_s9")  # not a run
    bad = _with(bad, "presets.test.dynamics.measure.energy_windows", 65)
    bad = _with(bad, "supporting.robustness.lengths", [5, 40])
    with pytest.raises(ConfigError) as err:
        validate_config(bad, schema)
    assert [line.split(" (")[0].split(":")[0] for line in str(err.value).splitlines()[1:-1]] == [
        "  - config key 'supporting.robustness.lengths' has [40], longer than the context",
        "  - config key 'presets.test.dynamics.measure.energy_windows'",
        "  - config key 'presets.test.superposition.dimensionality.hidden'",
        "  - config key 'presets.paper.phase_change.reference'",
    ]


def test_the_width_is_d_model_in_the_config_and_n_embed_in_a_models_config_json(config, schema, tmp_path):
    """One name, d_model, from the presets to the code; a model's config.json keeps the name it always had,
    so that every model folder written before loads and a run writes the same bytes."""
    from tinylens.config import model_config
    from tinylens.model_config import ModelConfig, load_config
    from tinylens.weights import save_config

    shape = model_config(resolve_preset(config, "test")["model"], vocab_size=65)
    assert shape.d_model == 32
    save_config(tmp_path / "config.json", shape)
    assert (tmp_path / "config.json").read_text() == json.dumps(
        {"vocab_size": 65, "block_size": 32, "n_embed": 32, "n_layer": 6, "n_head": 2, "dropout": 0.0}, indent=2) + "\n"
    assert load_config(tmp_path / "config.json") == shape
    code_names = {k: v for k, v in {**shape.to_dict(), "d_model": 32}.items() if k != "n_embed"}
    with pytest.raises(ValueError, match=r"unknown keys \['d_model'\] / missing keys \['n_embed'\]"):
        ModelConfig.from_dict(code_names)  # config.json's names, not the code's
    # the old name in a preset is named with the new one
    renamed = copy.deepcopy(config)
    renamed["presets"]["test"]["model"]["n_embed"] = renamed["presets"]["test"]["model"].pop("d_model")
    with pytest.raises(ConfigError, match=r"unknown config key 'presets\.test\.model\.n_embed' \(did you mean "
                                          r"'d_model'\?\)"):
        validate_config(renamed, schema)


def test_the_preset_in_docs_configuration_md_is_valid_and_resolves_as_it_says(repo, config, schema):
    block = re.search(r"```yaml\n(.*?)```", (repo / "docs/configuration.md").read_text(encoding="utf-8"), re.S)
    ours = copy.deepcopy(config)
    ours["presets"].update(yaml.safe_load(block.group(1))["presets"])
    validate_config(ours, schema)
    wide, small = resolve_preset(ours, "small_wide"), resolve_preset(config, "small")
    assert wide["model"] == {**small["model"], "d_model": 128} and len(wide["train"]["phases"]) == 2
    assert list(wide["phase_change"]["runs"]) == ["main", "one_layer"]
    assert {k: v for k, v in wide.items() if k not in ("model", "train", "phase_change")} == \
        {k: v for k, v in small.items() if k not in ("model", "train", "phase_change")}
