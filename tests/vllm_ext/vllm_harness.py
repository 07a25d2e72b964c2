"""Randomized property check of the plugin on vLLM's real v1 Scheduler (no model, no server).

Run with the vLLM virtualenv's Python: ``python vllm_harness.py MODEL_DIR STEPS SEED[:async] ...``; prints
one JSON line. Requests arrive, get aborted, and are scheduled for ``STEPS`` steps under a *chaos* policy
(random ordering keys, random admission deferrals, random step modes, token budgets and running caps);
a fake model samples one token per finished prefill. After every step the harness checks: no request is
lost or duplicated (each live request is in exactly one of running / waiting / kv_holding_waiting), the
running order is preserved (survivors keep their order, admissions follow), held-back requests were not
scheduled, decode-only steps admit nothing and schedule no prefill chunk, the step stays within its budget
and cap, nothing the admission policy deferred was admitted, and the configured limits are restored. Then
the chaos stops and every request must finish with exactly ``max_tokens`` output tokens (or be aborted).
With ``saber``, it also runs ``SaberScheduler`` with no speed model configured (``saber_run``).
Not collected by pytest (no ``test_`` prefix): ``test_real_scheduler.py`` runs it in a subprocess.
"""

from __future__ import annotations

import json
import os
import random
import sys
from typing import Any

os.environ.setdefault("SLOSCHED_ENGINE_CONFIG", "{}")


def build_scheduler(model_dir: str, async_scheduling: bool, class_name: str = "SloschedScheduler") -> Any:
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    import slosched.vllm_ext.scheduler as classes

    scheduler_config = SchedulerConfig(
        max_num_seqs=8,
        max_num_batched_tokens=128,
        max_model_len=1024,
        enable_chunked_prefill=True,
        async_scheduling=async_scheduling,
        is_encoder_decoder=False,
    )
    model_config = ModelConfig(model=model_dir, dtype="float32", seed=0, skip_tokenizer_init=True)
    cache_config = CacheConfig(block_size=16, gpu_memory_utilization=0.9, enable_prefix_caching=True)
    vllm_config = VllmConfig(scheduler_config=scheduler_config, model_config=model_config, cache_config=cache_config)
    # vLLM turns async scheduling off on CPU (no async executor); the scheduler classes work regardless.
    vllm_config.scheduler_config.async_scheduling = async_scheduling
    blocks = 48  # 768 tokens of KV for up to 8 requests of up to ~350 tokens: preemptions happen
    spec = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv_config = KVCacheConfig(num_blocks=blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l"], spec)])
    cache_config.num_gpu_blocks = blocks
    return getattr(classes, class_name)(
        vllm_config=vllm_config,
        kv_cache_config=kv_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=16,
        log_stats=False,
    )


class Chaos:
    """Random decisions: an ordering, an admission and a batching part in one object."""

    static_keys = False
    time_invariant = False

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def key(self, seq: Any, engine: Any) -> Any:
        return self.rng.random()

    def admit(self, seq: Any, engine: Any) -> bool:
        return self.rng.random() < 0.7

    def plan(self, engine: Any) -> Any:
        from slosched.core.views import StepMode, StepPlan

        mode = self.rng.choice(list(StepMode))
        budget = self.rng.choice([1, 4, 16, 64, 128, 10_000])
        cap = self.rng.choice([0, 1, 2, 4, 8, 100])
        return StepPlan(mode, budget, cap, True)


def make_request(index: int, rng: random.Random, hasher: Any) -> Any:
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    shared = [7] * rng.choice([0, 32, 64])  # common prefix: prefix-cache hits
    prompt = shared + [rng.randrange(10, 1000) for _ in range(rng.randint(1, 300))]
    extra = rng.choice([None, {"slosched_deadline_unix_s": "soon"}, {"slosched_job_id": f"j{index % 5}"}])
    params = SamplingParams(max_tokens=rng.randint(1, 40), ignore_eos=True, extra_args=signed(extra, f"r{index}"))
    return Request(f"r{index}", prompt, params, None, priority=rng.randint(0, 3), block_hasher=hasher)


def signed(extra: dict[str, Any] | None, request_id: str) -> dict[str, Any] | None:
    """``extra`` signed as the gateway signs what it forwards (the plugin trusts nothing else when
    ``SLOSCHED_XARGS_KEY`` is set, as the test session sets it)."""
    from slosched.contract import sign_xargs, xargs_key

    key = xargs_key()
    return extra if extra is None or key is None else sign_xargs(dict(extra), request_id, key)


def check_step(sched: Any, before: list[Any], context: Any, output: Any, live: dict[str, Any]) -> list[str]:
    from slosched.core.views import StepMode

    problems: list[str] = []
    queues = list(sched.running) + list(sched.waiting) + list(sched.kv_holding_waiting)
    ids = [raw.request_id for raw in queues]
    if len(ids) != len(set(ids)):
        problems.append("duplicate request in the queues")
    if set(ids) != set(live):
        problems.append(f"lost {sorted(set(live) - set(ids))[:5]} / unknown {sorted(set(ids) - set(live))[:5]}")
    after = [raw.request_id for raw in sched.running]
    before_ids = [raw.request_id for raw in before]
    survivors = [rid for rid in after if rid in set(before_ids)]
    if survivors != [rid for rid in before_ids if rid in set(after)] or after[: len(survivors)] != survivors:
        problems.append("running order changed")
    if sched.max_num_scheduled_tokens != 128 or sched.max_num_active_reqs != 8:
        problems.append("limits not restored")
    if len(sched.running) > 8:
        problems.append("more running requests than max_num_seqs")
    if context is None:
        return problems
    decision = context.decision
    scheduled = output.num_scheduled_tokens
    if any(raw.request_id in scheduled for raw in decision.held_running):
        problems.append("a held-back running request was scheduled")
    if output.total_num_scheduled_tokens > decision.token_budget:
        problems.append("token budget exceeded")
    new = {item.req_id for item in output.scheduled_new_reqs} | set(output.scheduled_cached_reqs.resumed_req_ids)
    if new - {raw.request_id for raw in decision.admitted}:
        problems.append("admitted a request the policy deferred")
    if new and len(before) + len(new) > max(decision.max_active, len(before)):
        problems.append("running cap exceeded")
    if decision.mode is StepMode.DECODE_ONLY and (new or any(n > 1 for n in scheduled.values())):
        problems.append("decode-only step scheduled a prefill")
    return problems


def fake_model_output(sched: Any, output: Any, rng: random.Random) -> Any:
    from vllm.v1.outputs import ModelRunnerOutput

    req_ids = list(output.num_scheduled_tokens)
    sampled = []
    for rid in req_ids:
        raw = sched.requests[rid]
        done_prefill = raw.num_computed_tokens >= raw.num_tokens
        sampled.append([rng.randrange(10, 1000)] if done_prefill else [])
    return ModelRunnerOutput(
        req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)}, sampled_token_ids=sampled
    )


