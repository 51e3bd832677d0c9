"""Serve an annotator export over HTTP: `hallu serve EXPORT_DIR [--host 127.0.0.1] [--port 8080]`.

    POST /v1/annotate   one row or a list of rows, in `hallu annotate`'s input shape (`source` or
                        `documents`, `response`, `question`?, `id`?; LettuceDetect's `context` and
                        `answer` are read as `documents` and `response`); answers the rows
                        `hallu annotate` writes, one per row, in order (a list for a list)
    POST /v1/report     {"name", "rows", "outputs"}: what `hallu annotate` writes beside its output for
                        those rows (the summary's markdown, the score histogram as a PNG data URL, the
                        page of highlighted rows); the page's file upload asks for it
    GET  /v1/annotator  the export's annotator.json and its model card's metadata
    GET  /health        {"status": "ok"} once the model is loaded
    GET  /              a page: paste a source and an answer, see the flagged spans highlighted
    GET  /docs          the OpenAPI page FastAPI makes

Rows of concurrent requests are annotated together, in the export's batches (`--batch-size`,
`--batch-tokens`), after a short window (`--batch-window-ms`) that lets them arrive: a row's label
and spans are the command's, its score within the tolerance contract (docs/design.md, "Resume and
batch contract"). Bad input is answered, never fatal: malformed JSON or a missing field -> 422 naming
the row and field; a body over `--max-body-bytes`, more than `--max-rows` rows, or a source past the
export's trained length -> 413 with the limit; more than `--max-queued-rows` rows waiting -> 503 with
Retry-After. A client that leaves before its rows are batched frees their place. It binds 127.0.0.1
unless told otherwise; `--api-key-env VAR` requires `Authorization: Bearer <$VAR>` on /v1/ (401
otherwise; the key is never logged). Ctrl-C or SIGTERM finishes the requests in flight, then exits.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import logging
import os
import secrets
import signal
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse
    from pydantic import BaseModel, ConfigDict
except ImportError as missing:            # an install without the serve extra
    raise SystemExit(f"hallu serve needs FastAPI and uvicorn ({missing}): pip install -e '.[serve]'") from None

from data_builders.common.logs import configure_logging
from data_builders.common.progress import quiet_libraries
from eval.annotate import Annotator, row_problem
from eval.reports.annotation_page import write_annotated_page
from eval.reports.annotation_summary import write_summary

logger = logging.getLogger(__name__)

PAGE = Path(__file__).parent / "reports" / "serve_page.html"      # every asset inline: no CDN, works offline


class Row(BaseModel):
    """One row to annotate (what `hallu annotate` reads; extra fields are kept and ignored)."""
    model_config = ConfigDict(extra="allow")
    id: str | int | None = None
    source: str | None = None
    documents: list[str] | None = None
    context: list[str] | str | None = None     # LettuceDetect's passages
    question: str | None = None
    response: str | None = None
    answer: str | None = None                   # LettuceDetect's answer
    language: str | None = None


@dataclass(frozen=True)
class ServeLimits:
    max_body_bytes: int = 8 * 1024 * 1024
    max_rows: int = 256                 # rows in one request
    max_queued_rows: int = 1024         # rows waiting for the model, all requests together
    batch_window_ms: float = 10.0       # how long the first waiting row waits for others to join its batch


class BadRequest(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def as_input_row(row: object) -> object:
    """LettuceDetect's names read as the command's: `context` -> `documents`, `answer` -> `response`."""
    if not isinstance(row, dict):
        return row
    out = dict(row)
    if "response" not in out and "answer" in out:
        out["response"] = out.pop("answer")
    if "source" not in out and "documents" not in out and "context" in out:
        context = out.pop("context")
        out["documents"] = [context] if isinstance(context, str) else context
    return out


def _json_body(body: bytes, limits: ServeLimits) -> object:
    if len(body) > limits.max_body_bytes:
        raise BadRequest(413, f"the body is {len(body):,} bytes, over the limit of {limits.max_body_bytes:,} "
                              "(--max-body-bytes)")
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(422, f"malformed JSON: {e}") from None
    return payload


def parse_rows(body: bytes, limits: ServeLimits) -> tuple[list[dict], bool]:
    """The request's rows, each checked as the command checks a line, and whether it sent one row."""
    payload = _json_body(body, limits)
    single = not isinstance(payload, list)
    rows = [as_input_row(r) for r in ([payload] if single else payload)]
    if not rows:
        raise BadRequest(422, "expected a row or a non-empty list of rows, found an empty list")
    if len(rows) > limits.max_rows:
        raise BadRequest(413, f"{len(rows):,} rows, over the limit of {limits.max_rows:,} a request (--max-rows)")
    for i, row in enumerate(rows):
        problem = row_problem(row)
        if problem:
            where = f"row {i + 1}" + (f", field '{problem[1]}'" if problem[1] else "")
            raise BadRequest(422, f"{where}: {problem[0]}")
    return rows, single


