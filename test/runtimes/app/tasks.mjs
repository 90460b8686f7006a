// The tasks module of the CLI smoke test (`skipq worker --tasks ./tasks.mjs`).
export default {
  "smoke.cli": async (payload) => ({ seen: payload.n }),
};
