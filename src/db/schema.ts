/**
 * The schema context: one skipq installation's names — the schema (validated
 * and quoted), the NOTIFY channel its workers listen on, and the key its
 * advisory locks are scoped by. Everything that builds SQL takes these from
 * here, never from a user string.
 */
import { assertSchema, quoteIdent } from "../core/validate.js";

export class Schema {
  /** The unquoted name (validated: lowercase letters, digits and "_"). */
  readonly name: string;
  /** The quoted name, safe to splice into SQL. */
  readonly sql: string;
  /** NOTIFY channel for this schema; notifications carry a queue name or a "!" control message. */
  readonly channel: string;

  constructor(name: string) {
    this.name = assertSchema(name);
    this.sql = quoteIdent(this.name);
    this.channel = `skipq:${this.name}`;
  }

  /** `<schema>.<table>`, quoted. */
  table(name: string): string {
    return `${this.sql}.${name}`;
  }
}
