/**
 * The SQL functions whose text is generated here rather than written in a
 * migration by hand (test/db/functions.test.ts checks the migrations hold it).
 */
import { claimFunctionSql } from "./claimFunction.js";
import { claimLockKeySql, fairFunctionSql } from "./fairFunction.js";
import { completeFunctionSql, failFunctionSql, heartbeatFunctionSql, releaseFunctionSql } from "./protocolFunctions.js";

/**
 * Function name → its CREATE OR REPLACE text, as the last migration defining it must hold it (a name with
 * several signatures: each one's definition, in this order, separated by a blank line).
 */
export function generatedFunctions(): Record<string, string> {
  return {
    skipq_claim_next: claimFunctionSql(),
    skipq_claim_lock_key: claimLockKeySql(),
    skipq_claim_fair: fairFunctionSql(),
    skipq_complete: completeFunctionSql(),
    skipq_fail: failFunctionSql(),
    skipq_release: releaseFunctionSql(),
    skipq_heartbeat: heartbeatFunctionSql(),
  };
}
