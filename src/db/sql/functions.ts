/**
 * The SQL functions whose text is generated here rather than written in a
 * migration by hand (test/db/functions.test.ts checks the migrations hold it).
 */
import { claimFunctionSql } from "./claimFunction.js";
import { claimLockKeySql, fairFunctionSql } from "./fairFunction.js";

/** Function name → its CREATE OR REPLACE text, as the last migration defining it must hold it. */
export function generatedFunctions(): Record<string, string> {
  return {
    skipq_claim_next: claimFunctionSql(),
    skipq_claim_lock_key: claimLockKeySql(),
    skipq_claim_fair: fairFunctionSql(),
  };
}