def parse_report_request(body: bytes, limits: ServeLimits) -> tuple[str, list[dict], list[dict]]:
    """The file's name, its input rows and the rows /v1/annotate answered for them, checked."""
    payload = _json_body(body, limits)
    if not isinstance(payload, dict):
        raise BadRequest(422, 'expected {"name": ..., "rows": [...], "outputs": [...]}')
    rows, outputs = payload.get("rows"), payload.get("outputs")
    for key, value in (("rows", rows), ("outputs", outputs)):
        if not isinstance(value, list) or not value or not all(isinstance(r, dict) for r in value):
            raise BadRequest(422, f"field '{key}': expected a non-empty list of objects")
    if len(rows) != len(outputs):
        raise BadRequest(422, f"{len(outputs):,} outputs for {len(rows):,} rows: expected one output a row")
    for i, (row, out) in enumerate(zip(rows, outputs)):
        response = row.get("response", row.get("answer"))
        spans = out.get("spans")
        if not isinstance(response, str) or not isinstance(spans, list) or not all(
                isinstance(s, dict) and isinstance(s.get("start"), int) and isinstance(s.get("end"), int)
                and 0 <= s["start"] <= s["end"] <= len(response) for s in spans):
            raise BadRequest(422, f"row {i + 1}: expected a 'response' and its output's 'spans' with offsets into it")
    name = Path(str(payload.get("name") or "annotated.jsonl")).name
    return name, [as_input_row(r) for r in rows], outputs


def file_report(name: str, rows: list[dict], outputs: list[dict], threshold: float | None) -> dict:
    """What `hallu annotate` writes beside `name` for these rows, made by the command's own code."""
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / name
        summary = write_summary(output, rows, outputs, threshold)
        page = write_annotated_page(output, rows, outputs).read_text(encoding="utf-8")
        png = output.with_name(output.name + ".scores.png")
        histogram = ("data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()) if png.exists() else None
    return {"name": name, "summary": summary, "histogram": histogram, "page": page}


@dataclass
class _Waiting:
    records: list[dict]
    done: asyncio.Future


@dataclass
class Batcher:
    """Rows of every waiting request, annotated together on one model thread."""
    annotator: Annotator
    limits: ServeLimits
    queued_rows: int = 0
    _queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    model_thread: ThreadPoolExecutor = field(                # the tokenizer and the model: one thread
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="model"))
    _keys: itertools.count = field(default_factory=itertools.count)

    def admit(self, n_rows: int) -> None:
        if self.queued_rows + n_rows > self.limits.max_queued_rows:
            raise BadRequest(503, f"{self.queued_rows:,} rows are waiting (--max-queued-rows "
                                  f"{self.limits.max_queued_rows:,}); try again shortly", {"Retry-After": "1"})
        self.queued_rows += n_rows

    def records(self, rows: list[dict]) -> list[dict]:
        """Schema records of the rows, keyed apart from every other request's (a row past the export's
        trained length is refused here, 413)."""
        try:
            return [self.annotator.record(row, f"row {i + 1}", f"k{next(self._keys)}") for i, row in enumerate(rows)]
        except ValueError as e:
            raise BadRequest(413, str(e)) from None

    async def annotate(self, records: list[dict]) -> list[dict]:
        waiting = _Waiting(records, asyncio.get_running_loop().create_future())
        await self._queue.put(waiting)
        return await waiting.done

    def leave(self, n_rows: int) -> None:
        self.queued_rows -= n_rows

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            await asyncio.sleep(self.limits.batch_window_ms / 1000)
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            batch = [w for w in batch if not w.done.cancelled()]          # their clients left
            if not batch:
                continue
            records = [r for w in batch for r in w.records]
            try:
                outputs = await loop.run_in_executor(self.model_thread, self.annotator.annotate_records, records)
            except Exception as e:                     # one bad batch fails its requests, not the server
                for w in batch:
                    if not w.done.done():
                        w.done.set_exception(e)
                continue
            start = 0
            for w in batch:
                if not w.done.done():
                    w.done.set_result(outputs[start:start + len(w.records)])
                start += len(w.records)


