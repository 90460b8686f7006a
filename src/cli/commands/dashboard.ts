/**
 * `skipq dashboard`: serves the web dashboard for the configured schema until
 * SIGTERM or SIGINT. Credentials come from SKIPQ_DASHBOARD_TOKEN, or
 * SKIPQ_DASHBOARD_USER and SKIPQ_DASHBOARD_PASSWORD. Without them it serves
 * loopback only, with a one-time token it prints; it never listens on another
 * address without credentials.
 */
import { randomBytes } from "node:crypto";
import type { Command } from "commander";
import { Skipq } from "../../core/client.js";
import { defaultLogger } from "../../core/logger.js";
import { isLoopback, resolveCredentials } from "../../ops/dashboard/auth.js";
import { startDashboard } from "../../ops/dashboard/server.js";
import { asCliError, checkSchema, requireDatabase, resolveConfig } from "../context.js";
import { CliError } from "../errors.js";
import { parseInteger } from "../parse.js";

interface DashboardFlags {
  port: string;
  host: string;
  basePath?: string;
  metricsPublic?: boolean;
}

function log(line: string): void {
  process.stderr.write(`skipq dashboard: ${line}\n`);
}

export function dashboardCommand(program: Command): void {
  program
    .command("dashboard")
    .description("serve the web dashboard (sign-in required) until SIGTERM/SIGINT")
    .option("-p, --port <n>", "port to listen on (0 picks a free one)", "4680")
    .option("-H, --host <address>", "address to listen on; anything but loopback needs credentials", "127.0.0.1")
    .option("--base-path <path>", 'serve under a path prefix, e.g. "/skipq" behind a proxy')
    .option("--metrics-public", "serve /metrics without sign-in (for a Prometheus without credentials)")
    .addHelpText(
      "after",
      `
Credentials (required for any host but 127.0.0.1/::1):
  SKIPQ_DASHBOARD_TOKEN                            a token of at least 16 characters
  SKIPQ_DASHBOARD_USER + SKIPQ_DASHBOARD_PASSWORD  sign-in form and HTTP Basic
Without them, on loopback, a one-time token is generated and printed.

Examples:
  $ SKIPQ_DASHBOARD_TOKEN=$(openssl rand -hex 24) skipq dashboard --port 4680
  $ skipq dashboard --host 0.0.0.0 --port 8080     # refused unless credentials are set`,
    )
    .action(async (flags: DashboardFlags, command: Command) => {
      const config = resolveConfig(command);
      const connectionString = requireDatabase(config);
      const port = parseInteger("--port", flags.port, 0, 65_535);
      let credentials: ReturnType<typeof resolveCredentials>;
      try {
        credentials = resolveCredentials(undefined);
      } catch (error) {
        throw new CliError((error as Error).message);
      }
      // Only on loopback: anywhere else startDashboard must see "no credentials" and refuse.
      const generated = !credentials && isLoopback(flags.host) ? randomBytes(24).toString("base64url") : undefined;
      const skipq = new Skipq({ connectionString, schema: config.schema, poolSize: 4, logger: defaultLogger });
      try {
        await checkSchema(skipq);
        const running = await startDashboard({
          skipq,
          port,
          host: flags.host,
          ...(generated ? { auth: { token: generated } } : {}),
          ...(flags.basePath ? { basePath: flags.basePath } : {}),
          metricsAuth: !flags.metricsPublic,
          logger: defaultLogger,
        });
        log(`schema "${config.schema}" at ${running.url}`);
        if (generated)
          log(
            `no credentials configured: sign in with the one-time token ${generated} (set SKIPQ_DASHBOARD_TOKEN to choose one)`,
          );
        await new Promise<void>((resolve) => {
          process.once("SIGTERM", () => resolve());
          process.once("SIGINT", () => resolve());
        });
        await running.close();
        log("stopped");
      } catch (error) {
        throw asCliError(error, config);
      } finally {
        await skipq.close().catch(() => undefined);
      }
    });
}
