/**
 * `skipq dashboard`: serves the web dashboard for the configured schema until
 * SIGTERM or SIGINT. Credentials come from SKIPQ_DASHBOARD_TOKEN, or
 * SKIPQ_DASHBOARD_USER and SKIPQ_DASHBOARD_PASSWORD. Without them it serves
 * loopback only, with a one-time token it prints; it never listens on another
 * address without credentials. The session secret comes from
 * SKIPQ_DASHBOARD_SESSION_SECRET or a file, never a flag value (`ps` shows those).
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { defaultLogger } from "../../core/logger.js";
import { isLoopback, resolveCredentials } from "../../ops/dashboard/auth.js";
import { startDashboard } from "../../ops/dashboard/server.js";
import { Skipq } from "../../skipq.js";
import { asCliError, checkSchema, requireDatabase, resolveConfig } from "../context.js";
import { CliError } from "../errors.js";
import { parseInteger } from "../parse.js";
import { printError } from "../terminal.js";

interface DashboardFlags {
  port: string;
  host: string;
  basePath?: string;
  metricsPublic?: boolean;
  secureCookies?: boolean;
  trustProxy?: boolean;
  sessionSecretFile?: string;
}

/** The secret in a file (a trailing newline dropped), so it never shows in `ps` as a flag value would. */
function readSecret(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new CliError(
      `--session-secret-file ${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); create it with \`openssl rand -hex 32 > ${file}\``,
    );
  }
  const secret = text.replace(/\r?\n$/, "");
  if (secret.length < 32)
    throw new CliError(
      `--session-secret-file ${file} holds ${secret.length} characters; a session secret needs at least 32 (\`openssl rand -hex 32\`)`,
    );
  return secret;
}

function log(line: string): void {
  printError(`skipq dashboard: ${line}\n`);
}

export function dashboardCommand(program: Command): void {
  program
    .command("dashboard")
    .description("serve the web dashboard (sign-in required) until SIGTERM/SIGINT")
    .option("-p, --port <n>", "port to listen on (0 picks a free one)", "4680")
    .option("-H, --host <address>", "address to listen on; anything but loopback needs credentials", "127.0.0.1")
    .option("--base-path <path>", 'serve under a path prefix, e.g. "/skipq" behind a proxy')
    .option("--metrics-public", "serve /metrics without sign-in (for a Prometheus without credentials)")
    .option("--secure-cookies", "mark cookies Secure: TLS ends at a proxy in front of every request")
    .option(
      "--trust-proxy",
      "trust X-Forwarded-Proto/-For/-Host from the reverse proxy in front (Secure cookies for HTTPS sign-ins, throttling by the real client)",
    )
    .option(
      "--session-secret-file <path>",
      "read the session secret (at least 32 characters) from a file, to keep sessions across restarts and replicas",
    )
    .addHelpText(
      "after",
      `
Credentials (required for any host but 127.0.0.1/::1):
  SKIPQ_DASHBOARD_TOKEN                            a token of at least 16 characters
  SKIPQ_DASHBOARD_USER + SKIPQ_DASHBOARD_PASSWORD  sign-in form and HTTP Basic
Without them, on loopback, a one-time token is generated and printed.
SKIPQ_DASHBOARD_SESSION_SECRET (or --session-secret-file) keeps sessions valid
across restarts and replicas; without it a restart signs everyone out.

Examples:
  $ SKIPQ_DASHBOARD_TOKEN=$(openssl rand -hex 24) skipq dashboard --port 4680
  $ skipq dashboard --host 0.0.0.0 --port 8080     # refused unless credentials are set
  $ skipq dashboard --base-path /skipq --trust-proxy --session-secret-file /run/secrets/skipq   # behind a TLS proxy`,
    )
    .action(async (flags: DashboardFlags, command: Command) => {
      const config = resolveConfig(command);
      const connectionString = requireDatabase(config);
      const port = parseInteger("--port", flags.port, 0, 65_535);
      const sessionSecret = flags.sessionSecretFile === undefined ? undefined : readSecret(flags.sessionSecretFile);
      let credentials: ReturnType<typeof resolveCredentials>;
      try {
        credentials = resolveCredentials(undefined);
      } catch (error) {
        throw new CliError((error as Error).message);
      }
      // Only on loopback: anywhere else startDashboard must see "no credentials" and refuse.
      const generated = !credentials && isLoopback(flags.host) ? randomBytes(24).toString("base64url") : undefined;
      const skipq = new Skipq({
        connectionString,
        ...(config.readConnectionString ? { readConnectionString: config.readConnectionString } : {}),
        schema: config.schema,
        poolSize: 4,
        logger: defaultLogger,
      });
      try {
        await checkSchema(skipq);
        const running = await startDashboard({
          skipq,
          port,
          host: flags.host,
          ...(generated ? { auth: { token: generated } } : {}),
          ...(flags.basePath ? { basePath: flags.basePath } : {}),
          metricsAuth: !flags.metricsPublic,
          secureCookies: flags.secureCookies === true,
          trustProxy: flags.trustProxy === true,
          ...(sessionSecret === undefined ? {} : { sessionSecret }),
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
