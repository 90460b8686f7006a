-- The outbox relay's claim rewrites every claimed row (attempts, lease,
-- locked_by, lease_expires_at: none of them indexed). With room left on the
-- page that rewrite is a HOT update, adding no entry to any of the table's
-- four indexes; on full pages each claimed event cost three index insertions.
-- Measured on 10,000 claimed events over 100 keys: the claim statement took
-- 125-160 ms at fillfactor 50 against 260-270 ms at 100 (docs/performance.md,
-- "The outbox relay"). The price is room: undelivered events take up to twice
-- the pages, and delivered ones are pruned. Applies to pages written from now on.
ALTER TABLE outbox SET (fillfactor = 50);
