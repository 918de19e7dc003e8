"""Workflow configuration: JSON Schema validation with errors that name the key, and preset resolution.

The Snakefile calls :func:`validate_config` once, before any job is planned;
rules then pass plain values from the resolved preset into the library. No
library function reads the configuration itself.
"""

from __future__ import annotations

import copy
import difflib
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tinylens.families import FAMILIES
from tinylens.model_config import ModelConfig
from tinylens.train_config import Phase, TrainConfig, checkpoint_schedule

#: Keys whose name changed, by their old name: an old name is named with its new one.
RENAMED = {"n_embed": "d_model"}


class ConfigError(ValueError):
    """The configuration does not match the schema; the message lists every problem by key."""


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _describe(error: jsonschema.ValidationError, written=list) -> list[str]:
    """``error`` in words; ``written``: a key path (of a resolved preset) -> where it is written."""
    where = _key(written(error.absolute_path))
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        out = []
        for key in extra:
            full = _key(written([*error.absolute_path, key]))
            close = [RENAMED[key]] if RENAMED.get(key) in allowed else difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            out.append(f"unknown config key '{full}'{hint}; allowed here: {', '.join(allowed)}")
        return out
    if error.validator == "required":
        return [f"config key '{where}' is missing: {error.message}"]
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [
            f"config key '{where}' must be of type {expected}, "
            f"got {error.instance!r} ({type(error.instance).__name__})"
        ]
    return [f"config key '{where}': {error.message}"]


def grid_edges(grid: Mapping[str, Any]) -> list[float]:
    """The threshold grid's edges ``start, start + step, ...`` (as :func:`tinylens.core.search.threshold_edges`)."""
    return [round(grid["start"] + grid["step"] * k, 10) for k in range(grid["count"])]


def _grid_problems(config: Mapping[str, Any]) -> list[str]:
    grid = config["threshold_grid"]
    edges = grid_edges(grid)
    problems = []
    if not (edges[0] > 0 and edges[-1] <= 1.0):
        fits = int((1.0 - grid["start"]) / grid["step"] + 1e-9) + 1 if 0 < grid["start"] <= 1 else 0
        problems.append(
            f"config key 'threshold_grid' {dict(grid)} gives edges {edges[0]:g}..{edges[-1]:g}; every edge is a "
            f"cosine threshold and must lie in (0, 1]"
            + (f": with this start and step use count <= {fits}" if fits else ": choose start in (0, 1]"))
    baseline = config["paper_baseline"]
    off = [t for t in baseline["thresholds"] if not any(abs(t - e) <= 1e-9 for e in edges)]
    if off:
        problems.append(
            f"config key 'paper_baseline.thresholds' has {off}, which are not edges of 'threshold_grid' "
            f"({edges[0]:g}, {edges[1] if len(edges) > 1 else edges[0]:g}, ..., {edges[-1]:g}); the search only "
            "keeps matches per grid bin, so put the grid through these values or change them")
    if len(baseline["thresholds"]) != len(baseline["weights"]):
        problems.append(
            f"config keys 'paper_baseline.thresholds' ({len(baseline['thresholds'])} values) and "
            f"'paper_baseline.weights' ({len(baseline['weights'])} values) must have one value per block each")
    if baseline["weights"] and not sum(baseline["weights"]) > 0:
        problems.append(f"config key 'paper_baseline.weights' {baseline['weights']} must have a positive weight")
    length = config["substring_length"]
    wrong = [p for p in config["case_study_prompts"] if len(p) != length]
    if wrong:
        problems.append(
            f"config key 'case_study_prompts' has {wrong}, which are not 'substring_length' = {length} characters "
            "long; a case study compares a prompt with the strings of that length")
    if config["controls"]["suffix_lengths"] > length:
        problems.append(
            f"config key 'controls.suffix_lengths' ({config['controls']['suffix_lengths']}) is longer than "
            f"'substring_length' = {length}: the suffix-count baseline reads the prompt's last k characters, "
            f"k = 1..suffix_lengths; use at most {length}")
    return problems


