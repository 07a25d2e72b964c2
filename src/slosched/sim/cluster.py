"""The simulated cluster: releases jobs' calls, routes them, runs instances, records outcomes."""

from __future__ import annotations

import gc
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from slosched.core.belief import OutputLengthPredictor
from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobSpec, StageSpec
from slosched.core.records import JobRecord, RequestRecord, RunResult
from slosched.core.request import Outcome, Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import CompletionObserver, Router
from slosched.policies.engine.base import EnginePolicy, StateExporter
from slosched.policies.engine.queue import fits_model_len
from slosched.policies.job.base import JobPolicy, stage_decider
from slosched.sim.belief import BeliefFeed
from slosched.sim.deadlines import DeadlineModel, FastestLatency
from slosched.sim.instance import SimInstance
from slosched.sim.jobs import JobState, OneStageGraphs
from slosched.sim.kernel import EventKernel
from slosched.sim.models import InstanceModels
from slosched.sim.noise import NoiseStream
from slosched.sim.options import INFEASIBLE_REASON, SimOptions
from slosched.sim.outcomes import completed_record, too_long_reason, unserved_record
from slosched.sim.prefixes import PrefixKeys
from slosched.sim.sampling import Sampler, auto_interval_s
from slosched.sim.seq import Seq
from slosched.sim.views import InstanceSnapshot, take_snapshot


class _Pending:
    """A routed request's job and call, until it finishes (a plain class: see ``sim.step.StepWork``)."""

    __slots__ = ("call", "job", "request")

    def __init__(self, request: Request, job: JobState, call: CallSpec) -> None:
        self.request = request
        self.job = job
        self.call = call


