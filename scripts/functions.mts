// Prints the generated text of a SQL function (src/db/sql/functions.ts), to paste into a new migration:
//   npx tsx scripts/functions.mts skipq_claim_next
import { generatedFunctions } from "../src/db/sql/functions.ts";

const name = process.argv[2];
const all = generatedFunctions();
if (!name || !(name in all)) {
  console.error(`usage: npx tsx scripts/functions.mts <${Object.keys(all).join(" | ")}>`);
  process.exit(2);
}
process.stdout.write(`${all[name]}\n`);
