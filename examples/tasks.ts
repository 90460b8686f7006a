// The same shape in TypeScript, typed with the library's Handler and
// JobContext: `skipq worker --tasks examples/tasks.ts` loads it with tsx.
import type { JobContext } from "../src/index.js";

interface Greeting {
  name: string;
}

export default {
  greet: async (payload: Greeting, ctx: JobContext<Greeting>): Promise<void> => {
    ctx.log.info({ attempt: ctx.attempt }, `hello, ${payload.name}`);
  },
};