class ClusterSim:
    """One simulation run of one policy pair over one list of jobs."""

    def __init__(
        self,
        models: Sequence[InstanceModels],
        engines: Sequence[EnginePolicy],
        router: Router,
        job_policy: JobPolicy,
        output_predictor: OutputLengthPredictor,
        options: SimOptions,
        seed: int,
        policy_name: str = "",
        history: Sequence[JobSpec] | None = None,
    ) -> None:
        self.kernel = EventKernel()
        self._history = history
        self._deadlines: DeadlineModel | None = None
        self.options = options
        self.router = router
        self.job_policy = job_policy
        self._decide_stage = stage_decider(job_policy)
        self._rejects_infeasible = options.on_infeasible == "reject"
        self.output_predictor = output_predictor
        self.policy_name = policy_name
        self.seed = seed
        self._router_observes = isinstance(router, CompletionObserver)
        self.instances = self._new_instances(models, engines, options, seed)
        self._models = list(models)
        self._frontend_s = [model.frontend_s for model in models]
        self._frontend_free_s = [0.0] * len(models)
        reference = [InstanceModels.build(spec) for spec in options.slo_reference]
        self._latency = FastestLatency(reference or models)
        self._has_exporters = [_has_exporter(engine) for engine in engines]
        self._snapshots: list[InstanceSnapshot | None] = [None] * len(self.instances)
        self._shortest_model_len = min(model.max_model_len for model in models)
        self._longest_model_len = max(model.max_model_len for model in models)
        self._last_join_s = max(model.spec.available_from_s for model in models)
        self._joins_later = self._last_join_s > 0
        if min(model.spec.available_from_s for model in models) > 0:
            raise ConfigError("cluster.instances.available_from_s", "at least one instance must be available at 0")
        self._prefixes = PrefixKeys(models[0].spec.block_size)
        self._pending: dict[str, _Pending] = {}
        self._requests: list[RequestRecord] = []
        self._jobs: list[JobState] = []
        self._jobs_open = 0
        self._last_activity_s = 0.0

    def _new_instances(
        self, models: Sequence[InstanceModels], engines: Sequence[EnginePolicy], options: SimOptions, seed: int
    ) -> list[SimInstance]:
        """One ``SimInstance`` per model with its engine policy, its own noise stream and belief feed."""
        noise_seeds = np.random.SeedSequence(seed).spawn(len(models))
        max_run_steps = 1 << 30 if options.fast_forward else 1
        return [
            SimInstance(
                index=index,
                spec=model.spec,
                num_kv_blocks=model.num_kv_blocks,
                truth=model.truth,
                noise=NoiseStream(np.random.default_rng(noise_seeds[index]), options.noise_sigma),
                engine=engine,
                belief=BeliefFeed(model.belief, engine.observers),
                kernel=self.kernel,
                on_finish=self._on_request_finished,
                max_run_steps=max_run_steps,
            )
            for index, (model, engine) in enumerate(zip(models, engines, strict=True))
        ]

    # ---- run -----------------------------------------------------------------------------------------
    def run(self, jobs: Sequence[JobSpec]) -> RunResult:
        # The run allocates millions of small objects and keeps its jobs alive: the cyclic collector's full
        # passes cost ~15% of a run (sim-speed bench) and free nothing, so it is paused; refcounting frees all.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(jobs)
        finally:
            for instance in self.instances:  # the run must leave no reference cycles (``SimInstance.detach``)
                instance.detach()
            # The run's objects are in the youngest generation; the first collections after it would walk them
            # twice (young, then middle) only to promote them. Freeze + unfreeze moves them to the oldest in O(1):
            # summarizing 40,000 requests took 0.22 s, 0.11 s after this. Not when the host process froze
            # objects itself (a pre-fork server): unfreezing would undo that.
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            if was_enabled:
                gc.enable()

    def _run(self, jobs: Sequence[JobSpec]) -> RunResult:
        if self.options.scales_deadlines and self.options.slo_basis == "estimated":
            # Without a recorded history, the trace's own per-template aggregates stand in for past traffic.
            history = jobs if self._history is None else self._history
            self._deadlines = DeadlineModel.learn(history, self._latency.call_s, self._latency.job_s)
        ordered = sorted(jobs, key=_arrival_s)
        graphs: OneStageGraphs = {}
        states = [JobState.start(spec, self._new_job_record(spec), graphs) for spec in ordered]
        self._jobs.extend(states)
        self.kernel.schedule_all([spec.arrival_s for spec in ordered], self._on_job_arrival, states)
        self._jobs_open = len(self._jobs)
        if self.options.belief_refit_s > 0:
            self.kernel.schedule(self.options.belief_refit_s, self._on_refit_tick)
        sampler = self._sampler(jobs)
        self.kernel.run(self.options.horizon_s)
        self._fail_unfinished()
        return RunResult(
            policy=self.policy_name,
            seed=self.seed,
            end_s=self._last_activity_s,
            requests=self._requests,
            jobs=[state.record for state in self._jobs],
            instances=[instance.final_stats() for instance in self.instances],
            num_events=self.kernel.num_events,
            series=[] if sampler is None else sampler.series,
        )

    def _sampler(self, jobs: Sequence[JobSpec]) -> Sampler | None:
        interval = self.options.sample_interval_s
        if interval is None:
            interval = auto_interval_s(max((job.arrival_s for job in jobs), default=0.0))
        if interval <= 0:
            return None
        sampler = Sampler(self.instances, self.kernel, interval, lambda: self._jobs_open > 0)
        sampler.start()
        return sampler

    def _new_job_record(self, spec: JobSpec) -> JobRecord:
        stages = spec.stages
        num_calls = len(stages[0].calls) if len(stages) == 1 else spec.num_calls
        no_contention = self._latency.job_s(spec)
        options = self.options
        if spec.slo_s is not None:
            slo = spec.slo_s
        elif options.slo_s is not None:
            slo = options.slo_s
        elif (scale := options.scale_of(spec.tenant)) is not None:
            basis = no_contention if self._deadlines is None else self._deadlines.job_latency_s(spec)
            slo = scale * basis
        else:
            slo = math.inf
        record = JobRecord(
            spec.id, spec.kind, spec.template, spec.arrival_s, Outcome.FAILED, num_calls, slo, no_contention
        )
        record.tenant = spec.tenant  # after the defaulted fields; keywords cost 2.5x (timeit)
        return record

    # ---- jobs ----------------------------------------------------------------------------------------
    def _on_job_arrival(self, job: JobState) -> None:
        for stage in job.ready_stages():
            self._release_stage(job, stage)

    def _release_stage(self, job: JobState, stage: StageSpec) -> None:
        if job.done:
            return
        job.calls_left[stage.name] = len(stage.calls)
        if not stage.calls:
            self.kernel.schedule(self.kernel.now_s + stage.tool_duration_s, self._on_tool_done, (job, stage))
            return
        requests = [self._new_request(job, stage, index, call) for index, call in enumerate(stage.calls)]
        # Read through Any: a third-party policy's decision is applied as it is (compiled code checks types).
        decide: Any = self._decide_stage
        decision = decide(job.view(stage.name), requests, self.kernel.now_s, self._views)
        if decision.best_effort and self._rejects_infeasible:
            for request in requests:  # the early "cannot meet deadline" (sim/options.py): none is routed
                self._reject(request, job, INFEASIBLE_REASON)
            return
        decision.apply(requests)
        for request, call in zip(requests, stage.calls, strict=True):
            self._route(request, job, call)
            if job.done:
                return

    def _new_request(self, job: JobState, stage: StageSpec, index: int, call: CallSpec) -> Request:
        spec = job.spec
        limit = call.max_output_tokens
        if limit is None:
            limit = self._longest_model_len - call.input_tokens
            limit = limit if limit > 1 else 1
        now = self.kernel.now_s
        # Positional up to ``prefix`` (the field order of ``Request``): keywords cost 2.5x (timeit).
        request = Request(
            f"{spec.id}/{stage.name}/{index}",
            spec.id,
            stage.name,
            spec.template,
            call.input_tokens,
            limit,
            now,
            spec.arrival_s,
            job.deadline_s,
            spec.tenant,
            call.session_id,
            self._prefixes.of(call),
            ttft_slo_s=spec.ttft_slo_s,
            tpot_slo_s=spec.tpot_slo_s,
        )
        # Policies' answers are read through Any and made plain (here and in ``_route``): compiled, this
        # module checks declared types strictly and would reject a numpy number the sources accept.
        predictor: Any = self.output_predictor
        request.predicted_output_tokens = float(predictor.predict(request))
        return request

    def _on_tool_done(self, payload: tuple[JobState, StageSpec]) -> None:
        job, stage = payload
        if not job.done:
            self._stage_done(job, stage.name)

    def _stage_done(self, job: JobState, stage_name: str) -> None:
        released = job.stage_finished(stage_name)
        if job.stages_left == 0:
            job.finish(Outcome.COMPLETED, self.kernel.now_s)
            self._jobs_open -= 1
            return
        for stage in released:
            self._release_stage(job, stage)

    # ---- routing -------------------------------------------------------------------------------------
    def _route(self, request: Request, job: JobState, call: CallSpec) -> None:
        # vLLM's rule, shared with the gateway; without a client limit the engine caps output at its model length.
        prompt, limit = request.prompt_tokens, call.max_output_tokens
        views = self._views()
        if not fits_model_len(prompt, limit, self._shortest_model_len):
            views = [view for view in views if fits_model_len(prompt, limit, self._models[view.index].max_model_len)]
            if not views:
                self._reject(request, job, too_long_reason(request, self._longest_model_len))
                return
        router: Any = self.router
        chosen = views[int(router.route(request, views, self.kernel.now_s))]
        if isinstance(chosen, InstanceSnapshot):
            chosen.note_routed(request)
        self._pending[request.id] = _Pending(request, job, call)
        output_tokens = min(call.output_tokens, self._models[chosen.index].max_model_len - request.prompt_tokens)
        serial, constant, per_token = self._frontend_s[chosen.index]
        if serial <= 0 and constant <= 0:
            seq = Seq(request, output_tokens, self.kernel.now_s, 0, request.prompt_tokens)
            self.instances[chosen.index].enqueue(seq)
            return
        # A measured engine's API server admits requests one after another, each costing ``serial``
        # seconds (a burst reaches the engine spread out), stretched while it also streams tokens (it
        # shares its time: processor sharing), and every request spends ``constant`` seconds in HTTP and
        # hand-offs; the engine sees it that much later.
        busy = min(self._streamed_tokens_per_s(chosen.index) * per_token, 0.9)
        admitted = max(self.kernel.now_s, self._frontend_free_s[chosen.index]) + serial / (1.0 - busy)
        self._frontend_free_s[chosen.index] = admitted
        seq = Seq(request, output_tokens, admitted + constant, 0, request.prompt_tokens)
        self.kernel.schedule(admitted + constant, self._enqueue_after_frontend, (chosen.index, seq))

    def _streamed_tokens_per_s(self, index: int) -> float:
        """Tokens per second the instance's decode cohort produces now (one per member per step)."""
        cohort = self.instances[index].cohort
        members = len(cohort)
        if members == 0:
            return 0.0
        step = self._models[index].truth.step_time_s(0, 0, members, cohort.context_tokens)
        return members / step if step > 0 else 0.0

    def _enqueue_after_frontend(self, payload: tuple[int, Seq]) -> None:
        index, seq = payload
        self.instances[index].enqueue(seq)

    def _views(self) -> Sequence[InstanceView]:
        """Fresh instances themselves, or snapshots refreshed once they are ``view_staleness_s`` old."""
        now = self.kernel.now_s
        staleness = self.options.view_staleness_s
        if self._joins_later and now < self._last_join_s:
            available = [i for i in self.instances if i.spec.available_from_s <= now]
            if staleness <= 0:
                return available
            return [self._snapshot(i.index, now, staleness) for i in available]
        if staleness <= 0:
            return self.instances  # progress-dependent fields sync themselves when read
        return [self._snapshot(index, now, staleness) for index in range(len(self.instances))]

    def _snapshot(self, index: int, now: float, staleness: float) -> InstanceSnapshot:
        current = self._snapshots[index]
        if current is None or now - current.snapshot_s >= staleness:
            current = take_snapshot(self.instances[index], self._has_exporters[index])
            self._snapshots[index] = current
        return current

    def _reject(self, request: Request, job: JobState, reason: str) -> None:
        self._requests.append(unserved_record(request, Outcome.REJECTED, reason))
        if not job.done:
            job.finish(Outcome.REJECTED, self.kernel.now_s, reason)
            self._jobs_open -= 1

    # ---- completion ----------------------------------------------------------------------------------
    def _on_request_finished(self, seq: Seq, instance_index: int, now_s: float) -> None:
        self._last_activity_s = now_s
        pending = self._pending.pop(seq.request.id)
        request = pending.request
        self._requests.append(completed_record(seq, self.instances[instance_index].spec.name, now_s))
        self.output_predictor.observe(request, seq.num_output_tokens)
        if self._router_observes:
            self.router.on_request_finished(instance_index, request, now_s - request.arrival_s, now_s)  # type: ignore[attr-defined]
        job = pending.job
        if job.done:
            return
        record = job.record
        started = seq.first_scheduled_s
        if started is not None:
            # A fresh record holds NaN, which every comparison below treats as "not set yet".
            if not record.first_prefill_s <= started:
                record.first_prefill_s = started
            if not record.last_prefill_s >= started:
                record.last_prefill_s = started
        job.calls_left[request.stage] -= 1
        if job.calls_left[request.stage] == 0:
            stage = job.stages[request.stage]
            if stage.tool_duration_s > 0:
                self.kernel.schedule(now_s + stage.tool_duration_s, self._on_tool_done, (job, stage))
            else:
                self._stage_done(job, request.stage)

    def _on_refit_tick(self, _: object) -> None:
        now = self.kernel.now_s
        for instance in self.instances:
            instance.flush_observations(now)
        if self._jobs_open > 0:
            self.kernel.schedule(now + self.options.belief_refit_s, self._on_refit_tick)

    def _fail_unfinished(self) -> None:
        now = self.kernel.now_s
        for pending in self._pending.values():
            self._requests.append(
                unserved_record(pending.request, Outcome.FAILED, "not finished by the simulation horizon")
            )
        self._pending.clear()
        for job in self._jobs:
            if not job.done:
                job.finish(Outcome.FAILED, now, "not finished by the simulation horizon")


def _arrival_s(job: JobSpec) -> float:
    return job.arrival_s


def _has_exporter(engine: EnginePolicy) -> bool:
    return any(isinstance(part, StateExporter) for part in (engine.ordering, engine.admission, engine.batching))
