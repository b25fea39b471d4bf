"""`minisgl router`: N `minisgl serve` workers behind SGLang's own router (sglang-router), on one machine.

    minisgl router --workers 2 --policy cache_aware [serve flags, e.g. --dtype float32] [-- router flags]

Each worker is a whole `minisgl serve` on a free port; the router is `python -m sglang_router.launch_router
--worker-urls ...`, run by the Python of its own environment (`make router-env` makes .venv-router;
sglang-router is never a dependency of minisgl). Across machines: start `minisgl serve --host 0.0.0.0` on each
machine and `minisgl router --worker-urls http://a:30000 http://b:30000` (or the router itself) anywhere.
The process handling is in router_launcher.py.
"""

from __future__ import annotations

import argparse
import sys

from minisgl.server_args import ServerArgs

POLICIES = ("cache_aware", "round_robin", "power_of_two", "random")
LOG_LEVELS = ("debug", "info", "warn", "error")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "router",
        help="run N `minisgl serve` workers behind SGLang's router (sglang-router)",
        description="Start N `minisgl serve` workers on free ports (or use --worker-urls), wait until they "
                    "are ready, and put SGLang's router in front of them: clients talk to the router's port "
                    "only. Ctrl-C or SIGTERM stops the router and every worker. Engine flags (e.g. --dtype, "
                    "--max-total-tokens) go to every worker; flags after `--` go to the router "
                    "(python -m sglang_router.launch_router --help lists them).",
    )
    g = p.add_argument_group("router")
    g.add_argument("--workers", type=_count, default=None, metavar="N",
                   help="how many `minisgl serve` workers to start on this machine (default 2; "
                        "not with --worker-urls)")
    g.add_argument("--worker-urls", nargs="+", default=None, metavar="URL",
                   help="route to workers that already run (e.g. on other machines) instead of starting any")
    g.add_argument("--pd-disaggregation", action="store_true",
                   help="start one prefill server (--disaggregation-mode prefill) and one decode server "
                        "(--disaggregation-mode decode) and the router in its PD mode (sglang-router "
                        "--pd-disaggregation): each request is prefilled on one and decoded on the other; "
                        "not with --workers or --worker-urls")
    g.add_argument("--policy", default="cache_aware", choices=POLICIES,
                   help="how the router picks a worker (SGLang's router policies; default cache_aware; "
                        "power_of_two needs at least 2 workers)")
    g.add_argument("--host", default="127.0.0.1", help="address the router listens on (default 127.0.0.1)")
    g.add_argument("--port", type=_port, default=30000,
                   help="port the router listens on; 0 picks a free one, named on the ready line "
                        "(default 30000)")
    g.add_argument("--router-python", default=None, metavar="PATH",
                   help="the Python that has sglang-router installed (default: .venv-router/bin/python in "
                        "the working folder or the minisgl checkout, made by `make router-env`)")
    g.add_argument("--router-log-level", default="info", choices=LOG_LEVELS, help="the router's log level")
    g.add_argument("--startup-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for every worker and the router to be ready (default 600)")
    g = p.add_argument_group("every worker (as in `minisgl serve`)")
    g.add_argument("--api-key", default=None,
                   help="every worker wants 'Authorization: Bearer KEY' (as `minisgl serve --api-key`); the "
                        "router is given the same key (its --api-key): it sends it to the workers and wants "
                        "it from its clients")
    g.add_argument("--served-model-name", default=None,
                   help="the model id clients send (default: the model's name)")
    g.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error", "critical"),
                   help="the workers' log level")
    g.add_argument("--enable-metrics", action="store_true", help="serve GET /metrics on every worker "
                   "(the router's /engine_metrics gathers them)")
    g.add_argument("--trace", dest="trace_dir", nargs="?", const="", default=None, metavar="DIR",
                   help="trace every worker, each into DIR/worker-<i> (default DIR: "
                        "./minisgl-trace-YYYYmmdd-HHMMSS)")
    g.add_argument("--trace-level", type=int, default=2, choices=[1, 2, 3], help="the workers' trace level")
    ServerArgs.add_cli_args(p)
    p.add_argument("router_args", nargs=argparse.REMAINDER,
                   help="after `--`: flags for the router itself (e.g. -- --cache-threshold 0.5)")
    p.set_defaults(func=run)


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {value}")
    return value


def serve_argv(args: argparse.Namespace) -> list[str]:
    """The engine flags the user gave, as `minisgl serve` flags (only those that differ from the default)."""
    probe = argparse.ArgumentParser(add_help=False)
    ServerArgs.add_cli_args(probe)
    argv: list[str] = []
    for action in probe._actions:
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        flag = action.option_strings[0]
        if isinstance(action, argparse._StoreTrueAction):
            argv.append(flag)
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    for name, flag in (("api_key", "--api-key"), ("served_model_name", "--served-model-name"),
                       ("log_level", "--log-level"), ("trace_level", "--trace-level")):
        argv += [flag, str(getattr(args, name))] if getattr(args, name) is not None else []
    if args.enable_metrics:
        argv.append("--enable-metrics")
    return argv


def run(args: argparse.Namespace) -> int:
    from minisgl.entrypoints.router_launcher import RouterLauncher, RouterLaunchError, find_router_python

    router_args = [a for a in args.router_args if a != "--"] if args.router_args else []
    try:
        if args.worker_urls and args.workers is not None:
            raise RouterLaunchError("give --workers (start workers here) or --worker-urls (use running "
                                    "ones), not both")
        if args.pd_disaggregation and (args.worker_urls or args.workers is not None):
            raise RouterLaunchError("--pd-disaggregation starts its own prefill and decode server: leave out "
                                    "--workers and --worker-urls")
        if args.pd_disaggregation and args.disaggregation_mode != "null":
            raise RouterLaunchError("--pd-disaggregation gives each server its --disaggregation-mode: leave "
                                    "it out")
        workers = 0 if args.worker_urls else (args.workers or 2)
        if args.policy == "power_of_two" and max(workers, len(args.worker_urls or ())) < 2:
            raise RouterLaunchError("--policy power_of_two needs at least 2 workers")
        ServerArgs.from_cli_args(args).validate()  # a bad engine flag fails here, before any process starts
        launcher = RouterLauncher(
            router_python=find_router_python(args.router_python), num_workers=workers,
            worker_urls=list(args.worker_urls or ()), serve_argv=serve_argv(args), trace_dir=args.trace_dir,
            policy=args.policy, host=args.host, port=args.port, router_log_level=args.router_log_level,
            router_args=router_args + (["--api-key", args.api_key] if args.api_key else []),
            startup_timeout=args.startup_timeout, pd_disaggregation=args.pd_disaggregation,
        )
    except (RouterLaunchError, ValueError) as e:
        print(f"minisgl router: error: {e}", file=sys.stderr)
        return 2
    return launcher.run()
