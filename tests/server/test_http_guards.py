"""The HTTP server's limits and guards (minisgl/server/http_guards.py), through real HTTP: a body over the
limit gets 413 and a body that is not JSON 415; bad JSON of any kind gets a 4xx on every endpoint; no error
closes a keep-alive connection; a large prompt is tokenized off the event loop, so /health and running
streams go on meanwhile; CORS headers only for --allowed-origins; GET /v1/models/{id}.

Most tests use the session's server. What needs other flags (allowed origins, a small body limit) or a
route that fails uses the real app in this process, with no engine behind it: starting a second
`minisgl serve` would cost more than all these tests together.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import httpx
import openai
import pytest
import uvicorn

from minisgl.server.http_server import create_app
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.tokenizer_manager import EngineLimits, TokenizerManager
from tests.server.conftest import API_KEY, AUTH, wait_drained

JSON = {"content-type": "application/json"}
DEFAULT_LIMIT = 4 * 1024 * 1024
POST_JSON_ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/generate", "/abort_request"]
ALL_POST_ENDPOINTS = [*POST_JSON_ENDPOINTS, "/flush_cache"]
DEEP = b"[" * 100_000 + b"]" * 100_000
WHOLE_BAD_BODIES = {  # each gets a 4xx on every POST endpoint
    "deep nesting": DEEP,
    "an array": b'[{"rid": "x", "text": "hi"}]',
    "a string": b'"hi"',
}
BAD_VALUES = {  # put into the field each endpoint reads, so the 400 is about the value, not an unknown field
    "deep nesting in a field": DEEP,
    "lone surrogate": b'"\\ud800"',
    "invalid UTF-8": b'"\xff\xfe\xc3"',
    "a wrong type": b"5",
}
FIELD_OF = {
    "/v1/chat/completions": lambda v: b'{"messages": [{"role": "user", "content": ' + v + b"}]}",
    "/v1/completions": lambda v: b'{"prompt": ' + v + b"}",
    "/generate": lambda v: b'{"text": ' + v + b"}",
    "/abort_request": lambda v: b'{"rid": ' + v + b"}",
    "/flush_cache": lambda v: b'{"rid": ' + v + b"}",  # it takes no field at all
}
BAD_BODIES = {**WHOLE_BAD_BODIES, **{name: None for name in BAD_VALUES}}


def bad_body(path: str, name: str) -> bytes:
    return WHOLE_BAD_BODIES[name] if name in WHOLE_BAD_BODIES else FIELD_OF[path](BAD_VALUES[name])


def local_port(resp: httpx.Response) -> int:
    """The client's side of the connection the response came on: the same port means the same connection."""
    return resp.extensions["network_stream"].get_extra_info("client_addr")[1]


def assert_error(resp: httpx.Response, status: int, code: str | None = None) -> None:
    assert resp.status_code == status, resp.text[:500]
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code is not None:
        assert error["code"] == code


def assert_connection_kept(c: httpx.Client, after: httpx.Response) -> None:
    good = c.get("/health")
    assert good.status_code == 200
    assert local_port(good) == local_port(after), "the error closed the keep-alive connection"


