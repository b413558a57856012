-- Every SQL statement batchgate's Postgres job store runs, as named blocks: a line `-- name --`
-- starts a block that runs to the next header. `schema` builds a fresh schema; the
-- `migration_NNNN` blocks, applied in order, must build exactly the same thing (a test checks).
-- Parameters are psycopg's `%(name)s`; many-row writes pass arrays and `unnest` them, so a chunk
-- of any size is one statement. `now` is NULL in production: the server's clock, which every
-- worker shares, decides when a lease expires; tests pass their own.

-- schema --
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id TEXT NOT NULL UNIQUE,
    input_path TEXT NOT NULL,
    input_sha256 TEXT NOT NULL,
    output_path TEXT NOT NULL,
    config_path TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    task_total BIGINT NOT NULL,
    options BYTEA NOT NULL,
    next_order BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE tasks (
    job BIGINT NOT NULL REFERENCES jobs (id),
    seq BIGINT NOT NULL,
    line_no BIGINT NOT NULL,
    custom_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    body BYTEA NOT NULL,
    output_line BYTEA,
    error TEXT,
    provider TEXT,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    completed_order BIGINT,
    lease BIGINT,
    route TEXT,
    step TEXT,
    PRIMARY KEY (job, seq)
);
CREATE INDEX tasks_by_state ON tasks (job, state, seq);
CREATE INDEX tasks_by_completion ON tasks (job, completed_order) WHERE completed_order IS NOT NULL;
CREATE TABLE blobs (
    job BIGINT NOT NULL REFERENCES jobs (id),
    key TEXT NOT NULL,
    value BYTEA NOT NULL,
    PRIMARY KEY (job, key)
);
CREATE INDEX tasks_by_lease ON tasks (lease) WHERE lease IS NOT NULL;
CREATE TABLE leases (
    token BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job BIGINT NOT NULL REFERENCES jobs (id),
    owner TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX leases_by_expiry ON leases (job, expires_at);
INSERT INTO schema_version (version) VALUES (3);

-- migration_0001 --
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id TEXT NOT NULL UNIQUE,
    input_path TEXT NOT NULL,
    input_sha256 TEXT NOT NULL,
    output_path TEXT NOT NULL,
    config_path TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    task_total BIGINT NOT NULL,
    options BYTEA NOT NULL,
    next_order BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE tasks (
    job BIGINT NOT NULL REFERENCES jobs (id),
    seq BIGINT NOT NULL,
    line_no BIGINT NOT NULL,
    custom_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    body BYTEA NOT NULL,
    output_line BYTEA,
    error TEXT,
    provider TEXT,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    completed_order BIGINT,
    PRIMARY KEY (job, seq)
);
CREATE INDEX tasks_by_state ON tasks (job, state, seq);
CREATE INDEX tasks_by_completion ON tasks (job, completed_order) WHERE completed_order IS NOT NULL;
CREATE TABLE blobs (
    job BIGINT NOT NULL REFERENCES jobs (id),
    key TEXT NOT NULL,
    value BYTEA NOT NULL,
    PRIMARY KEY (job, key)
);
INSERT INTO schema_version (version) VALUES (1);

-- migration_0002 --
ALTER TABLE tasks ADD COLUMN lease BIGINT;
CREATE INDEX tasks_by_lease ON tasks (lease) WHERE lease IS NOT NULL;
CREATE TABLE leases (
    token BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job BIGINT NOT NULL REFERENCES jobs (id),
    owner TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX leases_by_expiry ON leases (job, expires_at);
UPDATE schema_version SET version = 2;

-- migration_0003 --
-- Fan-out and pipelines: a task may name the route and the pipeline step it runs (NULL for a
-- plain task).
ALTER TABLE tasks ADD COLUMN route TEXT;
ALTER TABLE tasks ADD COLUMN step TEXT;
UPDATE schema_version SET version = 3;

-- current_schema --
SELECT current_schema();

-- list_tables --
SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() ORDER BY table_name;

-- get_schema_version --
SELECT max(version) FROM schema_version;

-- migrate_lock --
SELECT pg_advisory_xact_lock(%(key)s);

-- job_lock --
SELECT pg_try_advisory_lock(%(key)s);

-- job_unlock --
SELECT pg_advisory_unlock(%(key)s);

-- job_insert --
INSERT INTO jobs (job_id, input_path, input_sha256, output_path, config_path, status, stop_reason,
                  created_at, updated_at, task_total, options)
VALUES (%(job_id)s, %(input_path)s, %(input_sha256)s, %(output_path)s, %(config_path)s, %(status)s,
        %(stop_reason)s, %(created_at)s, %(updated_at)s, %(task_total)s, %(options)s)
ON CONFLICT (job_id) DO NOTHING
RETURNING id;

-- job_pk --
SELECT id FROM jobs WHERE job_id = %(job_id)s;

-- job_get --
SELECT job_id, input_path, input_sha256, output_path, config_path, status, stop_reason,
       created_at, updated_at, task_total, options
FROM jobs WHERE job_id = %(job_id)s;

-- job_list --
SELECT job_id, input_path, input_sha256, output_path, config_path, status, stop_reason,
       created_at, updated_at, task_total, options
FROM jobs ORDER BY created_at, job_id;

-- job_update --
UPDATE jobs SET
    status = coalesce(%(status)s::text, status),
    stop_reason = nullif(coalesce(%(stop_reason)s::text, stop_reason), ''),
    input_sha256 = coalesce(%(input_sha256)s::text, input_sha256),
    options = coalesce(%(options)s::bytea, options),
    task_total = coalesce(%(task_total)s::bigint, task_total),
    updated_at = %(updated_at)s
WHERE job_id = %(job_id)s;

-- job_take_orders --
UPDATE jobs SET next_order = next_order + %(count)s WHERE id = %(job)s RETURNING next_order - %(count)s;

-- task_insert --
INSERT INTO tasks (job, seq, line_no, custom_id, body, route, step)
SELECT %(job)s, t.seq, t.line_no, t.custom_id, t.body, t.route, t.step
FROM unnest(%(seqs)s::bigint[], %(lines)s::bigint[], %(ids)s::text[], %(bodies)s::bytea[],
            %(routes)s::text[], %(steps)s::text[])
     AS t (seq, line_no, custom_id, body, route, step)
ON CONFLICT (job, seq) DO NOTHING;

-- task_claim --
WITH picked AS MATERIALIZED (
    SELECT seq FROM tasks WHERE job = %(job)s AND state = 'pending'
    ORDER BY seq LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE tasks SET state = 'running', lease = %(token)s::bigint
FROM picked WHERE tasks.job = %(job)s AND tasks.seq = picked.seq
RETURNING tasks.seq, tasks.line_no, tasks.custom_id, tasks.body, tasks.route, tasks.step;

-- task_claim_seqs --
WITH picked AS MATERIALIZED (
    SELECT seq FROM tasks WHERE job = %(job)s AND state = 'pending' AND seq = ANY(%(seqs)s::bigint[])
    ORDER BY seq
    FOR UPDATE
)
UPDATE tasks SET state = 'running', lease = NULL
FROM picked WHERE tasks.job = %(job)s AND tasks.seq = picked.seq
RETURNING tasks.seq, tasks.line_no, tasks.custom_id, tasks.body, tasks.route, tasks.step;

-- task_insert_done --
INSERT INTO tasks (job, seq, line_no, custom_id, body, route, step, state, attempts, output_line, error,
                   provider, prompt_tokens, completion_tokens, cost_usd, completed_order)
SELECT %(job)s, t.seq, t.line_no, t.custom_id, t.body, t.route, t.step, o.state, o.attempts, o.output_line,
       o.error, o.provider, o.prompt_tokens, o.completion_tokens, o.cost_usd, o.completed_order
FROM unnest(%(seqs)s::bigint[], %(tlines)s::bigint[], %(ids)s::text[], %(bodies)s::bytea[],
            %(routes)s::text[], %(steps)s::text[])
     WITH ORDINALITY AS t (seq, line_no, custom_id, body, route, step, n)
JOIN unnest(%(states)s::text[], %(attempts)s::integer[], %(lines)s::bytea[], %(errors)s::text[],
            %(providers)s::text[], %(prompt)s::bigint[], %(completion)s::bigint[],
            %(cost)s::double precision[], %(orders)s::bigint[])
     WITH ORDINALITY AS o (state, attempts, output_line, error, provider, prompt_tokens,
                           completion_tokens, cost_usd, completed_order, n) ON o.n = t.n
ON CONFLICT (job, seq) DO NOTHING;

-- task_complete --
UPDATE tasks AS t SET state = o.state, attempts = o.attempts, output_line = o.output_line,
    error = o.error, provider = o.provider, prompt_tokens = o.prompt_tokens,
    completion_tokens = o.completion_tokens, cost_usd = o.cost_usd, completed_order = o.completed_order
FROM unnest(%(seqs)s::bigint[], %(states)s::text[], %(attempts)s::integer[], %(lines)s::bytea[],
            %(errors)s::text[], %(providers)s::text[], %(prompt)s::bigint[], %(completion)s::bigint[],
            %(cost)s::double precision[], %(orders)s::bigint[])
     AS o (seq, state, attempts, output_line, error, provider, prompt_tokens, completion_tokens,
           cost_usd, completed_order)
WHERE t.job = %(job)s AND t.seq = o.seq AND t.state != 'succeeded'
  AND (%(token)s::bigint IS NULL OR (t.lease = %(token)s::bigint AND t.state = 'running'));

-- task_seqs_present --
SELECT count(*) FROM tasks WHERE job = %(job)s AND seq = ANY(%(seqs)s::bigint[]);

-- task_requeue --
UPDATE tasks SET state = 'pending', attempts = 0, output_line = NULL, error = NULL, provider = NULL,
                 prompt_tokens = 0, completion_tokens = 0, cost_usd = 0, completed_order = NULL,
                 lease = NULL
WHERE job = %(job)s AND state = %(state)s;

-- task_counts --
SELECT state, count(*) FROM tasks WHERE job = %(job)s GROUP BY state;

-- task_totals --
SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0),
       coalesce(sum(cost_usd), 0.0), coalesce(sum(attempts), 0)
FROM tasks WHERE job = %(job)s AND state IN ('succeeded', 'failed');

-- results_by_seq --
SELECT seq, line_no, custom_id, state, attempts, output_line, error, completed_order,
       CASE WHEN %(with_bodies)s THEN body END, route, step, cost_usd
FROM tasks
WHERE job = %(job)s AND seq > %(after)s AND state = ANY(%(states)s::text[])
ORDER BY seq LIMIT %(limit)s;

-- results_by_completion --
SELECT seq, line_no, custom_id, state, attempts, output_line, error, completed_order,
       CASE WHEN %(with_bodies)s THEN body END, route, step, cost_usd
FROM tasks
WHERE job = %(job)s AND completed_order > %(after)s AND state = ANY(%(states)s::text[])
ORDER BY completed_order LIMIT %(limit)s;

-- results_uncompleted_by_seq --
SELECT seq, line_no, custom_id, state, attempts, output_line, error, completed_order,
       CASE WHEN %(with_bodies)s THEN body END, route, step, cost_usd
FROM tasks
WHERE job = %(job)s AND completed_order IS NULL AND seq > %(after)s AND state = ANY(%(states)s::text[])
ORDER BY seq LIMIT %(limit)s;

-- task_body --
SELECT body FROM tasks WHERE job = %(job)s AND seq = %(seq)s;

-- blob_put --
INSERT INTO blobs (job, key, value) VALUES (%(job)s, %(key)s, %(value)s)
ON CONFLICT (job, key) DO UPDATE SET value = excluded.value;

-- blob_get --
SELECT value FROM blobs WHERE job = %(job)s AND key = %(key)s;

-- lease_reap --
WITH gone AS (
    DELETE FROM leases
    WHERE job = %(job)s
      AND expires_at <= coalesce(%(now)s::double precision, extract(epoch FROM clock_timestamp())::double precision)
    RETURNING token
)
UPDATE tasks SET state = 'pending', lease = NULL
WHERE job = %(job)s AND state = 'running' AND lease IN (SELECT token FROM gone);

-- lease_new --
INSERT INTO leases (job, owner, expires_at)
VALUES (%(job)s, %(owner)s,
        coalesce(%(now)s::double precision, extract(epoch FROM clock_timestamp())::double precision)
        + %(seconds)s::double precision)
RETURNING token, expires_at;

-- lease_renew --
UPDATE leases
SET expires_at = coalesce(%(now)s::double precision, extract(epoch FROM clock_timestamp())::double precision)
                 + %(seconds)s::double precision
WHERE token = %(token)s AND job = %(job)s
  AND expires_at > coalesce(%(now)s::double precision, extract(epoch FROM clock_timestamp())::double precision)
RETURNING expires_at;

-- lease_hold --
SELECT token FROM leases
WHERE token = %(token)s AND job = %(job)s
  AND expires_at > coalesce(%(now)s::double precision, extract(epoch FROM clock_timestamp())::double precision)
FOR UPDATE;

-- lease_release --
WITH gone AS (
    DELETE FROM leases WHERE token = %(token)s AND job = %(job)s RETURNING token
)
UPDATE tasks SET state = 'pending', lease = NULL
WHERE job = %(job)s AND state = 'running' AND lease IN (SELECT token FROM gone);
