/**
 * Saga: ordered steps, each with a compensation, each run as a job. When a
 * step dies, the completed steps are undone in reverse order.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/saga.ts
 */
import { defineSaga, FailPermanently, getSaga, Sagas, Skipq } from "skipq";

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

const trip = defineSaga<{ traveller: string; carAvailable: boolean }>("book-trip", [
  {
    name: "flight",
    action: ({ input }) => ({ flight: `FL-${input.traveller}` }),
    compensate: ({ previous }) => console.log(`cancelled flight ${(previous as { flight: string }).flight}`),
  },
  {
    name: "hotel",
    // Each step sees the previous step's result.
    action: ({ previous }) => ({ hotel: "H-1", near: (previous as { flight: string }).flight }),
    compensate: () => console.log("cancelled hotel H-1"),
  },
  {
    name: "car",
    action: ({ input }) => {
      if (!input.carAvailable) throw new FailPermanently("no car available");
      return { car: "C-9" };
    },
  },
]);

const sagas = new Sagas(skipq, [trip], { maxAttempts: 3 });
await sagas.start();
const { id } = await sagas.startSaga(trip, { traveller: "ada", carAvailable: false });

let state = await getSaga(skipq, id);
while (state && !["completed", "compensated", "failed"].includes(state.status)) {
  await new Promise((r) => setTimeout(r, 50));
  state = await getSaga(skipq, id);
}
console.log(`saga ${id}: ${state?.status} (${state?.error})`);
await sagas.stop();
await skipq.close();