@pytest.fixture(scope="module")
def conn(server):
    """One keep-alive connection (a pool of one) for a whole module's worth of requests."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120, limits=limits) as c:
        yield c


# ---- bad input: always a 4xx, and the connection stays -------------------------------------------
@pytest.mark.parametrize("path", ALL_POST_ENDPOINTS)
@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_json_gets_4xx_and_keeps_the_connection(conn, path, name):
    resp = conn.post(path, content=bad_body(path, name), headers=JSON)
    assert_error(resp, 400)
    assert_connection_kept(conn, resp)


@pytest.mark.parametrize("path", POST_JSON_ENDPOINTS)
@pytest.mark.parametrize("content_type,body", [
    ("text/plain", '{"rid": "x", "text": "hi"}'),
    ("application/x-www-form-urlencoded", "rid=x&text=hi"),
    ("multipart/form-data; boundary=b", '--b\r\nContent-Disposition: form-data; name="rid"\r\n\r\nx\r\n--b--'),
    (None, '{"rid": "x", "text": "hi"}'),
], ids=["text", "form", "multipart", "none"])
def test_a_body_that_is_not_json_gets_415(conn, path, content_type, body):
    headers = {"content-type": content_type} if content_type else {}
    resp = conn.post(path, content=body.encode(), headers=headers)
    assert_error(resp, 415, "unsupported_media_type")
    assert_connection_kept(conn, resp)


def test_json_with_a_charset_is_served_and_flush_cache_takes_no_body(conn):
    body = {"rid": "guards-charset", "text": "Hi", "sampling_params": {"max_new_tokens": 1}}
    resp = conn.post("/generate", content=json.dumps(body), headers={"content-type": "Application/JSON; charset=utf-8"})
    assert resp.status_code == 200, resp.text
    aborted = conn.post("/abort_request", content=json.dumps({"rid": "guards-charset"}),
                        headers={"content-type": "application/json;charset=UTF-8"})
    assert aborted.json() == {"rid": "guards-charset", "found": False}  # it had finished
    wait_drained(conn)
    assert conn.post("/flush_cache").json()["success"] is True  # no body, no content type: fine
    assert conn.post("/flush_cache", json={}).json()["success"] is True
    refused = conn.post("/flush_cache", json={"everything": True})  # it takes no field: one is named, not ignored
    assert_error(refused, 400)
    assert refused.json()["error"]["param"] == "everything"
    assert_error(conn.post("/flush_cache", data={"a": "b"}), 415)  # a web form may not flush it


def test_a_body_over_the_limit_gets_413_told_or_counted(conn):
    big = b"x" * (20 * 1024 * 1024)
    told = conn.post("/v1/chat/completions", content=big, headers=JSON)  # Content-Length: 20 MB
    assert_error(told, 413, "request_too_large")
    assert str(len(big)) in told.json()["error"]["message"]
    assert_connection_kept(conn, told)

    def chunks():  # no Content-Length: the server counts while reading and stops at the limit
        for _ in range(20):
            yield big[: 1024 * 1024]

    counted = conn.post("/generate", content=chunks(), headers=JSON)
    assert_error(counted, 413, "request_too_large")
    assert_connection_kept(conn, counted)
    under = conn.post("/generate", content=b'{"text": "' + b"a" * 1000 + b'"', headers=JSON)
    assert_error(under, 400)  # under the limit, the body is parsed (and this one is cut short)


# ---- one large request stalls nobody ---------------------------------------------------------------
def test_a_large_prompt_stalls_neither_health_nor_a_running_stream(server, http):
    """A 2 MB prompt (400k tokens) takes the tokenizer a second or more, and is then refused as far too
    long. Meanwhile a 20 MB body is refused, /health answers, and a stream that was running keeps getting
    tokens. (Before, the tokenizer ran on the event loop: /health and the stream waited for it.)"""
    events: list[tuple[float, str]] = []  # (time, what), appended from several threads
    stop = threading.Event()
    first_token = threading.Event()
    stream_body = {"rid": "guards-stream", "text": "Once upon a time", "stream": True,
                   "sampling_params": {"max_new_tokens": 900, "ignore_eos": True, "temperature": 0}}

    def read_stream():
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as c, \
                c.stream("POST", "/generate", json=stream_body) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    events.append((time.monotonic(), "token"))
                    first_token.set()
                if stop.is_set():
                    return  # leaving closes the stream; the server aborts the request

    def post(name: str, **kwargs):
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as c:
            resp = c.post("/generate", headers=JSON, **kwargs)
            events.append((time.monotonic(), f"{name} {resp.status_code}"))

    reader = threading.Thread(target=read_stream)
    reader.start()
    assert first_token.wait(60)
    prompt = json.dumps({"text": "word " * 400_000, "sampling_params": {"max_new_tokens": 1}}).encode()
    large = threading.Thread(target=post, args=("large",), kwargs={"content": prompt})
    huge = threading.Thread(target=post, args=("huge",), kwargs={"content": b"x" * (20 * 1024 * 1024)})
    large.start()
    huge.start()
    time.sleep(0.1)  # the large prompt is being tokenized by now
    health_sent = time.monotonic()
    assert http.get("/health").status_code == 200
    events.append((time.monotonic(), "health 200"))
    large.join(120)
    huge.join(120)
    stop.set()
    reader.join(120)
    wait_drained(http)

    when = {what: t for t, what in events if what != "token"}
    assert set(when) == {"large 400", "huge 413", "health 200"}, events
    assert health_sent < when["large 400"], "the large prompt was done before /health was asked: make it larger"
    assert when["health 200"] < when["large 400"], "/health waited for the large prompt's tokenizer"
    assert when["huge 413"] < when["large 400"]
    during = [t for t, what in events if what == "token" and health_sent < t < when["large 400"]]
    assert during, "the running stream got no token while the large prompt was being tokenized"


# ---- CORS ------------------------------------------------------------------------------------------
def test_no_cors_headers_by_default(conn):
    origin = {"Origin": "http://some-page.example"}
    assert "access-control-allow-origin" not in conn.get("/v1/models", headers=origin).headers
    preflight = conn.options("/v1/chat/completions", headers={
        **origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code >= 400
    assert not any(name.startswith("access-control-") for name in preflight.headers)


@pytest.fixture(scope="module")
def app_url():
    """The real app, created as `minisgl serve --max-request-body-bytes 2000 --allowed-origins ...` would
    create it, served by uvicorn on a thread of this process: the guards need no engine, so none is started
    (its TokenizerManager's sockets lead nowhere). One route is added that fails, to see a 500."""
    args = HttpServerArgs.from_cli_args(_serve_parser().parse_args([
        "--max-request-body-bytes", "2000", "--allowed-origins", "http://allowed.example", "http://also.example"]))
    port_args = PortArgs.init_new()
    tm = TokenizerManager(port_args, tokenizer=None, limits=EngineLimits(64, 256, 64, 1000))
    app = create_app(tm, "tiny", None, {}, args.max_request_body_bytes, args.allowed_origins)

    async def fail() -> None:
        raise KeyError("a bug")

    app.add_api_route("/fail", fail, methods=["GET"])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    tm.close()
    port_args.remove()


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    HttpServerArgs.add_cli_args(parser)
    return parser


def test_allowed_origins_get_cors_and_others_do_not(app_url):
    with httpx.Client(base_url=app_url, timeout=60) as c:
        def preflight(origin: str) -> httpx.Response:
            return c.options("/v1/chat/completions", headers={
                "Origin": origin, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type"})

        granted = preflight("http://allowed.example")
        assert granted.status_code == 200
        assert granted.headers["access-control-allow-origin"] == "http://allowed.example"
        refused = preflight("http://other.example")
        assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
        got = c.get("/v1/models", headers={"Origin": "http://also.example"})
        assert got.headers["access-control-allow-origin"] == "http://also.example"


def test_the_body_limit_flag(app_url):
    with httpx.Client(base_url=app_url, timeout=60) as c:
        assert_error(c.post("/abort_request", json={"rid": "a" * 2000}), 413, "request_too_large")
        assert c.post("/abort_request", json={"rid": "a" * 1900}).json()["found"] is False


def test_an_internal_error_is_a_500_in_openai_format_and_keeps_the_connection(app_url):
    with httpx.Client(base_url=app_url, timeout=60) as c:
        failed = c.get("/fail")
        assert_error(failed, 500)
        assert failed.json()["error"]["type"] == "server_error" and "KeyError" in failed.text
        good = c.get("/v1/models")
        assert good.status_code == 200 and local_port(good) == local_port(failed)


# ---- GET /v1/models/{id} -----------------------------------------------------------------------------
def test_models_retrieve_with_the_openai_client(server, model):
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=60)
    card = client.models.retrieve(model)
    assert card.id == model and card.object == "model"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("gpt-4o")
    assert info.value.code == "model_not_found"
    with httpx.Client(base_url=server.url, timeout=60) as anon:
        assert_error(anon.get(f"/v1/models/{model}"), 401)
