"""Structured output: a request's grammar (json_schema, regex or ebnf) compiled off the scheduler's loop, its
vocabulary mask applied to that request's logits row before sampling, its matcher advanced by each token the
request keeps (SGLang's python/sglang/srt/constrained/)."""
