"""Every published number the workflow compares against (method.md §1-3, §6, §7, §12), in one place: the
comparison table (tinylens.comparison), the findings' sentences and each family's metrics read them here.

Block keys are 0-based like every metrics file (``5`` is the paper's block 6). These are compared against,
never used in a computation.
"""

from __future__ import annotations

# --- the core (method.md §2, §6) ----------------------------------------------------------------------

#: The four published models' seeds, the original first.
SEEDS = ("1337", "1442", "88", "99999")
#: §2: (train, val) loss of each published model, and the step it was taken at.
LOSSES = {"1337": (0.9334, 1.5063), "1442": (0.9293, 1.5038), "88": (0.9294, 1.4991), "99999": (0.9339, 1.4941)}
STEPS = {"1337": 4500, "1442": 5000, "88": 4500, "99999": 4500}
#: §6: the approximation vs the model over the paper's prompts with its thresholds and weights.
HELLINGER = {"mean": 0.1677, "std": 0.1215, "min": 0.0013, "max": 0.9994}
#: §6: the prompts each of the paper's Hellinger statistics is over.
HELLINGER_PROMPTS = 20_000
#: §6: each alternate vs the original, (mean, std).
ALTERNATES = {"1442": (0.1064, 0.0823), "88": (0.1057, 0.0817), "99999": (0.1053, 0.0828)}
#: §6 case studies, block 1 alone at three thresholds: (strings above it, H).
AND_ONLY_L_BLOCK1 = {"0.95": (94, 0.071), "0.90": (612, 0.286), "0.97": (33, 0.150)}
AND_ONLY_L_ALL_BLOCKS = {"matches": (94, 47, 70, 108, 175, 2237), "hellinger": 0.073}
HING_TREMB = {"block1_only": 0.63, "all_blocks": 0.023}
#: The core's published reference as its metrics file (metrics/hellinger.json) records it.
APPROXIMATION_REFERENCE = {
    "approximation_mean": HELLINGER["mean"], "approximation_std": HELLINGER["std"],
    "alternates_mean": {seed: mean for seed, (mean, _) in ALTERNATES.items()},
}

# --- the supporting analyses (method.md §7, §12) ----------------------------------------------------------

#: Appendix IV, mean Hellinger distance per block after dropping a term. The paper's
#: table came from the one-token continuation (method.md §12), our ``one_token`` context.
ABLATION = {
    "drop_sa": {0: 0.11, 1: 0.07, 2: 0.09, 3: 0.06, 4: 0.04, 5: 0.03},
    "drop_ffwd": {0: 0.70, 1: 0.19, 2: 0.15, 3: 0.13, 4: 0.14, 5: 0.17},
}
ABLATION_CONTEXT = "one_token"

#: Appendix III: mean ln_f output norm of the first 1,000 prompts, unscaled and with the
#: last block's output scaled by 10.
FINAL_LAYERNORM = {"factor": 10.0, "mean_output_norm": 23.1262, "mean_output_norm_scaled": 23.1263}

#: Appendix V: for 'a' at the end of the model (the input of ln_f), sigma_1 > 6 sigma_2.
SUBSPACE_SIGMA_RATIO = {"token": "a", "stage": "ln_f_input", "sigma_ratio_more_than": 6.0}
#: Tokens whose subspace never reached the stopping rule in 50,000 steps (method.md §12).
SUBSPACE_NOT_REACHED = ["$", "&"]

#: "Aggregate performance", percent of prompts meeting the criterion, by 0-based block.
CRITERION_END_OF_MODEL = {5: 81.78, 4: 68.26, 3: 58.15, 2: 57.34, 1: 52.02, 0: 49.71}
CRITERION_SAME_STAGE = {5: 81.78, 4: 50.71, 3: 38.80}
#: The paper's chance level (kernel-density draws, one token set per n): about 16-21%.
CRITERION_CHANCE_PERCENT = (16.0, 21.0)

#: The feed-forward share of the parameters of the paper's model.
FFWD_SHARE = {"ffwd_parameters": 7_089_408, "parameters": 10_788_929, "percent": 65.71}
