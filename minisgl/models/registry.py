"""Architecture name -> model class."""

from minisgl.models.llama import LlamaForCausalLM

# Qwen2 (attention bias) and Qwen3 (q/k norms) differ from Llama only by flags in ModelConfig.
ModelRegistry = {
    "LlamaForCausalLM": LlamaForCausalLM,
    "Qwen2ForCausalLM": LlamaForCausalLM,
    "Qwen3ForCausalLM": LlamaForCausalLM,
}
