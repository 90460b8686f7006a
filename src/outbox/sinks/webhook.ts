/**
 * Webhook sink: POSTs each outbox event as JSON, signed with HMAC-SHA256 over
 * `${timestamp}.${body}` so the receiver can check origin and freshness.
 * Invariants: a delivery counts only on a 2xx answer; every request has a
 * timeout. It never retries itself: the relay owns retries and ordering.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { ValidationError } from "../../core/errors.js";
import { type Duration, toMs } from "../../core/validate.js";
import type { OutboxEvent, OutboxSink } from "../outbox.js";

export interface WebhookSinkOptions {
  /** Where to POST. A function picks a URL per event (e.g. by topic). */
  url: string | ((event: OutboxEvent) => string);
  /** Shared secret for the `x-skipq-signature` header. */
  secret: string;
  /** Per-request timeout (also bounded by the relay's deliveryTimeout). Default "5s". */
  timeout?: Duration;
  /** Extra request headers, e.g. an authorization token. */
  headers?: Record<string, string>;
}

/** Header carrying `sha256=<hex>` of HMAC-SHA256(secret, `${timestamp}.${body}`). */
export const SIGNATURE_HEADER = "x-skipq-signature";
/** Header carrying the signing time in Unix milliseconds. */
export const TIMESTAMP_HEADER = "x-skipq-timestamp";

/** The signature skipq sends for `body` at `timestamp`. */
export function signWebhook(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

/**
 * For receivers: true when `signature` is skipq's for this body and timestamp
 * and the timestamp is within `toleranceMs` of now (default 5 minutes).
 */
export function verifyWebhook(
  secret: string,
  timestamp: string,
  body: string,
  signature: string,
  toleranceMs = 300_000,
): boolean {
  const at = Number(timestamp);
  if (!Number.isFinite(at) || Math.abs(Date.now() - at) > toleranceMs) return false;
  const expected = Buffer.from(signWebhook(secret, timestamp, body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** A sink that POSTs `{ id, topic, key, event, headers, createdAt }` to a URL. */
export function webhookSink(options: WebhookSinkOptions): OutboxSink {
  if (typeof options?.secret !== "string" || options.secret.length < 16) {
    throw new ValidationError("webhookSink needs a secret of at least 16 characters for the HMAC signature");
  }
  if (typeof options.url !== "string" && typeof options.url !== "function") {
    throw new ValidationError("webhookSink needs a url (string or function of the event)");
  }
  if (typeof options.url === "string") new URL(options.url);
  const timeoutMs = toMs("timeout", options.timeout ?? "5s", { allowZero: false });
  return {
    name: "webhook",
    async deliver(event, signal) {
      const url = typeof options.url === "function" ? options.url(event) : options.url;
      const body = JSON.stringify({
        id: event.id,
        topic: event.topic,
        key: event.key,
        event: event.event,
        headers: event.headers,
        createdAt: event.createdAt,
      });
      const timestamp = String(Date.now());
      const response = await fetch(url, {
        method: "POST",
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
        headers: {
          ...options.headers,
          "content-type": "application/json",
          "x-skipq-event-id": event.id,
          "x-skipq-topic": event.topic,
          "x-skipq-key": encodeURIComponent(event.key),
          "x-skipq-attempt": String(event.attempt),
          [TIMESTAMP_HEADER]: timestamp,
          [SIGNATURE_HEADER]: signWebhook(options.secret, timestamp, body),
        },
      });
      // Drain the body so the connection can be reused.
      await response.arrayBuffer().catch(() => undefined);
      if (response.status < 200 || response.status > 299) {
        throw new Error(
          `webhook ${url} answered ${response.status} ${response.statusText} for outbox event ${event.id}`,
        );
      }
    },
  };
}
