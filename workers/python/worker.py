#!/usr/bin/python3
"""A skipq worker in Python (asyncpg), speaking the SQL protocol of docs/protocol.md.

Responsibility: claim jobs with skipq_claim, run a handler per kind while a
heartbeat extends the lease, and record the outcome with skipq_complete or
skipq_fail, always presenting the claim's lease (the fencing token).
Invariants: a handler never runs under an open transaction; an outcome the
database rejects (the lease moved on) is reported as stale and changes nothing.
It must never update the jobs table directly: the functions are the protocol.

Usage (DSN from --dsn or DATABASE_URL):
  worker.py run     --schema S [--queue Q ...] [--concurrency N] [--lease-ms N]
  worker.py drain   --schema S [--queue Q ...]   # run until nothing is runnable, print a JSON summary
  worker.py complete --schema S --id ID --lease LEASE          # one fenced outcome, print JSON
  worker.py fail     --schema S --id ID --lease LEASE --error E [--delay-ms N]
  worker.py complete-tx --schema S --id ID --lease LEASE --table T [--result JSON] [--rollback]

complete-tx is the transactional completion (docs/protocol.md): in one
transaction of its own it inserts the business row (job_id) into table T and
calls skipq_complete, then commits -- or rolls back when --rollback is given or
the lease was stale, so the row exists if and only if the job was completed.
"""
import argparse
import asyncio
import json
import os
import random
import signal
import socket
import sys
import traceback

import asyncpg


def quote_ident(name):
    return '"' + name.replace('"', '""') + '"'


# Handlers by kind: async (payload, job) -> None. Raise to fail (retry with backoff).
HANDLERS = {}


def handler(kind):
    def register(fn):
        HANDLERS[kind] = fn
        return fn
    return register


@handler("polyglot.echo")
async def echo(payload, job):
    return None


@handler("polyglot.sum")
async def add(payload, job):
    if not isinstance(payload.get("numbers"), list):
        raise ValueError("payload.numbers must be a list")
    return sum(payload["numbers"])


@handler("polyglot.fail")
async def fail(payload, job):
    raise RuntimeError(payload.get("message", "failed on purpose"))


def backoff_ms(attempt, base_ms=1000, max_ms=3_600_000, jitter=0.2):
    """Capped exponential with jitter, as src/backoff.ts."""
    delay = min(max_ms, base_ms * 2 ** min(max(attempt - 1, 0), 52))
    return round(min(max_ms * (1 + jitter), delay * (1 - jitter + 2 * jitter * random.random())))


