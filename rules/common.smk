# Shared by every stage: the active preset, output paths, wildcard constraints, resources.
from tinylens.config import active_preset, all_seeds
from tinylens.strings import MODES as PROMPT_MODES

PRESET = config["preset"]
SETTINGS = active_preset(config)
SEEDS = all_seeds(config)


def results(path):
    """Every output lives under results/<preset>/, so presets never overwrite each other."""
    return f"results/{PRESET}/{path}"


wildcard_constraints:
    seed=r"\d+",

TRAIN = SETTINGS["train"]
ANALYSIS = SETTINGS["analysis"]
ORIGINAL = config["seeds"]["original"]
ALTERNATES = config["seeds"]["alternates"]
MODES = list(PROMPT_MODES)  # defined once, in tinylens.strings
N_LAYER = SETTINGS["model"]["n_layer"]
PROMPT_SETS = [f"prompts_{mode}" for mode in MODES]


scattergather:
    search=ANALYSIS["search_shards"],


wildcard_constraints:
    mode="|".join(MODES),
    set="|".join(["strings", *PROMPT_SETS]),


def activations(seed, set_name):
    """The files of one activation dump: a Parquet per block, and the logits."""
    base = results(f"activations/seed{seed}/{set_name}")
    return {
        "blocks": [f"{base}/block{b}.parquet" for b in range(N_LAYER)],
        "logits": f"{base}/logits.parquet",
    }


def search_shards(mode=None):
    """Every search shard of ``mode`` (None: of the rule's {mode} wildcard)."""
    mode = "{{mode}}" if mode is None else mode
    return gather.search(results(f"search/{mode}/shard_{{scatteritem}}.parquet"))


def scaled_mem_mb(base, per_input_mb):
    """mem_mb for Snakemake's resources: ``base`` MB plus ``per_input_mb`` times the inputs' size, so
    one declaration fits every preset (peaks measured on the small preset: docs/benchmarks.md)."""
    return lambda wildcards, input: int(base + per_input_mb * input.size_mb)


def scaled_runtime(base, per_input_gb):
    """runtime (minutes) for Snakemake's resources: ``base`` plus ``per_input_gb`` per GB of input."""
    return lambda wildcards, input: int(base + per_input_gb * input.size_mb / 1024)


def core_artifacts():
    """Every file of the core reproduction that a later step, a verification or a restore needs,
    intermediates included, so `rule all` notices when one is missing (a deleted shard or dump)."""
    files = [results(f) for f in ("data/corpus.txt", "data/tokenizer.json", "data/train.npy", "data/val.npy",
                                  "strings/strings.parquet")]
    for seed in SEEDS:
        model = results(f"models/seed{seed}")
        files += [f"{model}/{name}" for name in ("model.safetensors", "config.json", "tokenizer.json",
                                                 "metrics.json", "loss.csv", "checkpoints")]
        for set_name in PROMPT_SETS:
            dump = activations(seed, set_name)
            files += [*dump["blocks"], dump["logits"]]
    dump = activations(ORIGINAL, "strings")
    files += [*dump["blocks"], dump["logits"]]
    for mode in MODES:
        files += [results(f"strings/prompts_{mode}.parquet"), *search_shards(mode),
                  results(f"approx/{mode}/tuned.json"), results(f"approx/{mode}/threshold_sweep.csv"),
                  results(f"evaluation/{mode}/hellinger.parquet"), results(f"metrics/hellinger_{mode}.json")]
    files += [results("case_studies/summary.json"), results("case_studies/matches.parquet")]
    return files
