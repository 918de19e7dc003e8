import numpy as np

from tinylens.case_studies import find_matches


def _dense_reference(prompt_vectors, blocks, min_cosine):
    """The definition: float64 cosines of every string, kept above min_cosine, by decreasing cosine."""
    out = []
    for b, strings in enumerate(blocks):
        s = strings.astype(np.float64)
        norms = np.linalg.norm(s, axis=1)
        per_prompt = []
        for p in prompt_vectors[b]:
            cos = (s @ p) / np.maximum(norms * np.linalg.norm(p), 1e-300)
            idx = np.nonzero(cos > min_cosine)[0]
            order = np.argsort(-cos[idx], kind="stable")
            per_prompt.append((idx[order], cos[idx[order]]))
        out.append(per_prompt)
    return out


def test_matches_equal_the_float64_definition_next_to_the_threshold():
    rng = np.random.default_rng(0)
    d, min_cosine = 48, 0.7
    prompts = rng.normal(size=(2, 3, d)).astype(np.float32).astype(np.float64)  # float32 activations
    blocks = []
    for b in range(2):
        strings = [rng.normal(size=(400, d))]
        for p in prompts[b]:
            unit = p / np.linalg.norm(p)
            other = rng.normal(size=(60, d))
            other -= (other @ unit)[:, None] * unit  # orthogonal to the prompt
            other /= np.linalg.norm(other, axis=1, keepdims=True)
            # cosines at, just above and just below the threshold (float32 rounding decides nothing here)
            c = min_cosine + rng.choice([0.0, 1e-7, -1e-7, 3e-6, -3e-6, 2e-5, -2e-5, 0.1, 0.25], size=60)
            strings.append((c[:, None] * unit + np.sqrt(1 - c**2)[:, None] * other) * rng.uniform(0.5, 3, (60, 1)))
        blocks.append(np.concatenate(strings).astype(np.float32))
    got = find_matches(prompts, lambda b: blocks[b], min_cosine)
    expected = _dense_reference(prompts, blocks, min_cosine)
    near = 0
    for b in range(2):
        for i in range(3):
            np.testing.assert_array_equal(got[b][i][0], expected[b][i][0])
            np.testing.assert_allclose(got[b][i][1], expected[b][i][1], rtol=0, atol=1e-15)
            near += int((np.abs(expected[b][i][1] - min_cosine) < 1e-5).sum())
    assert near > 20  # the data really sit next to the threshold
