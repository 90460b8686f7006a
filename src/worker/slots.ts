/**
 * Slots: the claimed jobs waiting in the prefetch buffer, and the
 * `concurrency` slots they start in — one job, or one batch of a batch kind
 * (registerBatch), per slot, in claim order. A partial batch may wait up to
 * its kind's `waitMs` for more jobs of its kind; the other kinds go past it.
 *
 * Invariants: at most `concurrency` handlers (or batches) run at once; a
 * buffered job whose lease was lost, or that no heartbeat confirmed for a
 * whole lease, never starts (discarded, or handed back through HeldJobs);
 * nothing starts once the worker is stopping.
 */
import type { Logger } from "../core/logger.js";
import type { Executor } from "./executor.js";
import type { Handlers } from "./handlers.js";
import type { HeldJobs } from "./heldJobs.js";
import type { Running } from "./types.js";

export interface SlotsOptions {
  concurrency: number;
  /** The job lease, ms: how long a buffered job may wait unconfirmed. */
  leaseMs: number;
  held: HeldJobs;
  logger: Logger;
  /** False once the worker is stopping: start nothing. */
  running: () => boolean;
  /** Batch kinds (registerBatch): their size and hold; undefined for a kind run one job per call. */
  handlers: Pick<Handlers, "batchOf" | "largestBatch">;
  /** Runs one job's handler, or a batch kind's jobs in one handler call, in one slot. */
  executor: Pick<Executor, "execute" | "executeBatch">;
  /** A slot came free (its job or batch ended). */
  onFree: () => void;
}

export class Slots {
  /** Claimed jobs not started yet, in claim order. */
  private readonly buffer: Running[] = [];
  private active = 0;
  /** Buffered jobs handed back since the last log line because their lease went unconfirmed for a whole lease. */
  private unconfirmed = 0;
  /** Batch kinds holding a partial batch for their `waitMs`: its timer, and whether it fired (the wait is over). */
  private readonly holding = new Map<string, { due: boolean; timer: NodeJS.Timeout }>();

  constructor(private readonly o: SlotsOptions) {}

  /** Handlers (or batches) running now. */
  get activeCount(): number {
    return this.active;
  }

  /** Claimed jobs waiting in the buffer. */
  get bufferedCount(): number {
    return this.buffer.length;
  }

  /**
   * Nothing to start, while a slot is free: the buffer is empty, or a partial batch waits for more jobs
   * of its kind (any job claimed now may fill it).
   */
  get starving(): boolean {
    return (this.buffer.length === 0 || this.holding.size > 0) && this.active < this.o.concurrency;
  }

  /** Jobs a claim just leased, after the buffered ones. */
  add(claimed: readonly Running[]): void {
    this.buffer.push(...claimed);
  }

  /** Starts buffered jobs, in claim order, while slots are free; none once stopping (shutdown releases them). */
  startBuffered(): void {
    this.startReady();
    if (this.unconfirmed > 0) {
      this.o.logger.warn(
        { count: this.unconfirmed, leaseMs: this.o.leaseMs },
        "skipq: handed back buffered jobs whose lease no heartbeat confirmed for a whole lease (cut off from the database, or it is overloaded): released at once if their lease is still live, else the reaper returns them",
      );
      this.unconfirmed = 0;
    }
  }

  private startReady(): void {
    let i = 0;
    /** Batch kinds seen holding in this pass: their other jobs stay buffered too. */
    let held: Set<string> | undefined;
    while (this.active < this.o.concurrency && i < this.buffer.length) {
      if (!this.o.running()) return;
      const running = this.buffer[i] as Running;
      if (!this.usable(running)) {
        this.buffer.splice(i, 1);
        continue;
      }
      const kind = running.job.kind;
      const batch = this.o.handlers.batchOf(kind);
      if (batch === undefined) {
        this.buffer.splice(i, 1);
        this.runOne(running);
        continue;
      }
      if (held?.has(kind)) {
        i++;
        continue;
      }
      const members = this.takeBatch(i, kind, batch);
      if (members === undefined) {
        held ??= new Set();
        held.add(kind);
        i++;
      } else if (members.length > 0) {
        this.runBatch(members);
      }
    }
  }

  /**
   * False (and the job dealt with) for a buffered job that must not start: its lease was lost while it
   * waited (nothing ran, nothing to record), or no heartbeat confirmed it for a whole lease — a partition or
   * a stalled database; the reaper may have returned it and another worker may run it, so running it here
   * would only add a duplicate. Handed back fenced by its lease: it returns to the queue at once (no attempt
   * used) if the lease was still live after all, and nothing changes if it was not.
   */
  private usable(running: Running): boolean {
    if (running.detached) {
      this.o.held.discard(running);
      return false;
    }
    if (performance.now() - running.confirmedAt >= this.o.leaseMs) {
      this.o.held.handBack(running);
      this.unconfirmed++;
      return false;
    }
    return true;
  }

  /**
   * Takes up to `size` buffered jobs of a batch kind, from index `from` on, out of the buffer (the unusable
   * ones dealt with). Undefined, taking nothing, while a partial batch may still wait for more (`waitMs`):
   * a timer starts it when the wait is over.
   */
  private takeBatch(from: number, kind: string, batch: { size: number; waitMs: number }): Running[] | undefined {
    let count = 0;
    for (let j = from; j < this.buffer.length && count < batch.size; j++) {
      if ((this.buffer[j] as Running).job.kind === kind) count++;
    }
    if (count < batch.size && batch.waitMs > 0) {
      const hold = this.holding.get(kind);
      if (hold === undefined) {
        // Its firing is what ends the wait (not a clock comparison, which a timer firing a hair early would fail).
        const held = {
          due: false,
          timer: setTimeout(() => {
            held.due = true;
            this.startBuffered();
          }, batch.waitMs),
        };
        held.timer.unref?.();
        this.holding.set(kind, held);
        return undefined;
      }
      if (!hold.due) return undefined;
    }
    const hold = this.holding.get(kind);
    if (hold) {
      clearTimeout(hold.timer);
      this.holding.delete(kind);
    }
    const members: Running[] = [];
    for (let j = from; j < this.buffer.length && members.length < batch.size; ) {
      const running = this.buffer[j] as Running;
      if (running.job.kind !== kind) {
        j++;
        continue;
      }
      this.buffer.splice(j, 1);
      if (this.usable(running)) members.push(running);
    }
    return members;
  }

  /** Starts one job in a slot (no array per job: the single-job path is the hot one). */
  private runOne(running: Running): void {
    this.o.held.start(running);
    this.active++;
    void this.o.executor.execute(running).finally(() => {
      this.active--;
      running.settle();
      this.startBuffered();
      this.o.onFree();
    });
  }

  /** Starts one batch in one slot; its jobs settle when the batch ends. */
  private runBatch(members: Running[]): void {
    for (const running of members) this.o.held.start(running);
    this.active++;
    void this.o.executor.executeBatch(members).finally(() => {
      this.active--;
      for (const running of members) running.settle();
      this.startBuffered();
      this.o.onFree();
    });
  }

  /** Empties the buffer (at stop): the jobs that never started (partial batches held for more, too). */
  drainBuffer(): Running[] {
    for (const hold of this.holding.values()) clearTimeout(hold.timer);
    this.holding.clear();
    return this.buffer.splice(0);
  }
}