class Traffic:
    """Arrivals (half the chaos steps, 1-3 requests) and aborts (3% of steps), and what came back."""

    def __init__(self) -> None:
        self.live: dict[str, Any] = {}
        self.expected: dict[str, int] = {}
        self.tokens: dict[str, int] = {}
        self.aborted: set[str] = set()
        self.count = 0

    def arrive_and_abort(self, sched: Any, rng: random.Random, hasher: Any) -> None:
        from vllm.v1.request import RequestStatus

        if rng.random() < 0.5:
            for _ in range(rng.randint(1, 3)):
                request = make_request(self.count, rng, hasher)
                self.count += 1
                sched.add_request(request)
                self.live[request.request_id] = request
                self.expected[request.request_id] = request.max_tokens
        if self.live and rng.random() < 0.03:
            victim = rng.choice(sorted(self.live))
            sched.finish_requests(victim, RequestStatus.FINISHED_ABORTED)
            self.aborted.add(victim)
            del self.live[victim]

    def record(self, results: Any) -> None:
        for engine_outputs in results.values():
            for item in engine_outputs.outputs:
                self.tokens[item.request_id] = self.tokens.get(item.request_id, 0) + len(item.new_token_ids)
                if item.finish_reason is not None:
                    self.live.pop(item.request_id, None)


