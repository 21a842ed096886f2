"""Builds the real-vLLM test tier's model: a tiny Llama with random weights and a locally trained tokenizer.

No model can come from a hub here, and the tier checks shapes, caching, metrics and timing, not answers:
a 2-layer, 128-wide Llama is enough (its output is gibberish). Everything is deterministic: the tokenizer
is a byte-level BPE trained on this Python's own standard library sources (sorted), the weights come
from a fixed seed. Run with the tier's virtualenv (.tools/vllm), which has torch, transformers and
tokenizers: `python scripts/vllm/build_tiny_model.py OUT_DIR`.

The chat template is ChatML with tools, tool calls and tool results, like the Qwen family, and with a
think block: every assistant turn opens with `<think>…</think>`, empty and closed unless the request
passes `chat_template_kwargs: {"enable_thinking": true}`, where the generation prompt leaves it open.
With `--reasoning-parser deepseek_r1` an open block makes every generated token reasoning
(`delta.reasoning`), a closed one makes it content: one server answers both kinds of request.
"""

from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SEED = 0
VOCAB_SIZE = 8192
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Plain added tokens: parsers find them in the text (hermes tool calls, deepseek_r1 reasoning).
MARKUP = ["<think>", "</think>", "<tool_call>", "</tool_call>"]

CHAT_TEMPLATE = """\
{%- set thinking = enable_thinking | default(false) -%}
{%- if tools -%}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools><|im_end|>
{% elif messages[0].role == 'system' -%}
<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- if not loop.first %}<|im_start|>system
{{ message.content }}<|im_end|>
{% endif -%}
{%- elif message.role == 'assistant' -%}
<|im_start|>assistant
<think>
{{ message.reasoning_content or message.reasoning or '' }}
</think>

{{ message.content or '' }}
{%- for call in message.tool_calls or [] %}<tool_call>
{"name": {{ call.function.name | tojson }}, "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' -%}
<|im_start|>tool
{{ message.content }}<|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
<think>
{% if not thinking %}

</think>

{% endif -%}
{%- endif -%}
"""


def corpus() -> list[str]:
    """The training text: this Python's standard library modules, in name order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [path.read_text(encoding="utf-8", errors="replace") for path in sorted(stdlib.glob("*.py"))]


def build_tokenizer() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(MARKUP), special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>",
                                   eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None,
                                   model_max_length=4096)
    fast.add_tokens(MARKUP)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-5,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, torch_dtype="float32",
    )
    return LlamaForCausalLM(config).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write the model into (created)")
    out = parser.parse_args().out
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    print(f"tiny model ({len(tokenizer)} tokens, {sum(p.numel() for p in model.parameters())} parameters) "
          f"written to {out}")


if __name__ == "__main__":
    main()
