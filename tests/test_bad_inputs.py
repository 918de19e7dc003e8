"""docs/bad-inputs.md shows the messages the code gives today (the configuration cases, checked exactly)."""

import copy

import pytest

from tinylens.config import ConfigError, validate_config


def _bad(config, **changes):
    bad = copy.deepcopy(config)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = bad
        for key in parents:
            node = node[key]
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
