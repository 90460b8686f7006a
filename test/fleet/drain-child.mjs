// A lean worker process for the fleet's connection tests and the fleet bench: the built package
// (dist/, no TypeScript loader, so a hundred of them start in seconds on two cores), one Worker,
// kind "chaos" handlers that sleep payload.ms. Configured by FLEET_CHILD (JSON); prints one JSON
// line "ready", and at SIGTERM one JSON line with its stats and every database error it survived.
import { Skipq } from "../../dist/src/index.js";

const config = JSON.parse(process.env.FLEET_CHILD ?? "{}");
/** Every warning or error skipq logged (the listener's connection errors are logged, not emitted). */
const logged = [];
const keep = (level) => (obj, msg) => {
  if (logged.length < 20) logged.push({ level, msg, code: obj?.err?.code, error: obj?.err?.message });
};
const logger = { debug() {}, info() {}, warn: keep("warn"), error: keep("error") };
const skipq = new Skipq({
  connectionString: config.url,
  schema: config.schema,
  logger,
  poolSize: 1,
  preparedStatements: config.preparedStatements ?? true,
  sessionSettings: config.sessionSettings,
});
const worker = skipq.worker(config.worker ?? {});
/** Database errors the worker survived (claim, outcome, heartbeat, start), by context. */
const errors = [];
worker.on("warning", (error, context) => {
  if (errors.length < 20) errors.push({ context, code: error?.code, message: String(error?.message ?? error) });
});
worker.register("chaos", async (payload, ctx) => {
  if (payload?.ms) await new Promise((resolve) => setTimeout(resolve, payload.ms));
  void ctx;
});
process.on("SIGTERM", () => {
  void worker.stop().then(async () => {
    await skipq.close();
    process.stdout.write(
      `${JSON.stringify({ e: "stopped", pid: process.pid, stats: worker.stats, errors, logged })}\n`,
    );
    process.exit(0);
  });
});
await worker.start();
if (worker.listener) {
  // Wait for the LISTEN connection (or its first failure) so "ready" means wake-ups work.
  const deadline = Date.now() + 10_000;
  while (!worker.listener.connected && Date.now() < deadline && logged.length === 0) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
process.stdout.write(
  `${JSON.stringify({ e: "ready", pid: process.pid, listening: worker.listener?.connected ?? false, logged })}\n`,
);