class BearerToken:
    """/v1/ requires `Authorization: Bearer <key>`. A plain ASGI middleware: Starlette's `@app.middleware("http")`
    wraps the request's receive channel, and under it `request.is_disconnected()` never saw a client leave."""

    def __init__(self, app, api_key: str):
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not secrets.compare_digest(given, self.expected):
                refused = JSONResponse({"detail": "expected the header Authorization: Bearer <key> (--api-key-env)"},
                                       status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _answer_rows(rows: list[dict], outputs: list[dict]) -> list[dict]:
    """The command's rows: a row without an id is named by its place in the request (r0, r1, ...)."""
    return [out | {"id": row["id"] if row.get("id") is not None else f"r{i}"}
            for i, (row, out) in enumerate(zip(rows, outputs))]


def _card_metadata(export: Path) -> dict:
    from huggingface_hub import ModelCard

    card = export / "README.md"
    return ModelCard.load(card).data.to_dict() if card.exists() else {}


def build_app(annotator: Annotator, export: Path, limits: ServeLimits = ServeLimits(),
              api_key: str | None = None) -> FastAPI:
    batcher = Batcher(annotator, limits)
    described = {"annotator": asdict(annotator.spec), "card": _card_metadata(export), "export": export.name}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        task = asyncio.create_task(batcher.run())
        yield
        task.cancel()

    app = FastAPI(title="hallucination annotator", lifespan=lifespan,
                  description=f"The annotator exported in {export.name}, as `hallu annotate` applies it.")

    if api_key:
        app.add_middleware(BearerToken, api_key=api_key)

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, e: BadRequest):
        return JSONResponse({"detail": e.message}, status_code=e.status, headers=e.headers)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> str:
        return PAGE.read_text(encoding="utf-8")

    @app.post("/v1/report")
    async def report(request: Request) -> dict:
        name, rows, outputs = parse_report_request(await request.body(), limits)
        return await asyncio.get_running_loop().run_in_executor(      # matplotlib: on the one model thread
            batcher.model_thread, file_report, name, rows, outputs, annotator.spec.threshold)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "queued_rows": batcher.queued_rows}

    @app.get("/v1/annotator")
    async def describe() -> dict:
        return described

    @app.post("/v1/annotate", openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"anyOf": [Row.model_json_schema(), {"type": "array", "items": Row.model_json_schema()}]}}}}})
    async def annotate(request: Request):
        rows, single = parse_rows(await request.body(), limits)
        records = await asyncio.get_running_loop().run_in_executor(batcher.model_thread, batcher.records, rows)
        batcher.admit(len(rows))
        try:
            pending = asyncio.ensure_future(batcher.annotate(records))
            while not pending.done():
                await asyncio.wait({pending}, timeout=0.25)
                if not pending.done() and await request.is_disconnected():
                    pending.cancel()
                    return JSONResponse({"detail": "the client left"}, status_code=499)
            outputs = _answer_rows(rows, pending.result())
        finally:
            batcher.leave(len(rows))
        return outputs[0] if single else outputs

    return app


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="hallu serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="an annotator export directory (annotator.json beside its weights)")
    p.add_argument("--host", default="127.0.0.1", help="the address to bind (default: this machine only)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--api-key-env", help="the environment variable holding the bearer token /v1/ requires")
    p.add_argument("--batch-size", type=int, default=8, help="rows the model reads together")
    p.add_argument("--batch-tokens", type=int, default=16384, help="tokens the model reads together")
    p.add_argument("--dtype", default="auto", help="as model.dtype (auto: fp32 on a CPU)")
    defaults = ServeLimits()
    for name in ("max_body_bytes", "max_rows", "max_queued_rows", "batch_window_ms"):
        p.add_argument(f"--{name.replace('_', '-')}", type=type(getattr(defaults, name)),
                       default=getattr(defaults, name))
    args = p.parse_args(argv)
    configure_logging()
    quiet_libraries(verbose=False)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            p.error(f"--api-key-env {args.api_key_env}: the variable is unset or empty")
    import uvicorn

    annotator = Annotator.load(args.model, batch_size=args.batch_size, batch_tokens=args.batch_tokens,
                               dtype=args.dtype)
    limits = ServeLimits(args.max_body_bytes, args.max_rows, args.max_queued_rows, args.batch_window_ms)
    app = build_app(annotator, Path(args.model), limits, api_key)
    for stop in (signal.SIGINT, signal.SIGTERM):      # uvicorn re-raises the signal once it has drained: a clean
        signal.signal(stop, lambda *_: None)          # stop then exits 0, not killed by the signal's default
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", timeout_graceful_shutdown=60)
    logger.info("hallu serve: stopped after finishing the requests in flight")


if __name__ == "__main__":
    main()