class Worker:
    def __init__(self, pool, schema, queues, concurrency, lease_ms, worker_id):
        self.pool = pool
        self.s = quote_ident(schema)
        self.queues = queues
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.worker_id = worker_id
        self.summary = {"claimed": 0, "completed": 0, "failed": 0, "stale": 0}

    async def claim(self, n):
        return await self.pool.fetch(
            f"SELECT * FROM {self.s}.skipq_claim($1::text[], $2, $3, $4)",
            self.queues, n, self.worker_id, float(self.lease_ms))

    async def complete(self, job_id, lease):
        return await self.pool.fetchval(f"SELECT {self.s}.skipq_complete($1, $2)", job_id, lease)

    async def fail(self, job_id, lease, error, delay_ms):
        return await self.pool.fetchval(
            f"SELECT {self.s}.skipq_fail($1, $2, $3, $4)", job_id, lease, error, float(delay_ms))

    async def complete_tx(self, job_id, lease, table, result, rollback):
        """The business row and the completion in one transaction: both commit, or neither."""
        qualified = ".".join(quote_ident(part) for part in table.split("."))
        async with self.pool.acquire() as conn:
            tx = conn.transaction()
            await tx.start()
            try:
                await conn.execute(f"INSERT INTO {qualified} (job_id) VALUES ($1)", job_id)
                accepted = await conn.fetchval(
                    f"SELECT {self.s}.skipq_complete($1, $2, $3::jsonb)", job_id, lease, result)
            except BaseException:
                await tx.rollback()
                raise
            # A stale lease: nothing of this attempt may commit, the business row included.
            if not accepted or rollback:
                await tx.rollback()
                return accepted, False
            await tx.commit()
            return accepted, True

    async def heartbeat(self, job_id, lease):
        return await self.pool.fetchval(
            f"SELECT {self.s}.skipq_heartbeat($1, $2, $3)", job_id, lease, float(self.lease_ms))

    async def execute(self, job):
        job_id, lease = job["id"], job["lease"]
        fn = HANDLERS.get(job["kind"])
        payload = json.loads(job["payload"]) if isinstance(job["payload"], str) else job["payload"]
        task = asyncio.ensure_future(fn(payload, job) if fn else self.unknown(job["kind"]))
        # Heartbeat every third of the lease; a lost lease cancels the handler.
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=self.lease_ms / 3000)
            if done:
                break
            try:
                held = await self.heartbeat(job_id, lease)
            except (OSError, asyncpg.PostgresError):
                continue  # a transient database error: try again on the next beat
            if not held:
                task.cancel()
                self.summary["stale"] += 1
                return
        try:
            task.result()
        except Exception:
            status = await self.fail(job_id, lease, traceback.format_exc()[-8192:], backoff_ms(job["attempts"]))
            self.summary["failed" if status is not None else "stale"] += 1
            return
        accepted = await self.complete(job_id, lease)
        self.summary["completed" if accepted else "stale"] += 1

    async def unknown(self, kind):
        raise LookupError(f"no Python handler for kind {kind!r}; known: {sorted(HANDLERS)}")

    async def run(self, stop, drain=False):
        running = set()
        while not stop.is_set():
            free = self.concurrency - len(running)
            jobs = await self.claim(free) if free > 0 else []
            self.summary["claimed"] += len(jobs)
            for job in jobs:
                running.add(asyncio.ensure_future(self.execute(job)))
            if not jobs and not running and drain:
                return
            if running:
                _, running = await asyncio.wait(running, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            elif not jobs:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=1.0)
                except asyncio.TimeoutError:
                    pass
        if running:
            await asyncio.wait(running)


async def main():
    parser = argparse.ArgumentParser(description="skipq worker (Python, asyncpg)")
    parser.add_argument("command", choices=["run", "drain", "complete", "complete-tx", "fail"])
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--schema", default="skipq")
    parser.add_argument("--queue", action="append")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--lease-ms", type=int, default=30_000)
    parser.add_argument("--id", type=int)
    parser.add_argument("--lease", type=int)
    parser.add_argument("--error", default="failed")
    parser.add_argument("--delay-ms", type=float, default=0)
    parser.add_argument("--table", help="business table, schema.table, with a job_id column (complete-tx)")
    parser.add_argument("--result", help="the job's result as JSON (complete-tx)")
    parser.add_argument("--rollback", action="store_true", help="roll back instead of committing (complete-tx)")
    args = parser.parse_args()
    if not args.dsn:
        sys.exit("no database: pass --dsn or set DATABASE_URL")
    pool = await asyncpg.create_pool(args.dsn, min_size=1, max_size=args.concurrency + 2)
    worker_id = f"python:{socket.gethostname()}:{os.getpid()}"
    w = Worker(pool, args.schema, args.queue or ["default"], args.concurrency, args.lease_ms, worker_id)
    try:
        if args.command == "complete":
            print(json.dumps({"accepted": await w.complete(args.id, args.lease)}))
        elif args.command == "complete-tx":
            accepted, committed = await w.complete_tx(args.id, args.lease, args.table, args.result, args.rollback)
            print(json.dumps({"accepted": accepted, "committed": committed}))
        elif args.command == "fail":
            status = await w.fail(args.id, args.lease, args.error, args.delay_ms)
            print(json.dumps({"accepted": status is not None, "status": status}))
        else:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await w.run(stop, drain=args.command == "drain")
            print(json.dumps({"worker": worker_id, **w.summary}))
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main())
