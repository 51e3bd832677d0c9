"""A served model as the judge (`eval.backend=openai`): the harness's chat prompts go to any
OpenAI-compatible endpoint, a bounded pool of requests at a time (with `eval.judge.completions` the prompt
text this process renders goes to /v1/completions instead).

The `openai` client retries 408 / 429 / 5xx answers, timeouts and dropped connections with
exponential backoff (`eval.judge.max_retries`). Every answer is appended to a cache on disk as
soon as it arrives, keyed by (model, messages, settings), so a run that is stopped or loses its
server continues with the same command and sends no request twice. The API key is read from the
environment variable `eval.judge.api_key_env` and never written anywhere.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from configs.schema import JudgeConfig
from data_builders.common.cache_dir import cache_root
from data_builders.common.progress import progress as progress_of
from data_builders.model_inputs.collate import prompt_text
from data_builders.model_inputs.prompts import render_messages
from data_builders.records import read_jsonl_to_append
from eval.backends.backend import Row, Write, output_rows

NO_KEY = "none"        # what a server without authentication is sent (the client insists on a key)


Prompt = list[dict] | str     # chat messages, or the prompt as this process renders it (completions)


class JudgeError(ValueError):
    """One line a user can act on: the endpoint, the model name or the key (a ValueError, so that the
    entry points report it as a user's error: one line, no traceback)."""


@dataclass
class JudgeUsage:
    requests: int = 0               # sent to the endpoint by this run
    cached: int = 0                 # answered from the cache
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def line(self, config: JudgeConfig) -> str:
        rows = self.requests + self.cached
        rate = f"{rows / self.seconds:.2f} rows/s, " if self.seconds else ""
        tokens = self.prompt_tokens + self.completion_tokens
        speed = f"{tokens / self.seconds:.0f} tokens/s, " if self.seconds else ""
        text = (f"judge {config.model} at {config.base_url}: {self.requests} requests ({self.cached} answered from "
                f"the cache), {self.prompt_tokens} prompt + {self.completion_tokens} completion tokens, {rate}{speed}"
                f"{self.seconds:.1f} s")
        if config.price_in is not None and config.price_out is not None:
            cost = (self.prompt_tokens * config.price_in + self.completion_tokens * config.price_out) / 1e6
            text += f", cost {cost:.4f} at {config.price_in} / {config.price_out} per million tokens"
        return text


def api_key(config: JudgeConfig) -> str:
    if not config.api_key_env:
        return NO_KEY
    key = os.environ.get(config.api_key_env)
    if not key:
        raise JudgeError(f"eval.judge.api_key_env={config.api_key_env}: the environment variable {config.api_key_env} "
                         "is not set; export it with the endpoint's API key")
    return key


class Judge:
    """Answers to chat prompts from `config.model` at `config.base_url`, in prompt order."""

    def __init__(self, config: JudgeConfig | None, max_tokens: int):
        if config is None:
            raise JudgeError("backend=openai needs the endpoint: eval.judge.* (eval/run.py) or judge.* (eval.annotate)")
        if not config.base_url or not config.model:
            raise JudgeError("eval.backend=openai needs eval.judge.base_url (e.g. http://127.0.0.1:8000/v1) and "
                             f"eval.judge.model (the name the endpoint serves); found {config.base_url!r}, "
                             f"{config.model!r}")
        if config.concurrency < 1:
            raise JudgeError(f"eval.judge.concurrency={config.concurrency}: expected at least 1")
        if config.completions and config.system_prompt:
            raise JudgeError("eval.judge.system_prompt is a chat message; with eval.judge.completions=true the prompt "
                             "goes as this process renders it: set one of them")
        from openai import OpenAI

        self.config, self.max_tokens = config, max_tokens
        for name in ("httpx", "httpx2"):    # not a log line per request (Hydra logs INFO); openai uses either
            logging.getLogger(name).setLevel(logging.WARNING)
        self.client = OpenAI(base_url=config.base_url, api_key=api_key(config), max_retries=config.max_retries,
                             timeout=config.timeout_s)
        self.usage = JudgeUsage()
        self.cache_path = cache_file(config)
        self.cache = {row["key"]: row for row in read_jsonl_to_append(self.cache_path)}
        self._lock = threading.Lock()

    def settings(self) -> dict:
        return {"model": self.config.model, "temperature": self.config.temperature, "max_tokens": self.max_tokens}

    def conversation(self, prompt: Prompt) -> Prompt:
        if isinstance(prompt, str):          # eval.judge.completions: the rendered prompt, as it is
            return prompt
        system = [{"role": "system", "content": self.config.system_prompt}] if self.config.system_prompt else []
        return system + list(prompt)

    def key(self, conversation: Prompt) -> str:
        what = {"prompt": conversation} if isinstance(conversation, str) else {"messages": conversation}
        text = json.dumps({**what, **self.settings()}, ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def answers(self, prompts: list[Prompt], progress: bool = False,
                on_answer: Callable[[int, str], None] | None = None) -> list[str]:
        """The answer to each prompt (chat messages, or a rendered prompt for /v1/completions), from the cache
        where it is there."""
        conversations = [self.conversation(m) for m in prompts]
        keys = [self.key(c) for c in conversations]
        out: dict[int, str] = {}
        start = time.perf_counter()
        with progress_of(total=len(prompts), desc="judge", unit="request", disable=not progress) as bar:
            def done(i: int, text: str) -> None:
                out[i] = text
                bar.update(1)
                if on_answer is not None:
                    on_answer(i, text)

            todo = []
            for i, k in enumerate(keys):
                if k in self.cache:
                    self.usage.cached += 1
                    done(i, self.cache[k]["output"])
                else:
                    todo.append(i)
            with ThreadPoolExecutor(self.config.concurrency) as pool:
                for i, text in zip(todo, pool.map(lambda i: self._ask(conversations[i], keys[i]), todo)):
                    done(i, text)
        self.usage.seconds += time.perf_counter() - start
        return [out[i] for i in range(len(prompts))]

    def _ask(self, conversation: Prompt, key: str) -> str:
        reply = self._request(conversation)
        choice = reply.choices[0]
        text = (choice.text if isinstance(conversation, str) else choice.message.content) or ""
        usage = reply.usage
        row = {"key": key, "output": text, "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
               "completion_tokens": getattr(usage, "completion_tokens", 0) or 0}
        with self._lock:
            self.usage.requests += 1
            self.usage.prompt_tokens += row["prompt_tokens"]
            self.usage.completion_tokens += row["completion_tokens"]
            self.cache[key] = row
            with open(self.cache_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return text

    def _request(self, conversation: Prompt):
        import openai

        c = self.config
        try:
            if isinstance(conversation, str):
                return self.client.completions.create(model=c.model, prompt=conversation, temperature=c.temperature,
                                                      max_tokens=self.max_tokens)
            return self.client.chat.completions.create(model=c.model, messages=conversation,
                                                       temperature=c.temperature, max_tokens=self.max_tokens)
        except openai.APIConnectionError as e:
            raise JudgeError(f"eval.judge.base_url={c.base_url}: the endpoint did not answer after "
                             f"{c.max_retries} retries ({type(e).__name__}: {e}); start the server, then run the same "
                             "command again: answers so far are cached") from None
        except openai.AuthenticationError:
            raise JudgeError(f"{c.base_url} refused the API key (eval.judge.api_key_env={c.api_key_env})") from None
        except openai.NotFoundError as e:
            raise JudgeError(f"eval.judge.model={c.model}: {c.base_url} does not serve it ({e.message})") from None
        except openai.APIStatusError as e:
            raise JudgeError(f"{c.base_url} answered {e.status_code} after {c.max_retries} retries: {e.message}; "
                             "run the same command again to continue: answers so far are cached") from None


@dataclass(frozen=True)
class Served:
    """A served model's answers to the prompts the HF path renders (the template's chat messages, or with
    eval.judge.completions the prompt text itself), on the main process only: the endpoint does the batching."""
    judge: Judge
    tokenizer: Any             # renders the prompt text with eval.judge.completions (else unused: None)
    template: str

    def rows(self, records: list[dict], progress: bool, on_result: Write | None) -> list[Row]:
        prompts = [prompt_text(r, self.tokenizer, self.template) if self.judge.config.completions
                   else render_messages(r, self.template) for r in records]
        return output_rows(records, self.judge.answers(prompts, progress), on_result)


def cache_file(config: JudgeConfig) -> Path:
    """One JSONL file per served model name under `eval.judge.cache_dir` (default: the user's cache)."""
    root = Path(config.cache_dir) if config.cache_dir else cache_root() / "judge"
    root.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(config.model).encode("utf-8")).hexdigest()[:16]
    return root / f"{name}.jsonl"


def usage_record(usage: JudgeUsage, config: JudgeConfig) -> dict:
    """What a run writes of its judge (`judge_usage.json`): the endpoint, model and counts, no key."""
    return {"base_url": config.base_url, "model": config.model, **asdict(usage), "line": usage.line(config)}
