/**
 * Chaos-suite setup and teardown: clears the per-row figure files before the
 * run and merges those written by this run into test/chaos/results.json after
 * it (rows not run this time keep their previous figures, marked with their date).
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const resultsDir = path.join(here, ".results");
const resultsFile = path.join(here, "results.json");

export function setup(): () => void {
  rmSync(resultsDir, { recursive: true, force: true });
  const started = Date.now();
  return () => {
    if (!existsSync(resultsDir)) return;
    const previous = existsSync(resultsFile)
      ? (JSON.parse(readFileSync(resultsFile, "utf8")) as { rows: Array<{ row: string }> })
      : { rows: [] };
    const rows = new Map(previous.rows.map((r) => [r.row, r]));
    const measuredAt = new Date().toISOString();
    let chaosRows = 0;
    for (const file of readdirSync(resultsDir)) {
      const row = JSON.parse(readFileSync(path.join(resultsDir, file), "utf8")) as { row: string };
      rows.set(row.row, { ...row, measuredAt } as { row: string });
      if (!row.row.startsWith("N")) chaosRows++;
    }
    const order = (r: string) =>
      `${String("PDRCTISFMBN".indexOf(r[0] ?? "Z")).padStart(2, "0")}${r.slice(1).padStart(3, "0")}`;
    const merged = {
      generatedAt: measuredAt,
      // The fleet suite (rows N*, npm run test:fleet) shares this file; its run is not the chaos suite's.
      suiteSeconds:
        chaosRows > 0
          ? Math.round((Date.now() - started) / 1000)
          : (previous as { suiteSeconds?: number }).suiteSeconds,
      machine: { node: process.version, cpus: os.cpus().length, platform: `${os.platform()}-${os.arch()}` },
      rows: [...rows.values()].sort((a, b) => order(a.row).localeCompare(order(b.row))),
    };
    writeFileSync(resultsFile, `${JSON.stringify(merged, null, 2)}\n`);
    rmSync(resultsDir, { recursive: true, force: true });
  };
}
