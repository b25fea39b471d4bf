"""Tool calls in the model's text (SGLang's python/sglang/srt/function_call/): a detector per format finds
the calls, whole (detect_and_parse) or piece by piece as a stream arrives (parse_streaming_increment), and
FunctionCallParser picks the detector --tool-call-parser names."""