def _preset_problems(name: str, preset: Mapping[str, Any]) -> list[str]:
    problems = []
    key = f"presets.{name}"
    model, train, analysis = preset["model"], preset["train"], preset["analysis"]
    if model["d_model"] % model["n_head"]:
        problems.append(
            f"config key '{key}.model.d_model' ({model['d_model']}) must be divisible "
            f"by '{key}.model.n_head' ({model['n_head']})"
        )
    ends = [p["until"] for p in train["phases"]]
    if ends != sorted(set(ends)):
        problems.append(f"config key '{key}.train.phases': 'until' must strictly increase, got {ends}")
    first = train["checkpoints"]["first"]
    if first >= ends[-1]:
        problems.append(
            f"config key '{key}.train.checkpoints.first' ({first}) must be below the last step "
            f"({ends[-1]}): checkpoints are log-spaced from it to the last step"
        )
    for seed, final in train["final_step_by_seed"].items():
        before = ends[-2] if len(ends) > 1 else 0
        if final <= before:
            problems.append(
                f"config key '{key}.train.final_step_by_seed.{seed}' ({final}) must lie after the end of the "
                f"phase before the last ({before}): it moves where the last phase ends for seed {seed}")
        if first >= final:
            problems.append(
                f"config key '{key}.train.checkpoints.first' ({first}) must be below seed {seed}'s last step "
                f"({final}, '{key}.train.final_step_by_seed.{seed}')")
    variant_phases = preset.get("variants", {}).get("phases")
    if variant_phases:
        ends_v = [p["until"] for p in variant_phases]
        if ends_v != sorted(set(ends_v)):
            problems.append(f"config key '{key}.variants.phases': 'until' must strictly increase, got {ends_v}")
        if first >= ends_v[-1]:
            problems.append(
                f"config key '{key}.train.checkpoints.first' ({first}) must be below the variants' last step "
                f"({ends_v[-1]}, '{key}.variants.phases')")
    n = analysis["n_prompts"]
    n_tune = int(round(analysis["tune_fraction"] * n))
    if not 0 < n_tune < n:
        problems.append(
            f"config key '{key}.analysis.tune_fraction' ({analysis['tune_fraction']}) of n_prompts ({n}) leaves "
            f"{n_tune} tuning and {n - n_tune} evaluation prompts; both need at least one")
    for count in ("n_prompts", "paper_prompts"):  # every prompt mode is searched in the same shards
        n_mode = analysis[count]
        if analysis["search_shards"] > n_mode:
            problems.append(
                f"config key '{key}.analysis.search_shards' ({analysis['search_shards']}) is more than "
                f"'{key}.analysis.{count}' ({n_mode}), so some shards would be empty; use at most {n_mode} (shards "
                "need not divide the prompts evenly: their sizes differ by at most one)")
        if analysis["verify_prompts"] > n_mode:
            problems.append(
                f"config key '{key}.analysis.verify_prompts' ({analysis['verify_prompts']}) exceeds "
                f"'{key}.analysis.{count}' ({n_mode}); at most every prompt can be re-checked")
    return problems


def _semantic_problems(config: Mapping[str, Any]) -> list[str]:
    """Constraints JSON Schema cannot say: cross-key ones, and that the chosen preset exists.
    Runs only on a config that passed the schema, so every key is present with its type."""
    problems = []
    presets = config["presets"]
    if config["preset"] not in presets:
        problems.append(
            f"config key 'preset' is {config['preset']!r}, which is not defined under 'presets'; "
            f"choose one of: {', '.join(presets)}"
        )
    problems += _grid_problems(config)
    found = {}
    for name in presets:
        preset = resolve_preset(config, name)
        found[name] = _preset_problems(name, preset)
        for check in family_checks():
            found[name] += check(preset, config, f"presets.{name}")
        seeds = {str(s) for s in all_seeds({**config, "preset": name})}
        unknown = sorted(set(preset["train"]["final_step_by_seed"]) - seeds)
        if unknown:
            found[name].append(
                f"config key 'presets.{name}.train.final_step_by_seed' names seeds {unknown}, which are not the "
                f"original or an alternate seed ({', '.join(sorted(seeds, key=int))}); name one of those")
    for name, own in found.items():  # a problem a preset inherits with its parent's values: named for the parent
        parent = presets[name].get(EXTENDS)
        inherited = set(found.get(parent, ()))
        problems += [p for p in own if p.replace(f"presets.{name}.", f"presets.{parent}.") not in inherited]
    return problems


