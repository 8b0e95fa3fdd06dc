"""The HuggingFace suite: transformers models built from their configs (no weights download).

Models with a language-modelling head, loss computed by the model from random token labels,
at the nvFuser announcement's sizes: ``[batch, sequence]`` of ``[64, 128]``, ``[8, 512]`` and
``[2, 1024]`` for encoders and decoders, ``[8, source 512, target 128]`` for
encoder-decoders; inference at batch 1 and 8 with sequences of 128. Position tables are
enlarged where a model's default is shorter than the sequence (weights are random anyway).

Configurations: the library's defaults (``AutoConfig.for_model``), which are the base sizes
(``bert-base``, ``roberta-base``, ``distilbert-base``, ``gpt2``, ``t5-small``,
``bart-large``, ``electra-small``), except ALBERT, whose default is xxlarge and which is
set to ``albert-base-v2``'s sizes, and Llama, whose default is 7B and which is set to
TinyLlama-1.1B's (rotary position embeddings, grouped-query attention, RMSNorm, SwiGLU). ``--quick`` uses 2-layer models of width 32.
"""
from __future__ import annotations

import functools

import torch

from ..modes import INFER_MODES, TRAIN_MODES
from ..workload import BuildContext, Case, Workload, count_parameters

#: name -> (model type, head, full-size overrides)
MODELS = {
    "bert": ("bert", "masked-lm", {}),
    "roberta": ("roberta", "masked-lm", {}),
    "distilbert": ("distilbert", "masked-lm", {}),
    "albert": ("albert", "masked-lm", {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072}),
    "gpt2": ("gpt2", "causal-lm", {}),
    "electra": ("electra", "masked-lm", {}),
    "t5": ("t5", "seq2seq-lm", {}),
    "bart": ("bart", "seq2seq-lm", {}),
    # (Llama's default config is 7B, whose AdamW state alone exceeds one GPU: TinyLlama-1.1B's sizes)
    "llama": ("llama", "causal-lm", {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
                                     "num_attention_heads": 32, "num_key_value_heads": 4}),
}

#: the checkpoint each model's default configuration has the sizes of (``torchfuse explain
#: hf:bert-base`` names a model by it)
SIZE_NAMES = {"bert": "bert-base", "roberta": "roberta-base", "distilbert": "distilbert-base",
              "albert": "albert-base-v2", "gpt2": "gpt2", "electra": "electra-small", "t5": "t5-small", "bart": "bart-large",
              "llama": "tinyllama-1.1b"}

#: settings every size needs (T5's decoder start and padding tokens, as ``t5-small`` has them;
#: some library versions leave them unset in the default config)
ALWAYS = {"t5": {"decoder_start_token_id": 0, "pad_token_id": 0}}

_ENCODER_QUICK = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
QUICK = {
    "bert": _ENCODER_QUICK,
    "roberta": _ENCODER_QUICK,
    "electra": {**_ENCODER_QUICK, "embedding_size": 32},
    "albert": {**_ENCODER_QUICK, "embedding_size": 16},
    "distilbert": {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64},
    "gpt2": {"n_embd": 32, "n_layer": 2, "n_head": 2, "bos_token_id": 127, "eos_token_id": 127},
    "t5": {"d_model": 32, "d_kv": 16, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 2},
    "bart": {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64},
    "llama": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2},
}
QUICK_VOCAB = 128

TRAIN_SIZES = [(64, 128), (8, 512), (2, 1024)]
TRAIN_SIZES_SEQ2SEQ = [(8, 512, 128)]
INFER_SIZES = [(1, 128), (8, 128)]
INFER_SIZES_SEQ2SEQ = [(1, 128, 128), (8, 128, 128)]
QUICK_SIZES = [(2, 16)]
QUICK_SIZES_SEQ2SEQ = [(2, 16, 8)]


def make_config(name: str, longest: int, quick: bool):
    """The model's config: the library's defaults (``use_cache`` and dropout as a user gets them),
    the overrides, positions for ``longest`` tokens."""
    import transformers

    model_type, _, overrides = MODELS[name]
    settings = dict(QUICK[name], vocab_size=QUICK_VOCAB) if quick else dict(overrides)
    settings.update(ALWAYS.get(name, {}))
    config = transformers.AutoConfig.for_model(model_type, **settings)
    offset = 2 if model_type == "roberta" else 0  # RoBERTa's positions start after the padding index
    for attr in ("max_position_embeddings", "n_positions"):
        if hasattr(config, attr) and getattr(config, attr) < longest + offset:
            setattr(config, attr, longest + offset)
    return config


def build(name: str, size: tuple[int, ...], ctx: BuildContext) -> Workload:
    """Model ``name`` with random weights and random tokens of ``size``."""
    import transformers

    _, head, _ = MODELS[name]
    config = make_config(name, max(size[1:]), ctx.quick)
    auto = {"masked-lm": transformers.AutoModelForMaskedLM, "causal-lm": transformers.AutoModelForCausalLM,
            "seq2seq-lm": transformers.AutoModelForSeq2SeqLM}[head]
    torch.manual_seed(ctx.seed)
    model = auto.from_config(config).to(ctx.device).train(ctx.mode.training)
    vocab = config.vocab_size
    tokens = lambda *shape: torch.randint(0, vocab, shape, device=ctx.device)  # noqa: E731
    batch, source = size[0], size[1]
    inputs = {"input_ids": tokens(batch, source)}
    target = tokens(batch, size[2]) if head == "seq2seq-lm" else inputs["input_ids"]
    if ctx.mode.training:
        inputs["labels"] = target
    elif head == "seq2seq-lm":
        inputs["decoder_input_ids"] = target
    info = {"parameters": count_parameters(model), "config": type(config).__name__,
            "attention": getattr(config, "_attn_implementation", None)}
    return Workload(model=model, inputs=inputs, loss=lambda out: out.loss, output=lambda out: out.logits, info=info)


def cases(quick: bool) -> list[Case]:
    out = []
    for name, (_, head, _) in MODELS.items():
        seq2seq = head == "seq2seq-lm"
        if quick:
            sizes = {s: TRAIN_MODES + INFER_MODES for s in (QUICK_SIZES_SEQ2SEQ if seq2seq else QUICK_SIZES)}
        else:
            sizes = {s: TRAIN_MODES for s in (TRAIN_SIZES_SEQ2SEQ if seq2seq else TRAIN_SIZES)}
            sizes.update({s: INFER_MODES for s in (INFER_SIZES_SEQ2SEQ if seq2seq else INFER_SIZES)})
        for size, modes in sizes.items():
            out.append(Case("hf", name, size, modes, functools.partial(build, name, size)))
    return out
