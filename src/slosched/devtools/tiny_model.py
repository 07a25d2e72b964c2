"""Generate a tiny random-weight Llama model + byte-level BPE tokenizer for local vLLM CPU servers.

Run with the vLLM virtualenv's Python (it needs torch, transformers, tokenizers, which the gateway's own
environment does not): ``python tiny_model.py OUT_DIR --layers 4``. Outputs are gibberish; timings and
scheduling are real. Deterministic: the same ``--layers`` and ``--seed`` give the same weights.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "SELECT name, count(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;",
    "Large language models generate text one token at a time, in batches, on accelerators.",
    "A scheduler decides which request runs next and on which instance, to meet deadlines.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 and punctuation ! ? , . ; : ( ) [ ] { } < > = + - * / are common.",
    "user assistant system: hello, how can I help you today? Please answer briefly.",
]
_CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}: {{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)


def build(out_dir: Path, layers: int, seed: int, vocab_size: int = 2000) -> None:
    import torch  # type: ignore[import-not-found,unused-ignore]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # type: ignore[import-not-found,unused-ignore]
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # type: ignore[import-not-found,unused-ignore]

    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(_CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.chat_template = _CHAT_TEMPLATE
    fast.save_pretrained(out_dir)
    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(fast),
        max_position_embeddings=4096,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(out_dir)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.layers < 1:
        parser.error("--layers must be >= 1")
    build(args.out_dir, args.layers, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