def family_checks() -> list:
    """Each family's own check of its settings, in the registry's order (:data:`tinylens.families.FAMILIES`): the
    ``check_config(preset, config, where)`` of its ``tinylens.<family>.schemas`` where it has one, which returns
    what the schema cannot say, one message per problem naming its key (``where``: the preset's key,
    ``presets.<name>``). What concerns the core is checked here, in :func:`_preset_problems`."""
    checks = []
    for family in FAMILIES:
        if (Path(__file__).parent / family.key / "schemas.py").is_file():  # the comparison is one module
            module = importlib.import_module(f"tinylens.{family.key}.schemas")
            checks += [module.check_config] if hasattr(module, "check_config") else []
    return checks


def validate_config(config: Mapping[str, Any], schema_path: str | Path) -> None:
    """Raise :class:`ConfigError` listing every problem, each naming its key, or return silently.

    Each preset is checked as resolved (:func:`resolve_preset`), so that what it inherits counts; a problem
    of the schema's is named where the key is written: a typo in a preset that extends another is named in
    that preset, one in a parent once, in the parent, not in every preset that inherits it."""
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    resolved, problems = _resolved_presets(config)
    if not problems:
        errors = sorted(validator.iter_errors(resolved), key=lambda e: list(map(str, e.absolute_path)))
        problems = [line for e in errors for line in _describe(e, lambda path: _written_at(config, path))]
    if not problems:
        problems = _semantic_problems(config)
    if problems:
        raise ConfigError(
            "invalid configuration (config/config.yaml and --config overrides):\n  - "
            + "\n  - ".join(dict.fromkeys(problems))
            + "\nFix the key in config/config.yaml or on the command line; config/schema.yaml lists what is allowed."
        )


#: The keys of a written preset that say how to resolve it, not what it sets: the preset it extends, and the
#: mappings it states in full instead of merging them into its parent's (dotted keys).
EXTENDS, REPLACE = "extends", "replace"


def _merge(parent: Mapping[str, Any], child: Mapping[str, Any], replace: set[tuple[str, ...]],
           path: tuple[str, ...] = ()) -> dict[str, Any]:
    """``child`` laid over ``parent``: a mapping in both is merged key by key, except at a path in ``replace``;
    anything else of the child's replaces. The keys keep the parent's order; a key new to it goes where the
    child writes it, before the next key the child writes that the parent has (params keep their order)."""
    order, written = list(parent), list(child)
    for i, key in enumerate(written):
        if key not in parent:
            after = next((k for k in written[i + 1:] if k in parent), None)
            order.insert(len(order) if after is None else order.index(after), key)
    out = {}
    for key in order:
        here = (*path, str(key))
        if key not in child:
            out[key] = parent[key]
        elif isinstance(child[key], Mapping) and isinstance(parent.get(key), Mapping) and here not in replace:
            out[key] = _merge(parent[key], child[key], replace, here)
        else:
            out[key] = copy.deepcopy(child[key])
    return out


