/** One id check for every id skipq takes (jobs, batches, sagas, audit rows, dashboard routes). */
import { expect, test } from "vitest";
import { assertId, ID_PATTERN, isId } from "../../src/core/validate.js";

test("an id is 1 to 19 digits without a leading zero, within a bigint", () => {
  for (const ok of ["1", "42", "9223372036854775807"]) expect(isId(ok), ok).toBe(true);
  for (const bad of ["", "0", "01", "-1", "1.5", " 1", "1e3", "9223372036854775808", "99999999999999999999", "１"])
    expect(isId(bad), bad).toBe(false);
  expect(assertId(7)).toBe("7");
  expect(() => assertId("9223372036854775808")).toThrow(/at most 2\^63 - 1/);
  // Routes embed the same pattern; the range check stays with isId.
  expect(new RegExp(`^/jobs/(${ID_PATTERN})$`).exec("/jobs/123")?.[1]).toBe("123");
});
