-- 0017: making the history partition that holds now() no longer fails the
-- outcomes written meanwhile. ATTACH PARTITION takes only SHARE UPDATE
-- EXCLUSIVE on the parent, so an outcome that began routing before the attach
-- committed still sees the old partition list: it routes its row to DEFAULT,
-- waits for the attach's lock on DEFAULT, and then fails DEFAULT's new
-- partition constraint (23514, "new row for relation
-- job_history_completed_default violates partition constraint"). It happened
-- on the maintainer's first pass of a new schema, under load (the fleet
-- suite's 100-process drain). For a range that has begun, the parent is now
-- locked in SHARE mode first: outcomes in flight finish, new ones wait for the
-- commit and then see the new partition. Ranges in the future, or over an
-- hour in the past (an upgrade's moves of old rows), take no such lock: no
-- outcome routes into them.

CREATE OR REPLACE FUNCTION skipq_history_partition(parent_table text, range_from timestamptz, range_to timestamptz)
RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout TO '2s' AS $fn$
DECLARE
  part text := format('%s_p%s', parent_table, to_char(range_from AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI'));
BEGIN
  IF parent_table NOT IN ('job_history_completed', 'job_history_failed') THEN
    RAISE EXCEPTION 'skipq_history_partition: unknown history table %', parent_table USING ERRCODE = '22023';
  END IF;
  IF range_to <= range_from THEN
    RAISE EXCEPTION 'skipq_history_partition: empty range [%, %)', range_from, range_to USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT 1 FROM history_partitions h WHERE h.name = part) THEN
    RETURN part;
  END IF;
  IF EXISTS (SELECT 1 FROM history_partitions h
              WHERE h.parent = parent_table AND h.lower < range_to AND h.upper > range_from) THEN
    RETURN NULL;
  END IF;
  -- An outcome's finished_at is its transaction's now(): only a range around the present can be hit.
  IF range_from <= clock_timestamp() AND range_to > clock_timestamp() - interval '1 hour' THEN
    EXECUTE format('LOCK TABLE %I IN SHARE MODE', parent_table);
  END IF;
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent_table);
  EXECUTE format('WITH moved AS (DELETE FROM %I WHERE finished_at >= $1 AND finished_at < $2 RETURNING *)
                  INSERT INTO %I SELECT * FROM moved', parent_table || '_default', part) USING range_from, range_to;
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                 parent_table, part, range_from, range_to);
  INSERT INTO history_partitions (name, parent, lower, upper) VALUES (part, parent_table, range_from, range_to);
  RETURN part;
END
$fn$;
