"""Text generation from a trained model."""

from __future__ import annotations

import torch

from tinylens.core.corpus import CharTokenizer
from tinylens.model import Transformer


def sample_text(model: Transformer, tokenizer: CharTokenizer, prompt: str, num_chars: int,
                seed: int, temperature: float = 1.0) -> str:
    """The prompt followed by ``num_chars`` sampled characters; the same seed gives the same text."""
    device = next(model.parameters()).device
    idx = torch.as_tensor(tokenizer.encode(prompt), dtype=torch.long, device=device)[None]  # [1 pos]
    generator = torch.Generator(device=device).manual_seed(seed)
    was_training = model.training
    model.eval()
    out = model.generate(idx, num_chars, generator=generator, temperature=temperature)
    model.train(was_training)
    return tokenizer.decode(out[0].tolist())
