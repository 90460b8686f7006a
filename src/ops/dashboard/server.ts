/**
 * `startDashboard`: the dashboard on its own HTTP server. It refuses to
 * listen on a non-loopback address without credentials; on loopback with no
 * credentials configured it generates a one-time token, logs the sign-in URL
 * and returns the token, so authentication is never silently off.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ValidationError } from "../../core/errors.js";
import { defaultLogger } from "../../core/logger.js";
import { generateToken, isLoopback, resolveCredentials } from "./auth.js";
import { createDashboard, type Dashboard, type DashboardOptions } from "./handler.js";

export interface StartDashboardOptions extends DashboardOptions {
  /** Port; 0 picks a free one. Default 4680. */
  port?: number;
  /** Address to listen on. Default "127.0.0.1". Any other address needs credentials. */
  host?: string;
}

export interface RunningDashboard {
  /** Where it listens, e.g. http://127.0.0.1:4680/ (with basePath). */
  url: string;
  /** The generated token, when none was configured (loopback only); undefined otherwise. */
  generatedToken: string | undefined;
  dashboard: Dashboard;
  server: http.Server;
  /** Stops listening, ends open connections and closes the client the dashboard created. */
  close(): Promise<void>;
}

export async function startDashboard(options: StartDashboardOptions = {}): Promise<RunningDashboard> {
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 4680;
  const configured = options.auth === false ? undefined : resolveCredentials(options.auth, options.env);
  if (!isLoopback(host) && !configured) {
    throw new ValidationError(
      `refusing to serve the dashboard on ${host} without credentials: set SKIPQ_DASHBOARD_TOKEN (or SKIPQ_DASHBOARD_USER and SKIPQ_DASHBOARD_PASSWORD), or listen on 127.0.0.1`,
    );
  }
  let generatedToken: string | undefined;
  let dashboardOptions: DashboardOptions = options;
  if (options.auth !== false && !configured) {
    generatedToken = generateToken();
    dashboardOptions = { ...options, auth: { token: generatedToken } };
  }
  const dashboard = createDashboard(dashboardOptions);
  const server = http.createServer((req, res) => dashboard.handle(req, res));
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
  } catch (error) {
    await dashboard.close();
    throw error;
  }
  const address = server.address() as AddressInfo;
  const shownHost = host.includes(":") ? `[${host}]` : host;
  const url = `http://${shownHost}:${address.port}${options.basePath?.replace(/\/+$/, "") ?? ""}/`;
  if (generatedToken) {
    (options.logger ?? options.skipq?.logger ?? defaultLogger).warn(
      { url },
      `skipq dashboard: no credentials configured, so a one-time token was generated; sign in at ${url}login with token ${generatedToken}`,
    );
  }
  return {
    url,
    generatedToken,
    dashboard,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }).then(() => dashboard.close()),
  };
}
