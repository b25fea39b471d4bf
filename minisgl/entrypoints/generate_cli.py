"""`minisgl generate PROMPT`: run the bundled (or given) model offline and show what happened."""

from __future__ import annotations

import argparse
import sys
import time

from minisgl.server_args import ServerArgs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="answer one chat prompt offline and print the answer, token ids and timings",
        description="Answer one chat prompt offline (greedy) and print the answer, token ids and timings.",
    )
    p.add_argument("prompt", help="the user message, sent through the model's chat template")
    p.add_argument("--max-new-tokens", type=int, default=64, help="most tokens to generate (default 64)")
    ServerArgs.add_cli_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from minisgl.configs.model_config import UnsupportedModel
    from minisgl.model_loader.bundled import ModelNotFound

    server_args = ServerArgs.from_cli_args(args)
    try:
        server_args.validate()
        return _generate(args, server_args)
    except (ModelNotFound, UnsupportedModel, ValueError) as e:
        print(f"minisgl generate: error: {e}", file=sys.stderr)
        return 2


def _generate(args: argparse.Namespace, server_args: ServerArgs) -> int:
    from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model

    if server_args.max_total_tokens is None:
        server_args.max_total_tokens = 4096
    t0 = time.perf_counter()
    # a bad --model fails here, before torch, transformers or the tokenizer are loaded
    source = resolve_model(server_args.model)
    config = load_model_config(source)
    from minisgl.model_executor.model_runner import ModelRunner
    from minisgl.model_executor.static_generate import greedy_generate

    tokenizer = load_tokenizer(source)
    runner = ModelRunner(config, source, server_args)
    t_load = time.perf_counter() - t0
    prompt_ids = list(tokenizer.apply_chat_template(
        [{"role": "user", "content": args.prompt}], add_generation_prompt=True, tokenize=True,
        return_dict=False
    ))
    t1 = time.perf_counter()
    (output_ids,) = greedy_generate(runner, [prompt_ids], args.max_new_tokens, config.eos_token_ids)
    t_gen = time.perf_counter() - t1
    answer = tokenizer.decode(output_ids, skip_special_tokens=True)
    print(f"model: {source.path.name} ({runner.dtype}, {runner.device})")
    print(f"prompt: {args.prompt!r}")
    print(f"prompt token ids ({len(prompt_ids)}): {prompt_ids}")
    print(f"output token ids ({len(output_ids)}): {output_ids}")
    print(f"answer: {answer}")
    print(f"timings: load {t_load:.2f} s, generate {t_gen:.2f} s ({len(output_ids) / t_gen:.1f} tok/s)")
    return 0
