"""Make tiny Llama models with random weights and a locally trained tokenizer, for the real-engine tests.

Run with the engine's environment: python tests/engine/tiny_models.py OUT_DIR
Makes OUT_DIR/target (4 layers, 4 KV heads), OUT_DIR/draft (2 layers, 4 KV heads, head_dim 32) and
OUT_DIR/draft-fewer-kv (2 layers, 2 KV heads), each in bfloat16 and float32 variants' configs (dtype is a
serving flag), all sharing one 512-token BPE tokenizer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SHAPES = {
    "target": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
                   num_key_value_heads=4, head_dim=32),
    "draft": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, head_dim=32),
    "draft-fewer-kv": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=32),
}
VOCAB = 512


def tokenizer(folder: Path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    words = [f"{a}{b}{c}" for a in "bcdfghklmnprst" for b in "aeiou" for c in "nrstl"]
    corpus = [" ".join(words[i:i + 20]) for i in range(0, len(words), 7)] * 20
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(folder)
    return fast


def main(out: str) -> None:
    import torch  # noqa: PLC0415
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    for name, shape in SHAPES.items():
        folder = root / name
        folder.mkdir(exist_ok=True)
        tokenizer(folder)
        config = LlamaConfig(vocab_size=VOCAB, max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                             tie_word_embeddings=False, torch_dtype="bfloat16", **shape)
        torch.manual_seed(len(name))
        model = LlamaForCausalLM(config).to(torch.bfloat16)
        model.save_pretrained(folder, safe_serialization=True)
        cfg = json.loads((folder / "config.json").read_text())
        print(name, cfg.get("num_key_value_heads"), sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main(sys.argv[1])
