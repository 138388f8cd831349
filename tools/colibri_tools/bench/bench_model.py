"""The benchmark's model: a random-weight transformers model of a given shape
(default: Mixtral architecture, 152 M parameters), converted to a Colibri
image and written for llama.cpp, and what a decoded token of an image reads.
Shared by colibri-bench's speed runs (bench.py) and its instruction counts
on emulated boards (bench_emulate.py)."""
from __future__ import annotations

import argparse
import pathlib

SHAPE = (("vocab", 32000), ("hidden", 512), ("layers", 8), ("heads", 8), ("kv-heads", 2),
         ("experts", 8), ("top-k", 2), ("ffn", 1152))


def hf_config(args: argparse.Namespace):
    import transformers

    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                  num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                  max_position_embeddings=max(args.prompt + args.gen + 8, 256),
                  tie_word_embeddings=False)
    if args.family == "mixtral":
        return transformers.MixtralConfig(intermediate_size=args.ffn, num_local_experts=args.experts,
                                          num_experts_per_tok=args.top_k, **common)
    return transformers.Qwen3MoeConfig(moe_intermediate_size=args.ffn, intermediate_size=args.ffn,
                                       num_experts=args.experts, num_experts_per_tok=args.top_k,
                                       head_dim=args.hidden // args.heads, **common)


def random_model(args: argparse.Namespace, work: pathlib.Path):
    """A random model of the shape asked for, saved as a checkpoint in work/hf."""
    import torch
    import transformers

    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(args)).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:
                param.normal_(0.0, param.shape[-1] ** -0.5)
    model.save_pretrained(work / "hf")
    return model


def build_model(args: argparse.Namespace, work: pathlib.Path):
    """A random model of the shape asked for, saved and converted in work."""
    from ..converter.convert import convert

    model = random_model(args, work)
    convert(work / "hf", work / "out", progress=False, quant=args.quant,
            quant_attention=args.quant is not None, quant_embeddings=args.quant is not None,
            row_groups=args.row_groups)
    return model, work / "out" / "model.bin"


def bytes_per_token(image_path: pathlib.Path) -> tuple[int, int, int]:
    """(parameters, bytes of weights one decoded token reads, vocab size),
    from the image read once (colibri_tools.image.sizes.decode_bytes_per_token)."""
    import math

    from ..image.image_reader import read_image
    from ..image.sizes import decode_bytes_per_token

    image = read_image(image_path)
    params = sum(math.prod(t.shape) for t in image.tensors)
    return params, decode_bytes_per_token(image.record, image.tensors), image.record.vocab_size


def llama_type(args: argparse.Namespace) -> str:
    from .bench_llama import LLAMA_TYPES

    return LLAMA_TYPES[args.quant] if args.quant else "F32"


def llama_model(args: argparse.Namespace, model, work: pathlib.Path):
    """(the GGUF llama-bench runs, the F32 GGUF): with --quant, the F32 one
    quantized by the peer's llama-quantize to the same bit width."""
    from .bench_llama import quantize_gguf, write_gguf

    f32 = write_gguf(model, work / "model.gguf")
    if not args.quant:
        return f32, f32
    return quantize_gguf(pathlib.Path(args.llama_bench), f32, llama_type(args)), f32


def shape_of(args: argparse.Namespace) -> dict:
    return {"family": args.family, **{k.replace("-", "_"): getattr(args, k.replace("-", "_"))
                                      for k, _ in SHAPE}, "seed": args.seed}