def _chain(presets: Mapping[str, Any], name: str) -> list[str]:
    """``name``, the preset it extends, that one's, ...: the root last. A cycle or a parent that is not a
    preset is a :class:`ConfigError` naming the preset and its ``extends`` key."""
    chain = [name]
    while True:
        written = presets[chain[-1]]
        parent = written.get(EXTENDS) if isinstance(written, Mapping) else None
        if parent is None:
            return chain
        key = f"presets.{chain[-1]}.{EXTENDS}"
        if not isinstance(parent, str) or parent not in presets:
            close = difflib.get_close_matches(str(parent), [str(p) for p in presets], n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"config key '{key}' is {parent!r}, which is not a preset{hint}; name one of: "
                              f"{', '.join(p for p in presets if p != chain[-1])}")
        if parent in chain:
            raise ConfigError(f"config key '{key}' is {parent!r}, which makes a cycle "
                              f"({' -> '.join([*chain, parent])}); a preset cannot extend itself, even through others")
        chain.append(parent)


def _replace_paths(presets: Mapping[str, Any], name: str, parent: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """The dotted keys of ``presets.<name>.replace``, each a mapping the preset states and its parent has."""
    written, key = presets[name], f"presets.{name}.{REPLACE}"
    listed = written.get(REPLACE, [])
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise ConfigError(f"config key '{key}' must be a list of dotted keys (for example [phase_change.runs]), "
                          f"got {listed!r}")
    paths = set()
    for dotted in listed:
        path = tuple(dotted.split("."))
        ours, theirs = written, parent
        for part in path:
            ours = ours.get(part) if isinstance(ours, Mapping) else None
            theirs = theirs.get(part) if isinstance(theirs, Mapping) else None
        if not (isinstance(ours, Mapping) and isinstance(theirs, Mapping)):
            raise ConfigError(f"config key '{key}' names '{dotted}', which is not a mapping both 'presets.{name}' "
                              f"and the preset it extends ('{written[EXTENDS]}') state; list only the mappings this "
                              "preset states in full")
        paths.add(path)
    return paths


def resolve_preset(config: Mapping[str, Any], name: str | None = None) -> dict[str, Any]:
    """The preset ``name`` (default: the one ``preset`` names) with everything it inherits: laid over the preset
    it ``extends`` (itself resolved first), mappings merged key by key, other values replacing, the mappings its
    ``replace`` lists taken as it states them. Every reader of a preset goes through this, never through
    ``config["presets"][name]``, which holds only what the preset writes. A new copy each call."""
    presets = config["presets"]
    name = config["preset"] if name is None else name
    if name not in presets:
        raise ConfigError(f"config key 'preset' is {name!r}, which is not defined under 'presets'; "
                          f"choose one of: {', '.join(presets)}")
    chain = _chain(presets, name)
    if REPLACE in presets[chain[-1]]:
        raise ConfigError(f"config key 'presets.{chain[-1]}.{REPLACE}' needs 'presets.{chain[-1]}.{EXTENDS}': "
                          "a preset that extends none states everything in full already")
    resolved: dict[str, Any] = {}
    for below, current in zip([None, *chain[::-1]], chain[::-1]):
        replace = _replace_paths(presets, current, resolved) if below is not None else set()
        written = {k: v for k, v in presets[current].items() if k not in (EXTENDS, REPLACE)}
        resolved = _merge(resolved, written, replace)
    return resolved


def _resolved_presets(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
    """``config`` with every preset resolved (its ``extends`` and ``replace`` kept, for the schema to check),
    and what stopped a preset from resolving. Where the presets are not mappings, ``config`` as it is: the
    schema says what is wrong."""
    presets = config.get("presets")
    if not isinstance(presets, Mapping) or not all(isinstance(p, Mapping) for p in presets.values()):
        return config, []
    resolved, problems = {}, []
    for name, written in presets.items():
        try:
            resolved[name] = {**{k: written[k] for k in (EXTENDS, REPLACE) if k in written},
                              **resolve_preset(config, name)}
        except ConfigError as err:
            problems.append(str(err))
    return {**config, "presets": resolved}, problems


def _written_at(config: Mapping[str, Any], path) -> list:
    """A key path in the resolved config -> the same key in the preset that writes it: of the preset and the
    ones it extends (nearest first), the one that writes the longest part of the path."""
    path = list(path)
    if len(path) < 3 or path[0] != "presets":
        return path
    presets, rest = config["presets"], path[2:]

    def writes(node, keys) -> bool:
        for key in keys:
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and key < len(node):
                node = node[key]
            else:
                return False
        return True

    chain = _chain(presets, path[1])
    for depth in range(len(rest), 0, -1):
        for name in chain:
            if writes(presets[name], rest[:depth]):
                return ["presets", name, *rest]
    return path


def active_preset(config: Mapping[str, Any]) -> dict[str, Any]:
    """The preset being run, resolved (:func:`resolve_preset`)."""
    return resolve_preset(config)


def all_seeds(config: Mapping[str, Any]) -> list[int]:
    """The original seed first, then the alternates the active preset trains: the first
    ``presets.<preset>.alternate_seeds`` of ``seeds.alternates`` (all of them where it is absent or null)."""
    count = resolve_preset(config).get("alternate_seeds")
    alternates = config["seeds"]["alternates"]
    return [config["seeds"]["original"], *(alternates if count is None else alternates[:count])]


def model_config(model: Mapping[str, Any], vocab_size: int) -> ModelConfig:
    return ModelConfig(vocab_size=vocab_size, **model)


#: The settings of a preset's ``train`` entry that determine a model (the rest are resources).
TRAIN_SETTINGS = ("batch_size", "phases", "eval_interval", "eval_iters", "checkpoints", "precision",
                  "batch_sampling")


def seed_train_settings(train: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The training settings of ``seed``: the preset's, with the last phase ending at the seed's entry of
    ``final_step_by_seed`` where it has one (the published alternate 1442 is its 5,000-step model)."""
    settings = {k: train[k] for k in TRAIN_SETTINGS}
    final = train.get("final_step_by_seed", {}).get(str(seed))
    if final is not None:
        settings["phases"] = [*train["phases"][:-1], {**train["phases"][-1], "until": final}]
        # Checkpoints stay log-spaced to the preset's last step, so that every seed is measured at the
        # same steps (training dynamics); the seed's own phase ends are added.
        settings["checkpoints"] = {**train["checkpoints"], "shared_until": train["phases"][-1]["until"]}
    return settings


def variant_train_settings(train: Mapping[str, Any], variants: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The training settings of the variant models (method.md §14): the original ``seed``'s
    (:func:`seed_train_settings`), with the variants' own ``phases`` where the preset gives them."""
    settings = seed_train_settings(train, seed)
    if variants.get("phases"):
        settings = {**settings, "phases": list(variants["phases"])}
    return settings


def seed_checkpoint_steps(train: Mapping[str, Any]) -> tuple[int, ...]:
    """``train``: :func:`seed_train_settings` of a preset's ``train`` entry -> its checkpoint steps: the
    preset's log-spaced schedule (the same for every seed) up to the seed's last step, and its phase ends."""
    ends = [p["until"] for p in train["phases"]]
    first, count = train["checkpoints"]["first"], train["checkpoints"]["count"]
    shared = checkpoint_schedule(first, count, [*ends[:-1], train["checkpoints"].get("shared_until", ends[-1])])
    return tuple(sorted({s for s in shared if s <= ends[-1]} | set(ends)))


def train_config(train: Mapping[str, Any], seed: int) -> TrainConfig:
    """``train``: a preset's ``train`` entry, or :func:`seed_train_settings` of it."""
    train = seed_train_settings(train, seed)
    return TrainConfig(
        seed=seed,
        batch_size=train["batch_size"],
        phases=tuple(Phase(until=p["until"], lr=p["lr"]) for p in train["phases"]),
        eval_interval=train["eval_interval"],
        eval_iters=train["eval_iters"],
        checkpoint_steps=seed_checkpoint_steps(train),
        precision=train["precision"],
        batch_sampling=train["batch_sampling"],
    )
