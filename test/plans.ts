/**
 * Plans of what a statement runs, nested statements included: a call of a
 * plpgsql function (the claim, the SQL protocol) shows only a Function Scan in
 * EXPLAIN, so auto_explain (log_nested_statements, sent back as NOTICEs)
 * reports the plan of every statement it runs, with actual rows and buffers.
 */
import type pg from "pg";

export type PlanNode = {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Filter"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
};

export function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

export interface NestedPlan {
  query: string;
  text: string;
  nodes: PlanNode[];
}

/**
 * Runs `text` with `values` on `client` in a transaction that is rolled back, and returns the plan of every
 * statement it ran (the caller's own last), as auto_explain logged them.
 */
export async function nestedPlans(client: pg.PoolClient, text: string, values: unknown[] = []): Promise<NestedPlan[]> {
  const seen: string[] = [];
  const onNotice = (n: { message?: string }) => {
    if (n.message?.includes("plan:")) seen.push(n.message);
  };
  client.on("notice", onNotice);
  try {
    await client.query(`LOAD 'auto_explain'`);
    await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;
                        SET auto_explain.log_buffers = on; SET auto_explain.log_nested_statements = on;
                        SET auto_explain.log_level = notice; SET auto_explain.log_format = json`);
    await client.query("BEGIN");
    try {
      await client.query(text, values);
    } finally {
      await client.query("ROLLBACK");
    }
  } finally {
    await client.query("RESET auto_explain.log_min_duration").catch(() => undefined);
    client.off("notice", onNotice);
  }
  return seen.map((message) => {
    const json = JSON.parse(message.slice(message.indexOf("plan:") + "plan:".length));
    return { query: json["Query Text"] ?? "", text: message, nodes: nodes(json.Plan) };
  });
}
