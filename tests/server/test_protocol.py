"""The OpenAI request/response models: what parses, what is rejected and how the error names the field."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from minisgl.server.errors import ErrorResponse, format_validation_error
from minisgl.server.protocol import GenerateReqInput, UsageInfo, to_sampling_params_dict
from minisgl.server.protocol_chat import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatCompletionResponseChoice,
    ChatMessage,
)
from minisgl.server.protocol_completion import CompletionRequest

USER = [{"role": "user", "content": "hi"}]


def rejected(model, body: dict | str) -> ErrorResponse:
    with pytest.raises(ValidationError) as info:
        if isinstance(body, str):
            model.model_validate_json(body)
        else:
            model.model_validate(body)
    return format_validation_error(info.value)


def test_valid_chat_request_parses():
    req = ChatCompletionRequest.model_validate(
        {
            "model": "smollm2",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "you"}],
                },
            ],
            "max_tokens": 16,
            "temperature": 0,
            "top_p": 0.9,
            "top_k": 20,
            "min_p": 0.05,
            "seed": 7,
            "stop": "\n",
            "stream": True,
            "stream_options": {"include_usage": True},
            "user": "me",
            "ignore_eos": False,
            "logit_bias": None,  # a refused field sent as null asks for nothing
            "store": False,
            "bootstrap_room": 7,  # SGLang's router adds it on the way to a worker
        }
    )
    assert req.messages[1].text() == "Hi you"
    assert req.temperature == 0.0 and req.stream and req.stream_options.include_usage


def test_valid_json_body_parses():
    req = ChatCompletionRequest.model_validate_json(json.dumps({"messages": USER, "temperature": 1}))
    assert req.temperature == 1.0 and req.n == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": [{"role": "bot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0].type"),
        ({"messages": USER, "temperature": "0.5"}, "temperature"),
        ({"messages": USER, "temperature": -1}, "temperature"),
        ({"messages": USER, "top_p": 0}, "top_p"),
        ({"messages": USER, "top_k": 0}, "top_k"),
        ({"messages": USER, "min_p": 2}, "min_p"),
        ({"messages": USER, "max_tokens": 1.5}, "max_tokens"),
        ({"messages": USER, "max_completion_tokens": 0}, "max_completion_tokens"),
        ({"messages": USER, "seed": -1}, "seed"),
        ({"messages": USER, "stop": 5}, "stop"),
        ({"messages": USER, "stop": ["ok", 3]}, "stop[1]"),
        ({"messages": USER, "stop": ["ok", ""]}, "stop[1]"),
        ({"messages": USER, "stream": "yes"}, "stream"),
        ({"messages": USER, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
        ({"messages": USER, "n": 17}, "n"),
        ({"messages": USER, "n": 0}, "n"),
        ({"messages": USER, "presence_penalty": 2.5}, "presence_penalty"),
        ({"messages": USER, "frequency_penalty": -3}, "frequency_penalty"),
        ({"messages": USER, "repetition_penalty": 0}, "repetition_penalty"),
        ({"messages": USER, "min_tokens": -1}, "min_tokens"),
        ({"messages": USER, "ignore_eos": 1}, "ignore_eos"),
    ],
)
def test_invalid_chat_request_names_the_field(body, param):
    err = rejected(ChatCompletionRequest, body)
    assert err.error.param == param
    assert err.error.type == "invalid_request_error"
    assert err.error.message.startswith(f"{param}: ")
    assert set(json.loads(err.model_dump_json())) == {"error"}
    assert set(err.model_dump()["error"]) == {"message", "type", "param", "code"}


def test_union_errors_read_as_one_message():
    assert rejected(ChatCompletionRequest, {"messages": USER, "stop": 5}).error.message == (
        "stop: Input should be a valid string or a valid list"
    )
    too_many = rejected(ChatCompletionRequest, {"messages": USER, "stop": ["x"] * 17}).error.message
    assert too_many.startswith("stop: List should have at most 16 items")


def test_n_above_sixteen_is_rejected_clearly():
    err = rejected(ChatCompletionRequest, {"messages": USER, "n": 17})
    assert err.error.message == "n: Input should be less than or equal to 16"
    assert ChatCompletionRequest.model_validate({"messages": USER, "n": 16}).n == 16


def test_body_that_is_not_json_or_not_an_object():
    assert rejected(ChatCompletionRequest, "{not json").error.param is None
    assert rejected(ChatCompletionRequest, "[]").error.message == "Input should be an object"


def test_max_completion_tokens_wins_over_max_tokens():
    req = ChatCompletionRequest(messages=USER, max_tokens=100, max_completion_tokens=5)
    assert to_sampling_params_dict(req)["max_new_tokens"] == 5
    req = ChatCompletionRequest(messages=USER, max_tokens=100)
    assert to_sampling_params_dict(req)["max_new_tokens"] == 100


def test_sampling_dict_maps_fields_and_leaves_out_unset_ones():
    # no max_tokens: None, "until the context is full", not the engine's default of 128
    assert to_sampling_params_dict(ChatCompletionRequest(messages=USER)) == {"max_new_tokens": None}
    req = ChatCompletionRequest.model_validate(
        {
            "messages": USER,
            "max_tokens": 8,
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 40,
            "min_p": 0.1,
            "seed": 3,
            "stop": "END",
            "ignore_eos": True,
            "skip_special_tokens": False,
            "stream": True,
        }
    )
    assert to_sampling_params_dict(req) == {
        "max_new_tokens": 8,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
        "min_p": 0.1,
        "seed": 3,
        "stop": ["END"],
        "ignore_eos": True,
        "skip_special_tokens": False,
    }


def test_completion_prompt_forms():
    assert CompletionRequest(prompt="Once upon").prompt == "Once upon"
    assert CompletionRequest(prompt=[1, 2, 3]).prompt == [1, 2, 3]
    assert CompletionRequest(prompt=["only one"]).prompt == "only one"
    assert to_sampling_params_dict(CompletionRequest(prompt="x", max_tokens=4, stop=["a", "b"])) == {
        "max_new_tokens": 4,
        "stop": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"prompt": ["a"] * 65}, "prompt", "at most 64 in one request"),
        ({"prompt": ["a", ""]}, "prompt", "a prompt in the list is empty"),
        ({"prompt": ""}, "prompt", "must not be empty"),
        ({"prompt": []}, "prompt", "must not be empty"),
        ({"prompt": [1, -2]}, "prompt[1]", "greater than or equal to 0"),
        ({"prompt": 5}, "prompt", "valid string"),
        ({}, "prompt", "Field required"),
    ],
)
def test_invalid_completion_request(body, param, says):
    err = rejected(CompletionRequest, body)
    assert err.error.param == param and says in err.error.message


def test_generate_req_input_needs_exactly_one_input():
    a, b = GenerateReqInput(text="hi"), GenerateReqInput(input_ids=[1, 2], sampling_params={"top_k": 1})
    assert len(a.rid) == 32 and a.rid != b.rid
    assert GenerateReqInput(rid="r1", text="x").rid == "r1"
    for body in ({}, {"text": "x", "input_ids": [1]}):
        err = rejected(GenerateReqInput, body)
        assert err.error.param is None and "exactly one" in err.error.message


def test_response_shapes():
    resp = ChatCompletionResponse(
        model="m",
        choices=[ChatCompletionResponseChoice(message=ChatMessage(content="hi"), finish_reason="stop")],
        usage=UsageInfo.of(prompt_tokens=5, completion_tokens=2, cached_tokens=3),
    )
    body = resp.model_dump()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "total_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 3},
    }
    assert ErrorResponse.make("boom", param="x").model_dump() == {
        "error": {"message": "boom", "type": "invalid_request_error", "param": "x", "code": None}
    }


def test_penalties_and_grammars_reach_the_sampling_params():
    req = ChatCompletionRequest.model_validate({
        "messages": USER, "frequency_penalty": 0.5, "presence_penalty": -0.5, "repetition_penalty": 1.1,
        "min_tokens": 3, "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "array"}}}})
    params = to_sampling_params_dict(req)
    assert params["frequency_penalty"] == 0.5 and params["presence_penalty"] == -0.5
    assert params["repetition_penalty"] == 1.1 and params["min_new_tokens"] == 3
    assert params["json_schema"] == '{"type": "array"}'
    plain = to_sampling_params_dict(ChatCompletionRequest.model_validate({"messages": USER}))
    assert not {"frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
                "json_schema", "regex", "ebnf"} & set(plain)
