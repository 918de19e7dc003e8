# Shared by every stage: the active preset, output paths, wildcard constraints.
from tinylens.config import active_preset, all_seeds

PRESET = config["preset"]
SETTINGS = active_preset(config)
SEEDS = all_seeds(config)


def results(path):
    """Every output lives under results/<preset>/, so presets never overwrite each other."""
    return f"results/{PRESET}/{path}"


wildcard_constraints:
    seed=r"\d+",


ANALYSIS = SETTINGS["analysis"]
ORIGINAL = config["seeds"]["original"]
ALTERNATES = config["seeds"]["alternates"]
MODES = ["corpus", "heldout"]
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


def dump_input_table(wildcards):
    """The table of strings an activation dump reads: all strings, or one prompt set."""
    if wildcards.set == "strings":
        return rules.build_strings.output.strings
    return results(f"strings/{wildcards.set}.parquet")
