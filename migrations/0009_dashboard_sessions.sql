-- Dashboard sign-ins live server-side, so that signing out ends a session
-- everywhere, an idle one expires, and replicas sharing a session secret share
-- sessions. Independent of every other migration: it only adds this table.

-- One row per signed-in browser. id is an HMAC of the cookie value under the
-- dashboard's key (derived from its session secret and credentials): reading
-- this table gives nothing a browser could present, and changing the
-- credentials or the secret orphans every row, which signs everyone out.
-- A row is valid while expires_at (absolute, from sign-in) is ahead and
-- last_seen_at is within the idle timeout; sign-out deletes it, and each
-- sign-in deletes rows that are no longer valid. No index beyond the key: the
-- table holds the sessions of the last sessionTtl, a handful of rows.
CREATE TABLE dashboard_sessions (
  id           text        PRIMARY KEY,
  principal    text        NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL
);
