"""Helpers for the alert tests: real-looking configs through the real ingest path, and bounded
HTTP / SMTP receivers on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlmodel import Session, select

from observatory.alerts import subscriptions
from observatory.alerts.tables import AlertDelivery, DeliveryAttempt, WebhookEndpoint
from observatory.store.db import session_scope
from observatory.store.ingest import record_config, upsert_model

# Retries in milliseconds, short timeouts, loopback targets allowed: every wait stays bounded.
FAST = dict(
    allow_loopback_webhooks=True,
    allow_http_webhooks=True,
    webhook_retry_schedule_s=[0.05, 0.1, 0.2],
    webhook_retry_jitter=0.0,
    webhook_timeout_s=2.0,
    webhook_connect_timeout_s=1.0,
    webhook_lease_s=1.0,
    alert_builtin_rules=False,
    base_url="http://observatory.test",
)


@pytest.fixture
def alert_settings(settings):
    return settings.model_copy(update=FAST)


MLA_RULE = {"kind": "kind_share", "params": {"kind": "MLA", "threshold": 0.2}}


def seed_baseline(engine, year: int = 2024, month: int = 12, gqa: int = 5) -> None:
    """A month with no MLA at all before the seeded ones: a rule fires only on a crossing, so the
    first judged month needs an earlier judged month on the other side of the threshold."""
    for i in range(gqa):
        add_model(engine, f"base{year}x{month}x{i}/gqa-{i}", gqa_config(4), day(year, month, i + 1))


def seed_mla_month(engine, month: int = 1, mla: int = 1, gqa: int = 4, year: int = 2025,
                   baseline: bool = True) -> None:
    """A month whose MLA share is mla / (mla + gqa): 20 % by default, enough to fire MLA_RULE
    after ``seed_baseline``'s month (seeded too unless ``baseline`` is false; seeding it twice
    changes nothing)."""
    if baseline:
        seed_baseline(engine, year - 1)
    d = 1
    for i in range(gqa):
        add_model(engine, f"org{month}x{i}/gqa-{i}", gqa_config(4), day(year, month, d))
        d += 1
    for i in range(mla):
        add_model(engine, f"deepx/mla-{year}-{month}-{i}", mla_config(), day(year, month, d))
        d += 1


def subscribe(engine, settings, url: str | None, rules=(MLA_RULE,), **kw) -> subscriptions.Created:
    return subscriptions.create(engine, settings, name="test", rules=list(rules), webhook_url=url, **kw)


def deliveries(engine) -> list[AlertDelivery]:
    with Session(engine) as session:
        return list(session.exec(select(AlertDelivery).order_by(AlertDelivery.id)).all())


def attempts(engine, delivery_id: int) -> list[DeliveryAttempt]:
    with Session(engine) as session:
        return list(session.exec(select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == delivery_id)
                                 .order_by(DeliveryAttempt.number)).all())


def endpoint(engine) -> WebhookEndpoint:
    with Session(engine) as session:
        return session.exec(select(WebhookEndpoint)).one()


def deliver_until(engine, settings, done, timeout: float = 10.0):
    """Run delivery passes until ``done()`` or the deadline (retries are milliseconds apart)."""
    from observatory.alerts.delivery import deliver_pending

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        deliver_pending(engine, settings)
        if done():
            return
        time.sleep(0.03)
    raise AssertionError("delivery did not finish in time")


def llama_config(heads: int = 32, kv_heads: int = 8, hidden: int = 4096, layers: int = 32, **extra) -> dict:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": hidden * 7 // 2,
        "max_position_embeddings": 131072,
        "model_type": "llama",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0",
        "use_cache": True,
        "vocab_size": 128256,
    }
    cfg.update(extra)
    return cfg


def gqa_config(group: int) -> dict:
    """A Llama-style config with G = group (8 KV heads)."""
    return llama_config(heads=8 * group, kv_heads=8, hidden=128 * 8 * group)


def mha_config() -> dict:
    return {
        "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": 2560,
        "num_attention_heads": 32, "num_hidden_layers": 32, "intermediate_size": 10240,
        "max_position_embeddings": 2048, "rotary_pct": 0.25, "vocab_size": 50432, "torch_dtype": "float16",
    }


def mla_config() -> dict:
    return {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
        "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
        "moe_intermediate_size": 2048, "n_routed_experts": 256, "num_attention_heads": 128,
        "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
        "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "rope_theta": 10000, "torch_dtype": "bfloat16", "vocab_size": 129280,
    }


def unknown_layer_config() -> dict:
    """A config whose layer_types names a layer kind the parser has never seen."""
    return llama_config(model_type="zigzag", layers=4,
                        layer_types=["full_attention", "zigzag_attention", "full_attention", "zigzag_attention"])


def broken_config() -> dict:
    """A config with no head counts at all: no geometry can be derived."""
    return {"architectures": ["MysteryForCausalLM"], "model_type": "mystery", "hidden_size": 1024}


def add_model(engine, model_id: str, config: dict, created: datetime, downloads: int = 100, sha: str = "a" * 40):
    """One crawled model through the real write path (upsert + record_config)."""
    with session_scope(engine) as session:
        upsert_model(session, model_id, created_at=created, downloads=downloads, sha=sha, relation="original")
        record_config(session, model_id, json.dumps(config, indent=2), sha)


def day(year: int, month: int, d: int) -> datetime:
    return datetime(year, month, d, 12, tzinfo=timezone.utc)


class Receiver:
    """A webhook receiver on 127.0.0.1 that records every request and answers by a script.

    ``script`` maps the 1-based request number to (status, headers, delay_s[, body]); missing
    numbers use ``default``. Every wait is bounded.
    """

    def __init__(self, default=(200, {}, 0.0), script: dict | None = None, path: str = "/hook"):
        self.requests: list[dict] = []
        self.default, self.script, self.path = default, dict(script or {}), path
        self.lock = threading.Lock()
        self.release = threading.Event()  # set to let hanging answers finish early
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(min(length, 1_000_000))
                with receiver.lock:
                    receiver.requests.append({"headers": dict(self.headers), "body": body, "path": self.path,
                                              "at": time.monotonic()})
                    number = len(receiver.requests)
                status, headers, delay, *rest = receiver.script.get(number, receiver.default)
                body = rest[0] if rest else b"ok"
                if delay:
                    receiver.release.wait(delay)
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the sender gave up waiting

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.02)
        raise AssertionError(f"expected {count} requests, got {len(self.requests)}")


class DrippingReceiver:
    """A receiver on 127.0.0.1 that reads the request, then sends its status line and headers
    one byte every ``interval_s`` (each gap far inside any per-read timeout), as the issue-21
    receiver did. It records how many bytes went out and whether the sender hung up first;
    ``first_byte`` is set once the answer has begun. Every wait is bounded."""

    ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n" + b"x-drip: " + b"." * 200 + b"\r\n" \
             + b"content-length: 2\r\n\r\nok"

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.sent = 0
        self.cut_off = False  # the sender closed the connection before the answer was complete
        self.requests = 0
        self.first_byte = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                except OSError:
                    continue
                self.requests += 1
                for byte in self.ANSWER:
                    if self.stop.wait(self.interval_s):
                        return
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:  # the sender hung up: the next connection, if any
                        self.cut_off = True
                        break
                    self.sent += 1
                    self.first_byte.set()

    def wait_cut_off(self, timeout: float = 10.0) -> bool:
        """True once the sender has hung up (a write failed); False if it never did in time."""
        end = time.monotonic() + timeout
        while not self.cut_off and time.monotonic() < end:
            time.sleep(0.05)
        return self.cut_off

    def __enter__(self) -> DrippingReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.listener.close()