def run(model_dir: str, seed: int, steps: int, async_scheduling: bool) -> dict[str, Any]:
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    from slosched.core.views import StepMode
    from slosched.policies.engine.admission.always import AlwaysAdmit
    from slosched.policies.engine.base import EnginePolicy
    from slosched.policies.engine.batching.chunked import StaticBatching
    from slosched.policies.engine.ordering.fcfs import FcfsOrdering

    rng = random.Random(seed)
    init_none_hash(sha256)
    hasher = get_request_block_hasher(16, sha256)
    sched = build_scheduler(model_dir, async_scheduling)
    chaos = Chaos(rng)
    engine = sched.slosched
    engine.policy = EnginePolicy("chaos", chaos, chaos, chaos)
    contexts: list[Any] = []
    original_before = engine.before_schedule

    def recording_before(s: Any) -> Any:
        contexts.append(original_before(s))
        return contexts[-1]

    engine.before_schedule = recording_before
    traffic = Traffic()
    violations: list[str] = []
    preemptions = total_steps = 0
    for step in range(steps + 4000):
        if step == steps:
            engine.policy = EnginePolicy(
                "calm", FcfsOrdering(), AlwaysAdmit(), StaticBatching(StepMode.MIXED, True, None)
            )
        if step < steps:
            traffic.arrive_and_abort(sched, rng, hasher)
        elif not traffic.live:
            break
        before = list(sched.running)
        output = sched.schedule()
        total_steps += 1
        preemptions += len(output.preempted_req_ids)
        violations += [f"step {step}: {p}" for p in check_step(sched, before, contexts[-1], output, traffic.live)]
        traffic.record(sched.update_from_output(output, fake_model_output(sched, output, rng)))
    live, expected, aborted, tokens, count = (
        traffic.live,
        traffic.expected,
        traffic.aborted,
        traffic.tokens,
        traffic.count,
    )
    wrong = [rid for rid, n in expected.items() if rid not in aborted and tokens.get(rid, 0) != n]
    stats = engine.stats.to_dict()
    return {
        "seed": seed,
        "async": async_scheduling,
        "class": type(sched).__name__,
        "steps": total_steps,
        "requests": count,
        "aborted": len(aborted),
        "unfinished": sorted(live)[:10],
        "wrong_token_counts": wrong[:10],
        "preemptions": preemptions,
        "violations": violations[:10],
        "num_violations": len(violations),
        "modes": stats["modes"],
        "relaxed": stats["relaxed"],
        "held_running": stats["held_running"],
        "held_waiting": stats["held_waiting"],
        "metadata_problems": dict(engine.seqs.problems.counts),
    }


def saber_run(model_dir: str, seed: int) -> dict[str, Any]:
    """``SaberScheduler`` as a deployment names it, with no speed model configured: requests with deadlines
    (some too tight to make) on a fake model whose steps take 1 ms + 0.5 ms per scheduled request."""
    import time

    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    init_none_hash(sha256)
    hasher = get_request_block_hasher(16, sha256)
    os.environ["SLOSCHED_ENGINE_CONFIG"] = json.dumps({"observe_interval_s": 0.05})
    rng = random.Random(seed)
    sched = build_scheduler(model_dir, False, "SaberScheduler")
    calibration = sched.slosched.calibration
    prior = dict(calibration.to_dict()) if calibration is not None else None
    traffic, steps = Traffic(), 0
    while (traffic.count < 40 or traffic.live) and steps < 5000:
        if traffic.count < 40 and steps % 5 == 0:
            slack = rng.choice([0.02, 1.0, 3.0, 10.0])  # 0.02 s: cannot be met (SABER's low tier)
            xargs = signed({"slosched_deadline_unix_s": time.time() + slack}, f"s{traffic.count}")
            params = SamplingParams(max_tokens=rng.randint(5, 30), ignore_eos=True, extra_args=xargs)
            prompt = [rng.randrange(10, 1000) for _ in range(rng.randint(5, 60))]
            request = Request(f"s{traffic.count}", prompt, params, None, block_hasher=hasher)
            sched.add_request(request)
            traffic.live[request.request_id], traffic.expected[request.request_id] = request, request.max_tokens
            traffic.count += 1
        output = sched.schedule()
        time.sleep(0.001 + 0.0005 * len(output.num_scheduled_tokens))
        traffic.record(sched.update_from_output(output, fake_model_output(sched, output, rng)))
        steps += 1
    wrong = [rid for rid, n in traffic.expected.items() if traffic.tokens.get(rid, 0) != n]
    final = sched.slosched.calibration
    return {
        "class": type(sched).__name__,
        "policy": sched.slosched.policy.name,
        "steps": steps,
        "requests": traffic.count,
        "unfinished": sorted(traffic.live)[:10],
        "wrong_token_counts": wrong[:10],
        "prior": prior,
        "calibrated": None if final is None else final.to_dict(),
        "held_waiting": sched.slosched.stats.num_held_waiting,
    }


def version_message() -> str:
    import importlib

    import vllm

    import slosched.vllm_ext.scheduler as module
    from slosched.vllm_ext.version import UnsupportedVllmVersionError

    real = vllm.__version__
    vllm.__version__ = "0.31.0"
    try:
        importlib.reload(module)
    except UnsupportedVllmVersionError as error:
        return str(error)
    finally:
        vllm.__version__ = real
    return ""


if __name__ == "__main__":
    # python vllm_harness.py MODEL_DIR STEPS SEED[:async] [SEED[:async] ...] [saber]
    model, steps_text, *seeds = sys.argv[1:]
    runs = [run(model, int(s.split(":")[0]), int(steps_text), s.endswith(":async")) for s in seeds if s != "saber"]
    saber = saber_run(model, 1) if "saber" in seeds else None
    print(json.dumps({"runs": runs, "saber": saber, "version_message": version_message()}))
