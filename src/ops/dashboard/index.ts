/**
 * The dashboard's public surface: the mountable handler, the standalone
 * server, the redaction helpers and the escaping helper.
 */
export type { DashboardAuth } from "./auth.js";
export {
  createDashboard,
  type Dashboard,
  type DashboardHandler,
  type DashboardOptions,
  type FetchContext,
  type FetchHandler,
} from "./handler.js";
export { escapeHtml } from "./html.js";
export { defaultRedactor, type Redactor, type RedactTarget, redactKeys, SECRET_KEY_PATTERN } from "./redact.js";
export { type RunningDashboard, type StartDashboardOptions, startDashboard } from "./server.js";
